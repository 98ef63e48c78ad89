"""Traffic over an adapter team's inference components: the weighted schedule (deterministic, in proportion,
the same on both sides of a block), the worker against the emulator (each request addressed to its
component, each sample labelled with its adapter), and the merge keeping the labels."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections import Counter

import boto3
import pytest
from moto import mock_aws

from optigate.bench.core.load import SCHEDULE_ROUND, ComponentSchedule, ComponentShare, LoadSpec
from optigate.bench.core.metrics import RunSamples, merge
from optigate.emulator.sagemaker_runtime import EmulatorConfig, start
from optigate.lambdas import handler_source

MIX = (ComponentShare("ic-base", "base", 1.0), ComponentShare("ic-reply", "reply", 3.0))
_FAST = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 5}


def _handler(folder: str):
    spec = importlib.util.spec_from_file_location(f"lambda_{folder}_adapters", handler_source(folder))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


# --------------------------------------------------------------------------- the schedule


def test_the_schedule_is_the_same_for_one_seed_and_differs_for_another():
    first = [c.name for c in ComponentSchedule(MIX, seed=7).first(300)]
    again = [c.name for c in ComponentSchedule(MIX, seed=7).first(300)]
    other = [c.name for c in ComponentSchedule(MIX, seed=8).first(300)]
    assert first == again
    assert first != other
    assert Counter(first) == Counter(other)  # the order is shuffled, the counts are the mix's


def test_the_schedule_keeps_the_weights_within_one_request_at_every_round():
    mix = (ComponentShare("a", "base", 1.0), ComponentShare("b", "x", 2.5), ComponentShare("c", "y", 0.5))
    schedule = ComponentSchedule(mix, seed=3)
    total = sum(c.weight for c in mix)
    for rounds in (1, 2, 5, 17):
        n = rounds * SCHEDULE_ROUND
        counts = Counter(c.adapter for c in schedule.first(n))
        for component in mix:
            assert abs(counts[component.adapter] - n * component.weight / total) < 1, (n, counts)


def test_a_small_share_is_not_rounded_away():
    mix = (ComponentShare("a", "base", 99.0), ComponentShare("b", "rare", 1.0))
    counts = Counter(c.adapter for c in ComponentSchedule(mix, seed=0).first(10 * SCHEDULE_ROUND))
    assert counts["rare"] in (6, 7)


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf"), True, "3"])
def test_a_component_weight_must_be_a_finite_positive_number(weight):
    with pytest.raises(ValueError, match="weight"):
        ComponentShare("ic", "base", weight)


def test_a_spec_refuses_one_adapter_on_two_components():
    with pytest.raises(ValueError, match="each adapter at most once"):
        LoadSpec(concurrency=1, components=(ComponentShare("a", "base", 1), ComponentShare("b", "base", 1)))


# --------------------------------------------------------------------------- the worker against the emulator


@pytest.fixture
def component_emulator_url():
    """An endpoint with two components: `ic-reply` answers ten times slower to its first token."""
    ready, state = threading.Event(), {}

    def serve():
        async def main():
            components = {"ic-base": dict(_FAST), "ic-reply": {**_FAST, "ttft_ms": 200}}
            config = EmulatorConfig.parse({"endpoints": {"team": {**_FAST, "inference_components": components}}})
            runner, port = await start(config)
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


def _event(url: str, **extra) -> dict:
    return {
        "endpoint_name": "team",
        "endpoint_url": url,
        "engine_mode": "async",
        "concurrency": 2,
        "requests": 24,
        "prompt_tokens": 8,
        "max_new_tokens": 5,
        "run_id": "mix",
        "bucket": "results",
        "prefix": "benchmarks",
        "timeout_s": 10,
        **extra,
    }


EVENT_MIX = [{"name": c.name, "adapter": c.adapter, "weight": c.weight} for c in MIX]


@pytest.mark.slow
def test_the_worker_sends_each_request_to_its_component_and_labels_its_samples(component_emulator_url):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        worker, merger = _handler("benchmark"), _handler("benchmark_merge")
        outputs = [
            worker(_event(component_emulator_url, shard=shard, inference_components=EVENT_MIX)) for shard in range(2)
        ]
        shards = [json.loads(s3.get_object(Bucket="results", Key=o["key"])["Body"].read()) for o in outputs]
        shard = shards[0]
        merged_out = merger({"shards": outputs, "bucket": "results", "key": "benchmarks/mix/result.json"})
        merged = json.loads(s3.get_object(Bucket="results", Key="benchmarks/mix/result.json")["Body"].read())
    # The schedule's first 24 of seed 0: the same counts the baseline's worker of this shard sends.
    expected = Counter(c.adapter for c in ComponentSchedule(MIX, seed=0).first(24))
    assert outputs[0]["errors"] == {} and outputs[0]["requests_by_adapter"] == dict(expected)
    assert shard["inference_components"] == EVENT_MIX  # the mix the shard used
    run = shard["runs"][0]
    assert {name: sub["requests"] for name, sub in run["adapters"].items()} == dict(expected)
    # The emulator answered each component with its own behaviour: the header was per request.
    reply_ttft, base_ttft = (min(run["adapters"][name]["samples"]["ttft_ms"]) for name in ("reply", "base"))
    assert reply_ttft >= 180 > 100 > max(run["adapters"]["base"]["samples"]["ttft_ms"]) >= base_ttft
    # The merge keeps the labels: every adapter's samples from both shards, exactly.
    merged_run = merged["runs"][0]
    assert merged_run["adapters"]["reply"]["requests"] == sum(o["requests_by_adapter"]["reply"] for o in outputs)
    shard_base = [t for s in shards for t in s["runs"][0]["adapters"]["base"]["samples"]["ttft_ms"]]
    assert sorted(merged_run["adapters"]["base"]["samples"]["ttft_ms"]) == sorted(shard_base)
    assert merged["inference_components"] == EVENT_MIX
    assert merged_out["summary"]["adapters"]["base"]["requests"] == merged_run["adapters"]["base"]["requests"]
    assert "samples" not in merged_out["summary"]["adapters"]["base"]  # the Step Functions payload stays small


@pytest.mark.slow
def test_the_baseline_and_the_candidate_of_a_block_send_each_adapter_the_same_count(component_emulator_url):
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="results")
        worker = _handler("benchmark")
        sides = [
            worker(_event(component_emulator_url, shard=3, run_id=run_id, requests=40, inference_components=EVENT_MIX))
            for run_id in ("baseline-c2-b0", "candidate-c2-b0")
        ]
    assert sides[0]["requests_by_adapter"] == sides[1]["requests_by_adapter"]
    assert sides[0]["requests_by_adapter"] == dict(
        Counter(c.adapter for c in ComponentSchedule(MIX, 3 * 100_003).first(40))
    )


def test_without_components_the_result_has_no_adapter_keys(component_emulator_url):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        output = _handler("benchmark")(_event(component_emulator_url, shard=0, requests=4))
        shard = json.loads(s3.get_object(Bucket="results", Key=output["key"])["Body"].read())
    assert "requests_by_adapter" not in output and "inference_components" not in shard
    assert "adapters" not in shard["runs"][0] and "components" not in shard["load"]


def test_a_malformed_component_list_is_refused(component_emulator_url):
    with pytest.raises(ValueError, match="name, adapter and weight"):
        _handler("benchmark")(_event(component_emulator_url, shard=0, inference_components=[{"name": "ic-base"}]))


def test_shards_merge_by_adapter_exactly():
    def run(adapter_ttfts: dict[str, list[float]]) -> RunSamples:
        whole = RunSamples(2)
        for name, ttfts in adapter_ttfts.items():
            whole.by_adapter[name] = RunSamples(2, ttft_ms=list(ttfts))
        return whole

    merged = merge([run({"base": [1.0], "reply": [2.0]}), run({"reply": [3.0]})])
    assert merged.by_adapter["reply"].ttft_ms == [2.0, 3.0] and merged.by_adapter["base"].ttft_ms == [1.0]
    assert merged.by_adapter["base"].concurrency == merged.concurrency == 4
    again = RunSamples.from_result(merged.to_result())
    assert again.by_adapter["reply"].ttft_ms == [2.0, 3.0]


# --------------------------------------------------------------------------- the CLI


def _bench_mix(url: str, out, *extra: str) -> int:
    from optigate.cli import main

    return main(
        [
            "bench",
            "--endpoint",
            "team",
            "--endpoint-url",
            url,
            "--concurrency",
            "2",
            "--requests",
            "24",
            "--max-new-tokens",
            "5",
            "--prompt-tokens",
            "8",
            "--json",
            str(out),
            *extra,
        ]
    )


@pytest.mark.slow
def test_bench_spreads_over_the_adapter_mix_and_compare_judges_each_adapter(component_emulator_url, tmp_path, capsys):
    from optigate.cli import main

    mix = "base=ic-base:1,reply=ic-reply:3"
    for side in ("baseline", "candidate"):
        assert _bench_mix(component_emulator_url, tmp_path / f"{side}.json", "--adapter-mix", mix) == 0
    data = json.loads((tmp_path / "baseline.json").read_text())
    assert data["inference_components"] == EVENT_MIX
    assert "components" not in data["load"]
    shown = capsys.readouterr().out
    assert "2 · reply" in shown and "2 · base" in shown  # a line per adapter under the level
    out = tmp_path / "deltas.json"
    args = ["bench", "compare", str(tmp_path / "baseline.json"), str(tmp_path / "candidate.json"), "--json", str(out)]
    args += ["--report", str(tmp_path / "report")]
    assert main(args) in (0, 1, 3)
    written = json.loads(out.read_text())
    assert {d["adapter"] for d in written["adapter_deltas"]} == {"base", "reply"}
    assert all("adapter" not in d for d in written["deltas"])
    assert "per adapter" in capsys.readouterr().out
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Per adapter:" in page and "ttft_ms [reply]" in page and "2 · reply" in page


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("base=ic-base", "not ADAPTER=COMPONENT:WEIGHT"),
        ("base=ic-base:heavy", "weight 'heavy' is not a number"),
        ("base=ic-base:0", "weight must be a finite number > 0"),
        ("base=ic-a:1,base=ic-b:1", "each adapter at most once"),
    ],
)
def test_a_malformed_adapter_mix_is_one_line_and_exit_2(component_emulator_url, tmp_path, capsys, flag, says):
    assert _bench_mix(component_emulator_url, tmp_path / "x.json", "--adapter-mix", flag) == 2
    message = capsys.readouterr()
    line = (message.err + message.out).strip()
    assert line.count("\n") == 0 and "--adapter-mix" in line and says in line
    assert not (tmp_path / "x.json").exists()


def test_adapter_mix_and_one_fixed_component_are_refused_together(component_emulator_url, tmp_path, capsys):
    extra = ("--adapter-mix", "base=ic-base:1", "--inference-component", "ic-base")
    assert _bench_mix(component_emulator_url, tmp_path / "x.json", *extra) == 2
    assert "drop --inference-component" in capsys.readouterr().err


def _labelled_side(shapes: dict, seed: int, level: int = 16) -> dict[int, list[RunSamples]]:
    from tests.fixtures.simulated_blocks import simulated_block

    blocks = []
    for block in range(3):
        parts = {
            name: simulated_block(level, 40, shape, seed=[seed, block, i])
            for i, (name, shape) in enumerate(shapes.items())
        }
        whole = merge(list(parts.values()))
        whole.concurrency = level
        whole.by_adapter = parts
        blocks.append(whole)
    return {level: blocks}


@pytest.mark.slow
def test_compare_finds_the_one_slower_adapter_and_leaves_all_traffic_s_deltas_alone():
    from dataclasses import replace

    from optigate.bench.compare import compare_adapters, compare_levels
    from tests.fixtures.simulated_blocks import Shape

    shape = Shape()
    shapes = {"base": shape, "reply": shape, "summarize": shape}
    baseline = _labelled_side(shapes, 1)
    candidate = _labelled_side({**shapes, "reply": replace(shape, itl_ms=shape.itl_ms * 1.3)}, 2)
    deltas = compare_adapters(baseline, candidate)
    worse = {(d.adapter, d.metric) for d in deltas if d.verdict == "worse"}
    assert ("reply", "itl_ms") in worse and {adapter for adapter, _ in worse} == {"reply"}
    assert {d.adapter for d in deltas} == set(shapes)
    unlabelled = {
        level: [RunSamples.from_result({**b.to_result(), "adapters": {}}) for b in blocks]
        for level, blocks in baseline.items()
    }
    assert compare_levels(baseline, candidate) == compare_levels(unlabelled, candidate)  # labels change nothing there
