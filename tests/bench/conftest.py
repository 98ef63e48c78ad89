"""Fixtures shared by the benchmark tests."""

from __future__ import annotations

import asyncio
import threading

import pytest

from optigate.emulator.sagemaker_runtime import EmulatorConfig, start

_FAST = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 12}


@pytest.fixture
def emulator_url():
    """The emulator in a background thread, for the synchronous boto3 client."""
    ready = threading.Event()
    state = {}

    def serve():
        async def main():
            runner, port = await start(
                EmulatorConfig.parse(
                    {
                        "endpoints": {
                            "ok": {**_FAST, "output_tokens": 5},
                            "ok-rolling-batch": {**_FAST, "output_tokens": 5, "engine_mode": "rolling-batch"},
                            "throttled": {**_FAST, "throttle_rate": 1.0},
                            "broken": {**_FAST, "model_error_rate": 1.0},
                            "midstream": {**_FAST, "stream_error_rate": 1.0, "fault_after_tokens": 2},
                        }
                    }
                )
            )
            state["url"], state["stop"] = f"http://127.0.0.1:{port}", asyncio.Event()
            ready.set()
            await state["stop"].wait()
            await runner.cleanup()

        state["loop"] = asyncio.new_event_loop()
        state["loop"].run_until_complete(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    yield state["url"]
    state["loop"].call_soon_threadsafe(state["stop"].set)
    thread.join(10)
