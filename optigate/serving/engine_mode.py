"""LMI's engine mode per container version: the one place that says which mode a version runs, the variables
that select it, and what a client sends it.

Two modes (djl-serving, deepjavalibrary/djl-serving at d21927c4a692335fba62a87cc430a5fc00c5f790):

- **async**: vLLM's AsyncLLMEngine behind vLLM's own OpenAI serving modules (`djl_python.lmi_vllm.vllm_async_service`).
  "Starting with LMI v17, the default mode for running vLLM is async mode ... Async mode will become the default,
  and only supported mode, in an upcoming release" (serving/docs/lmi/user_guides/vllm_user_guide.md).
- **rolling-batch**: the synchronous rolling-batch handler (`djl_python.huggingface` with vllm, trtllm or Neuron).

What selects a mode is LmiConfigRecommender.setRollingBatch (wlm/.../LmiConfigRecommender.java): an explicit
`option.rolling_batch` other than `auto` is kept as given (async mode off); `auto` (the default) on a vLLM
container becomes `rolling_batch=disable` + `async_mode=true` from DJL 0.35.0 (LMI v17; branch 0.35.0-dlc,
637866135ee775bc1533808e843d7c32c8a2c179) and `rolling_batch=vllm` before it (0.33.0-dlc, 0.34.0-dlc); PyModel.java
then recommends the entry point `djl_python.lmi_vllm.vllm_async_service` when async_mode is on (0.35.0-dlc; at
0.34.0-dlc there is no such recommendation, async mode needs the entry point named). optigate renders the
recommender's result for `auto` explicitly, the three variables djl-serving's own integration tests set for async
mode (tests/integration/llm/prepare.py, build_vllm_async_model at 0.34.0-dlc), so the mode does not depend on
the recommender recognising the model's architecture as text generation.

What each mode streams for a request (djl-serving 0.35.0-dlc, engines/python/setup/djl_python/):
async answers a chat request (`messages`) with vLLM's `chat.completion.chunk` objects, the SSE `data: ` prefix
stripped, one JSON line each (`application/jsonlines`: lmi_vllm/request_response_utils.py
vllm_stream_output_formatter, async_utils.py create_stream_chunk_output), `usage` on each when the request asks
for `stream_options.continuous_usage_stats`, and an empty line for vLLM's `[DONE]`; the rolling-batch handler
answers LMI's `inputs` schema with one `{"token": {...}}` line per token (output_formatter.py
_jsonlines_output_formatter). optigate's benchmark sends each mode the request whose stream tells the tokens per
chunk: chat with continuous usage to async mode (a draft model emits several tokens per chunk; the usage says how
many), `inputs` to the rolling-batch handler (a line per token): optigate.bench.core.payloads says how to speak each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from optigate.serving import images

EngineModeName = Literal["async", "rolling-batch"]
ASYNC: EngineModeName = "async"
ROLLING_BATCH: EngineModeName = "rolling-batch"
ENGINE_MODES: tuple[EngineModeName, ...] = (ASYNC, ROLLING_BATCH)

#: The first DJL/LMI version whose recommender turns `rolling_batch=auto` into async mode on vLLM (LMI v17).
FIRST_ASYNC_DEFAULT_LMI = (0, 35, 0)
#: The async service's entry point (PyModel.java's recommendation for async mode on a vLLM container).
ASYNC_ENTRY_POINT = "djl_python.lmi_vllm.vllm_async_service"
#: What the recommender leaves (djl-serving) and the variables that say so, for async mode.
ASYNC_ENVIRONMENT = {
    "OPTION_ROLLING_BATCH": "disable",
    "OPTION_ASYNC_MODE": "true",
    "OPTION_ENTRYPOINT": ASYNC_ENTRY_POINT,
}
#: The rolling-batch backend per container family where the sync handler runs (Neuron: the recommender picks).
ROLLING_BATCH_BACKEND = {"lmi": "vllm", "lmi-trtllm": "trtllm", "lmi-neuronx": "auto"}
#: The variables an engine mode is rendered as (config rules keep serving.environment off them).
MODE_VARIABLES = ("OPTION_ROLLING_BATCH", "OPTION_ASYNC_MODE", "OPTION_ENTRYPOINT")

#: What `optigate summary` says of each mode.
MODE_NOTE: dict[EngineModeName, str] = {
    ASYNC: "vLLM's async engine with OpenAI chat/completions streaming, LMI's default since v17",
    ROLLING_BATCH: "LMI's rolling-batch handler; its vLLM backend is deprecated from LMI v17",
}


@dataclass(frozen=True)
class EngineMode:
    """The engine mode one container runs, and the variables that select it."""

    name: EngineModeName
    environment: Mapping[str, str]


def engine_mode(family: str, version: str) -> EngineMode:
    """The mode optigate renders for the LMI container of `family` at `version`: async where the version's
    recommender makes it the default (vLLM, LMI v17 and newer), the rolling-batch handler where the version
    has no async default (older vLLM containers, TensorRT-LLM and Neuron as optigate pins them)."""
    if family == "lmi" and images.version_tuple(version) >= FIRST_ASYNC_DEFAULT_LMI:
        return EngineMode(ASYNC, dict(ASYNC_ENVIRONMENT))
    return EngineMode(ROLLING_BATCH, {"OPTION_ROLLING_BATCH": ROLLING_BATCH_BACKEND[family]})


def recommended_mode(family: str, version: str, environment: Mapping[str, str]) -> EngineModeName:
    """The mode a container of `family` at `version` runs with `environment`, as djl-serving decides it:
    LmiConfigRecommender.setRollingBatch for the rolling batch and async_mode, then the Python engine runs the
    async service only with async_mode on and that service as entry point (named, or recommended by PyModel
    from 0.35.0 on). For a container whose environment optigate did not render (a live package of an
    earlier optigate), so the benchmark talks to it in the mode it really runs."""
    rolling_batch = environment.get("OPTION_ROLLING_BATCH", "auto").strip().lower()
    async_mode = environment.get("OPTION_ASYNC_MODE", "").strip().lower() == "true"
    entry_point = environment.get("OPTION_ENTRYPOINT")
    vllm_async_default = family == "lmi" and images.version_tuple(version) >= FIRST_ASYNC_DEFAULT_LMI
    if rolling_batch == "auto" and vllm_async_default:
        async_mode = True
    if not async_mode or rolling_batch not in ("auto", "disable"):
        return ROLLING_BATCH
    if entry_point is None:
        return ASYNC if vllm_async_default else ROLLING_BATCH
    return ASYNC if entry_point == ASYNC_ENTRY_POINT else ROLLING_BATCH


def container_mode(image: str, environment: Mapping[str, str]) -> EngineModeName:
    """The mode of a container given by its image URI and environment (the live package the gate's twin runs).
    An LMI (vLLM) image names its version in its tag; TensorRT-LLM and Neuron images run the rolling batch."""
    version = images.lmi_version(image)
    if version is None:
        return recommended_mode("lmi-trtllm", "0.0.0", environment)
    return recommended_mode("lmi", ".".join(str(part) for part in version), environment)
