"""Shared by the gate's executed tests: emulator processes (one pair per module), the gate stacks
(synthesized once a run, on first use) and running one gate in a fresh harness."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optigate.emulator.process import emulator_process
from tests.fixtures.gate_thresholds import THRESHOLDS
from tests.fixtures.once import folder_of_run, once

ACCOUNT, REGION = "123456789012", "us-east-1"
LIVE_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"


@pytest.fixture(scope="module")
def emulators():
    baseline = {"default": {"ttft_ms": 60, "itl_ms": 8}}
    candidate = {"default": {"ttft_ms": 30, "itl_ms": 5}}
    with emulator_process(baseline) as baseline_url, emulator_process(candidate) as candidate_url:
        yield baseline_url, candidate_url


@pytest.fixture(scope="module")
def slow_candidate(emulators):
    """A candidate whose first token takes longer than the 400 ms p99 TTFT budget."""
    with emulator_process({"default": {"ttft_ms": 450, "itl_ms": 3}}) as url:
        yield emulators[0], url


# --------------------------------------------------------------------------- the gate stacks


def _spec(optimize: bool, shadow=None, **overrides):
    """The gate's plan; `overrides` by GatePlan field, or by a field of its benchmark (BenchmarkPlan), and
    `thresholds` as the decision's dict."""
    import dataclasses

    from optigate.deployment.gate import GatePlan
    from optigate.deployment.gate_parts import BenchmarkPlan, Side, Thresholds
    from optigate.plan.catalog import get_instance

    # LIVE_IMAGE's default (optigate.serving.engine_mode): the emulators stream async mode's chat chunks
    live = Side(image=LIVE_IMAGE, engine_mode="async")
    spec = GatePlan(
        team="chat",
        environment="dev",
        live_endpoint="chat-dev",
        instance=get_instance("ml.g6.2xlarge"),
        baseline_model_uri="s3://acme-models/llama-3.1-8b/",
        candidate=live,
        twin=live,
        candidate_environment={"OPTION_QUANTIZE": "fp8", "OPTION_MAX_MODEL_LEN": "8192"},
        change={"quantization": "fp8"},
        thresholds=Thresholds.from_dict(THRESHOLDS),
        optimization_configs=[{"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}}]
        if optimize
        else None,
        # Three interleaved blocks (A B A B A B), together just long enough for a throughput interval: the
        # decision needs >= 5 whole one-second buckets a side, its blocks pooled. 20 requests a stream take the
        # candidate (30 ms + 16 x 5 ms each) 2.2 s a block, two buckets: six a side, the least that is enough.
        benchmark=BenchmarkPlan(
            levels=(2,),
            shards=2,
            blocks=3,
            requests_per_slot=20,
            prompt_tokens=16,
            max_new_tokens=16,
            poll_seconds=0,
            max_polls=5,
            optimization_poll_seconds=0,
            optimization_max_polls=5,
        ),
        price_per_hour_usd=0.98,
        shadow=shadow,
    )
    benchmark = {key: overrides.pop(key) for key in list(overrides) if key in BenchmarkPlan.__dataclass_fields__}
    if "thresholds" in overrides:
        overrides["thresholds"] = Thresholds.from_dict(overrides["thresholds"])
    return dataclasses.replace(spec, benchmark=dataclasses.replace(spec.benchmark, **benchmark), **overrides)


def _synth(
    optimize: bool, outdir: Path, shadow: bool = False, fleet_options: dict | None = None, **spec_overrides
) -> dict[str, Any]:
    """A stack with the live endpoint CloudFormation owns, a fleet (with `fleet_options`), an evaluation job and the
    gate (its plan with `spec_overrides`), synthesized with cdk-nag (which raises on any unacknowledged finding)."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from optigate import naming
    from optigate.constructs.benchmark_fleet import BenchmarkFleet, FleetTarget
    from optigate.constructs.common import secure_bucket
    from optigate.constructs.evaluation_job import EvaluationJob
    from optigate.constructs.gate import GateResources, LiveConfig, OptimizationGate
    from optigate.constructs.lmi_model import LmiModel
    from optigate.constructs.tuned_endpoint import TunedEndpoint, VariantSettings
    from optigate.deployment.gate import ShadowPlan
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Gate", env={"account": ACCOUNT, "region": REGION})
    # The live endpoint CloudFormation owns; the gate must leave it on this config.
    model = LmiModel(
        stack,
        "LiveModel",
        image_uri=LIVE_IMAGE,
        environment={"OPTION_MAX_MODEL_LEN": "8192"},
        model_data_uri="s3://acme-models/llama-3.1-8b/",
        name_prefix="chat-dev",
    )
    live = TunedEndpoint(stack, "Live", model=model, variant=VariantSettings("ml.g6.2xlarge"), endpoint_name="chat-dev")
    stage = ShadowPlan(sampling_percentage=20, window_minutes=60) if shadow else None
    live_config = LiveConfig(live.config.attr_endpoint_config_name, live.config.ref, live.config_request())
    plan = _spec(optimize, stage, **spec_overrides)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    bucket = secure_bucket(stack, "Results", key, purpose="optigate's gate")
    # The gate's own endpoints only: the live one is never load-tested (naming.invocable_endpoints).
    invocable = naming.invocable_endpoints("chat", "dev")
    fleet = BenchmarkFleet(
        stack,
        "Fleet",
        target=FleetTarget("chat-dev"),
        endpoints=invocable,
        shards=plan.benchmark.shards,
        results_bucket=bucket,
        encryption_key=key,
        **(fleet_options or {}),
    )
    evaluation = EvaluationJob(
        stack,
        "Evaluation",
        endpoints=invocable,
        dataset_uri="s3://acme-eval/chat/",
        output_bucket=bucket,
        encryption_key=key,
        image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/optigate-evaluate:1",
    )
    OptimizationGate(
        stack,
        "Gate",
        plan=plan,
        resources=GateResources(
            model_role_arn=f"arn:aws:iam::{ACCOUNT}:role/chat-dev-model",
            baseline_model_name=model.model_name,
            bucket=bucket,
            key=key,
            fleet=fleet,
            evaluation=evaluation,
            live_config=live_config if shadow else None,
        ),
    )
    enable_nag(app)
    app.synth()
    return json.loads((outdir / "Gate.template.json").read_text())


class GateTemplates:
    """The gate stack's template by variant: True (an optimization job), False (none), "shadow" (no job,
    a shadow rollout on the live endpoint). Each is synthesized on first use, once a run (tests.fixtures.once)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory):
        self._tmp_path_factory = tmp_path_factory
        self._templates: dict[bool | str, dict[str, Any]] = {}

    def __getitem__(self, variant: bool | str) -> dict[str, Any]:
        if variant not in self._templates:
            self._templates[variant] = once(self._tmp_path_factory, f"gate-{variant}", lambda: self._synth(variant))
        return self._templates[variant]

    def _synth(self, variant: bool | str) -> dict[str, Any]:
        outdir = folder_of_run(self._tmp_path_factory, f"gate-{variant}")
        return _synth(variant is True, outdir, shadow=variant == "shadow")


@pytest.fixture(scope="session")
def gate_spec() -> Callable[..., Any]:
    """`gate_spec(optimize, shadow=None, **overrides)`: the GatePlan the gate tests synthesize."""
    return _spec


@pytest.fixture(scope="session")
def gate_synth() -> Callable[..., dict[str, Any]]:
    """`gate_synth(optimize, outdir, shadow=False, **spec_overrides)`: one gate stack's template."""
    return _synth


@pytest.fixture(scope="session")
def gate_templates(tmp_path_factory) -> GateTemplates:
    return GateTemplates(tmp_path_factory)


# --------------------------------------------------------------------------- running a gate


@pytest.fixture(scope="session")
def gate_handlers() -> Callable[..., dict[str, Callable]]:
    """`gate_handlers((baseline_url, candidate_url), crash_decide=False)`: the in-process Lambda handlers,
    the decision crashing if asked."""
    from optigate.rehearse.gate_handlers import lambda_handlers

    def crashing(event, context):
        raise RuntimeError("decide crashed")

    def handlers(emulators: tuple[str, str], crash_decide: bool = False) -> dict[str, Callable]:
        return lambda_handlers(*emulators, decide=crashing if crash_decide else None)

    return handlers


@pytest.fixture(scope="session")
def run_gate(gate_templates, gate_handlers) -> Callable[..., dict[str, Any]]:
    """`run_gate(emulators, optimize=True, scenario=None, crash_decide=False, short=False)`: execute one
    gate variant in a fresh harness; GateRun.execute's result. `short`: four requests per stream, for
    paths whose verdict cannot be an approval anyway (the throughput interval needs >= 5 one-second
    buckets, i.e. the full run)."""
    from optigate.rehearse.gate_handlers import evaluation_writer
    from optigate.rehearse.gate_run import GateRun
    from optigate.rehearse.harness import GateHarness
    from optigate.rehearse.scenario import Scenario

    def run(
        emulators, *, optimize: bool | str = True, scenario=None, crash_decide=False, short=False
    ) -> dict[str, Any]:
        scenario = scenario or Scenario(on_processing_job=evaluation_writer("pass"))
        with GateHarness(
            lambda_handlers=gate_handlers(emulators, crash_decide), scenario=scenario, region=REGION
        ) as harness:
            return GateRun(gate_templates[optimize], harness, {"requests_per_stream": 4} if short else {}).execute()

    return run


@pytest.fixture(scope="session")
def nothing_left() -> Callable[[dict[str, Any]], None]:
    """`nothing_left(result)` asserts no temporary resource is left (candidate, baseline twin, shadow config, the
    optimized model an EAGLE job registered),
    nothing CloudFormation owns was removed (the live endpoint, its config, the model the twin ran), the live
    endpoint received no benchmark load, and it is InService on the config CloudFormation made."""

    def check(result: dict[str, Any]) -> None:
        left = result["left"]
        temporary = ("-cand-", "-twin-", "-shadow-", "-optm-")  # -optm-: the model an EAGLE job registers
        assert not any(name for names in left.values() for name in names if any(t in name for t in temporary)), left
        assert result["owned_missing"] == []
        assert [b for b in result["benchmarked"] if b["endpoint"] in result["live"]] == []
        original = result["live"]["chat-dev"]["original_config"]
        assert result["live"] == {"chat-dev": {"status": "InService", "config": original, "original_config": original}}

    return check
