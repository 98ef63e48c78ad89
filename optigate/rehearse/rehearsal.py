# Over 400 lines: a rehearsal's emulated behaviours, its expectations and its one run read together.
"""`optigate rehearse`: the whole gate of one team, offline, with emulated endpoints.

The team's stack is synthesized, and its gate and benchmark-fleet definitions run for real in
moto's Step Functions executor (optigate.rehearse.harness, via optigate.rehearse.gate_run): the Lambda
handlers in-process, the benchmark workers against two local emulator processes (the live endpoint
and the candidate), SageMaker, S3 and SNS in moto. Waits are compressed to zero and the benchmark is
scaled down, so a rehearsal takes seconds; everything else is the definition that `cdk deploy` would
create.

This needs the rehearse extra (moto: `pip install 'optigate[rehearse]'`): importing this module fails without it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from optigate import naming
from optigate.rehearse.capture_seed import seed_captured_workload, seed_training_capture
from optigate.rehearse.gate_handlers import HANDLER_FOLDERS, evaluation_writer, lambda_handlers, load_handler
from optigate.rehearse.gate_layout import DECIDE
from optigate.rehearse.gate_run import BUCKET, GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Scenario

# Emulated behaviour of the live endpoint and of a faster or slower candidate.
BASELINE: Final = {"ttft_ms": {"mean": 150, "jitter": 8}, "itl_ms": {"mean": 15, "jitter": 1}}
FASTER: Final = {"ttft_ms": {"mean": 110, "jitter": 6}, "itl_ms": {"mean": 9, "jitter": 0.8}}
# Twice the chat team's 800 ms p99 TTFT budget: a busy host raises the budget by what it adds to the baseline
# (host_compensated_decide); at 900 ms the slower side once passed its p99 TTFT on a loaded 2-core host.
SLOWER: Final = {"ttft_ms": {"mean": 1600, "jitter": 40}, "itl_ms": {"mean": 25, "jitter": 2}}
# The most concurrent streams a rehearsal benchmarks (one level; see rehearse()).
MAX_CONCURRENCY: Final = 16
# Budgets the host allowance applies to: (benchmark metric, gate.benchmark key).
BUDGETS: Final = (("ttft_ms", "p99_ttft_ms_budget"), ("itl_ms", "p99_itl_ms_budget"))


def emulated_p99(distribution: dict[str, Any], samples: int = 20_000) -> float:
    """The p99 of the latency distribution an emulator is told to serve (sampled with its own code)."""
    from optigate.emulator.config import Distribution

    rng = random.Random(0)
    drawn = sorted(Distribution.parse(distribution).sample(rng) for _ in range(samples))
    return drawn[int(0.99 * samples)]


def host_compensated_decide(baseline: dict[str, Any], allowance: dict[str, float]) -> Callable[[dict, Any], Any]:
    """The decision handler, with each latency budget raised by what the host added to the baseline.

    A rehearsal runs the client, both emulators and moto on one host; a busy host stalls them all,
    adding latency to the requests of both sides, and judged against absolute budgets that noise
    would decide the verdict. The baseline twin shows what the host added: its measured p99 minus the
    p99 of the distribution its emulator serves. That much is added to each budget (never taken off),
    recorded in `allowance` and printed. The deployed gate has no such step: on AWS the endpoints do
    not share the benchmark's CPU.
    """
    import boto3
    import numpy as np

    from optigate.bench.core.metrics import RunSamples
    from optigate.lambdas.gate_decide.handler import UnreadableInput, read_benchmark

    decide = load_handler(HANDLER_FOLDERS[DECIDE])

    def handler(event: dict, context: Any) -> Any:
        try:
            runs = read_benchmark(boto3.client("s3"), event["bucket"], event, "baseline")["runs"]
        except UnreadableInput:  # nothing to allow for: the decision fails closed on it, naming what is wrong
            return decide(event, context)
        thresholds = dict(event.get("thresholds") or {})
        for metric, budget in BUDGETS:
            measured = [getattr(RunSamples.from_result(run), metric) for run in runs]
            worst = max((float(np.percentile(values, 99)) for values in measured if len(values)), default=None)
            extra = 0.0 if worst is None else max(0.0, worst - emulated_p99(baseline[metric]))
            allowance[metric] = extra
            if thresholds.get(budget) is not None:
                thresholds[budget] = float(thresholds[budget]) + extra
        return decide({**event, "thresholds": thresholds}, context)

    return handler


def synthesize_team(
    team_name: str,
    environment: str | None = None,
    config_dir: str | Path = "config",
    locks_dir: str | Path | None = None,
) -> tuple[dict[str, Any], Any]:
    """The team's stack template (without cdk-nag, which the tests run) and its Deployment; with `locks_dir`, what
    the environment's lock there approved (optigate.promote.lock)."""
    from optigate.deployment import deploy, load_resolved_project

    # Only this team's file (and environments.yaml): another team's broken file does not stop its rehearsal.
    project = load_resolved_project(config_dir, teams=[team_name])
    if team_name not in project.teams:
        raise KeyError(f"no team '{team_name}'; known: {', '.join(sorted(project.teams))}")
    environments = project.environments
    chosen = next((e for e in environments if e.name == environment), None) if environment else environments[0]
    if chosen is None:
        raise KeyError(f"no environment '{environment}'; known: {', '.join(e.name for e in environments)}")
    served = None
    if locks_dir is not None:
        from optigate.promote.lock import read_lock

        lock = read_lock(Path(locks_dir), chosen.name)
        served = lock.teams.get(team_name) if lock is not None else None
    deployment = deploy(project.teams[team_name], chosen, served=served)
    if deployment.candidate is None:
        raise ValueError(f"team '{team_name}' has no gate.candidate: there is nothing to prove")
    from aws_cdk import App  # after the checks above: a misspelt team or environment starts no Node process

    from optigate.stacks.app import FEATURE_FLAGS
    from optigate.stacks.team_inference_stack import TeamInferenceStack

    outdir = tempfile.mkdtemp(prefix="optigate-rehearsal-")
    app = App(outdir=outdir, context=FEATURE_FLAGS)
    TeamInferenceStack(app, deployment)
    app.synth()
    return json.loads(Path(outdir, f"{deployment.stack_name}.template.json").read_text()), deployment


@contextmanager
def _offline_aws() -> Iterator[None]:
    """Fake credentials and a region for the in-process handlers; moto answers every call.
    moto's executor logs each failed state at ERROR: quiet it, the rehearsal prints the path."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "rehearsal",
            "AWS_SECRET_ACCESS_KEY": "rehearsal",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }
    )
    os.environ.pop("AWS_SESSION_TOKEN", None)
    logger = logging.getLogger("moto.stepfunctions")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def variant_traffic(deployment: Any, candidate: dict[str, Any], live_requests: int = 2000) -> dict[str, dict[str, Any]]:
    """CloudWatch figures of a mirror window: the live variant's requests, the sampled share of them
    on the shadow, and ModelLatency (a whole response, microseconds) from each side's behaviour."""
    shadow = deployment.team.rollout.shadow
    percentage = shadow.sampling_percentage if shadow else 0
    tokens = deployment.team.gate.benchmark.max_new_tokens
    rng = random.Random(0)

    def latencies(behaviour: dict[str, Any]) -> list[float]:
        ttft, itl = behaviour["ttft_ms"], behaviour["itl_ms"]
        return [
            1000 * (rng.gauss(ttft["mean"], ttft["jitter"]) + tokens * rng.gauss(itl["mean"], itl["jitter"]))
            for _ in range(100)
        ]

    return {
        "AllTraffic": {"Invocations": live_requests, "Invocation5XXErrors": 0, "ModelLatency": latencies(BASELINE)},
        "GateCandidate": {
            "Invocations": live_requests * percentage // 100,
            "Invocation5XXErrors": 0,
            "ModelLatency": latencies(candidate),
        },
    }


def emulated_container(image: str) -> str:
    """The emulator's `container` setting for an image URI (`lmi:0.36.0-lmi27.0.0-cu130`): the emulated server then
    publishes what optigate.serving.surfaces says that container does, and nothing else."""
    from optigate.serving.images import tag_of
    from optigate.serving.surfaces import Container

    return f"{Container.from_image(image).family}:{tag_of(image)}"


@contextmanager
def emulators(
    candidate: dict[str, Any],
    speculative: bool,
    engine_modes: tuple[str, str] = ("async", "async"),
    containers: tuple[str, str] | None = None,
) -> Iterator[tuple[str, str]]:
    """Emulator processes of the live endpoint (BASELINE) and of the candidate: their URLs. Each streams its side's
    LMI engine mode, `engine_modes` being (baseline's, candidate's) as the gate plan resolves them, and stands for its
    side's container (`containers`: the emulator's `container` settings, baseline's and candidate's; None: its
    default LMI)."""
    from optigate.emulator.process import emulator_process

    if speculative and "num_speculative_tokens" not in candidate:
        # Three drafts a step, each accepted 70 % of the time: 2.5 tokens a step, i.e. 51 % of the drafts accepted
        # (optigate.emulator.latency_model.reported_acceptance), which the client reads from the stream's chunks,
        # above the gate's break-even. Drafting costs 4 ms a token, so a token costs about what a faster candidate's
        # does (a rehearsal's benchmark windows are sized for that pace).
        candidate = {**candidate, "num_speculative_tokens": 3, "acceptance_rate": 0.7, "draft_ms_per_token": 4}
    baseline_mode, candidate_mode = engine_modes
    candidate = {"engine_mode": candidate_mode, **candidate}
    baseline = {**BASELINE, "engine_mode": baseline_mode}
    if containers is not None:
        baseline["container"], candidate["container"] = containers
    with (
        emulator_process({"default": baseline}) as baseline_url,
        emulator_process({"default": candidate}) as candidate_url,
    ):
        yield baseline_url, candidate_url


@dataclass(frozen=True)
class Expectation:
    """The verdict a kind of candidate must reach and why: with `failing`, one of those checks must be among the
    ones that did not pass (a rejection for another reason is not the rehearsal's); with `adapter` too, that
    adapter's own check (the report's `adapter` field: `quality[redline]`); with `refusal`, the gate must stop
    before its decision with a failure that says it (`archive-missing: redline`)."""

    verdict: str
    failing: frozenset[str] = frozenset()
    adapter: str | None = None
    refusal: str | None = None

    def met(self, outcome: str, checks: list[dict[str, Any]], cause: str | None = None) -> bool:
        if outcome != self.verdict:
            return False
        if self.refusal is not None:
            return self.refusal in (cause or "")
        failed = {
            (check.get("name"), check.get("adapter")) for check in checks if (check.get("outcome") or "pass") == "fail"
        }
        return not self.failing or any(
            name in self.failing and (self.adapter is None or adapter == self.adapter) for name, adapter in failed
        )

    def __str__(self) -> str:
        if self.refusal is not None:
            return f"{self.verdict} on {self.refusal}"
        where = f"[{self.adapter}]" if self.adapter else ""
        return self.verdict + (
            f" on {' or '.join(name + where for name in sorted(self.failing))}" if self.failing else ""
        )


#: The kinds of candidate a rehearsal emulates, and the verdict each must reach: a faster one is approved, a slower
#: one rejected on its latency or throughput, (a team with adapters) a faster base one of whose adapters loses
#: quality on its own records rejected by that adapter's quality check (`expectation` names it: degraded_adapter),
#: and (a speculative team) a faster candidate whose drafts are rarely accepted rejected on its acceptance, which the
#: client reads from the stream.
EXPECTATIONS: Final = {
    "faster": Expectation("APPROVED"),
    "slower": Expectation("REJECTED", frozenset({"p99_ttft", "p99_itl", "throughput_gain", "goodput", "capacity"})),
    "adapter-quality": Expectation("REJECTED", frozenset({"quality"})),
    "drafts-rejected": Expectation("REJECTED", frozenset({"speculative_acceptance"})),
}
#: Faster per step, drafting free, but three drafts a step each accepted 10 % of the time: 1.1 tokens a step, about
#: 4 % of the drafts accepted. Only the acceptance (and the tokens per chunk it makes) can reject it.
DRAFTS_REJECTED: Final = {**FASTER, "num_speculative_tokens": 3, "acceptance_rate": 0.1}


def expected_outcome(kind: str) -> str:
    return EXPECTATIONS[kind].verdict


def degraded_adapter(deployment: Any) -> str:
    """The adapter `adapter-quality` degrades: the first the candidate changes (gate.candidate.adapters: the new
    version is what the gate proves), else the team's first. ValueError for a team without adapters."""
    team = deployment.team
    if not team.adapters:
        raise ValueError(f"team {team.team} serves no adapters: there is no adapter to lose quality")
    changed = deployment.resolved_team.candidate_adapters
    return next((a.name for a in team.adapters if a.name in changed), team.adapters[0].name)


def expectation(kind: str, deployment: Any, missing_adapters: Collection[str] = ()) -> Expectation:
    """What `kind` must reach on this team's gate: EXPECTATIONS', with adapter-quality's naming the degraded
    adapter; with adapters whose new version was left out of the emulated S3, whatever the kind, a refusal of the
    first of them (the archive check reads them in the candidate's order) before any endpoint."""
    if missing_adapters:
        changed = deployment.resolved_team.candidate_adapters
        first = next((name for name in changed if name in missing_adapters), sorted(missing_adapters)[0])
        return Expectation("REJECTED", refusal=f"archive-missing: {first}")
    expected = EXPECTATIONS[kind]
    return replace(expected, adapter=degraded_adapter(deployment)) if kind == "adapter-quality" else expected


def rehearsal_kinds(team: Any) -> tuple[str, ...]:
    """What `optigate rehearse --candidate both` runs for `team`: for a team with adapters the faster base and the
    faster base one of whose adapters loses quality (the gate's per-adapter proof), else faster and slower; and for a
    speculative candidate a faster one whose drafts are rarely accepted."""
    kinds = ("faster", "adapter-quality") if team.adapters else ("faster", "slower")
    return (*kinds, "drafts-rejected") if team.gate.candidate.get("speculative_decoding") else kinds


def rehearsal_requests_per_stream(total: int, blocks: int) -> int:
    """Requests per stream in each of `blocks` blocks, for about `total` per stream in all."""
    return total if blocks <= 1 else math.ceil(total / blocks) + 1


# Over 80 lines: one rehearsal set up, run and read back in the order it happens.
def rehearse(
    template: dict[str, Any],
    deployment: Any,
    candidate: str,
    *,
    behaviour: dict[str, Any] | None = None,
    on_state: Callable[[str], None] | None = None,
    on_history: Callable[[list[dict], bool], None] | None = None,
    trained_head_layout: str = "job_output",
    scenario_overrides: dict[str, Any] | None = None,
    seed_objects: dict[str, bytes] | None = None,
    adapter_quality: dict[str, str] | None = None,
    wrap_handlers: Mapping[str, Callable[[Callable], Callable]] | None = None,
    seed_training_data: bool = True,
) -> dict[str, Any]:
    """Run the gate once with a `faster` or `slower` emulated candidate (or an explicit emulator
    `behaviour`), or `adapter-quality` (faster, degraded_adapter losing quality); an EAGLE-training job
    registers its head in `trained_head_layout`
    (optigate.rehearse.sagemaker.jobs.TRAINED_HEAD_LAYOUTS); `scenario_overrides` replace fields of the emulated
    SageMaker's Scenario (e.g. an inference component that fails); `seed_objects` (S3 URI -> bytes) are put in the
    emulated S3 first (e.g. a new adapter version's archive); `adapter_quality` (an adapter team) is each adapter's
    evaluation outcome, "pass" for those it leaves out, written by the evaluation job's own code; `wrap_handlers`
    (function role -> wrapper of its in-process handler, optigate.rehearse.gate_layout's names) lets a scenario act
    between the gate's steps (e.g. corrupt a shard the workers wrote before the merge reads it);
    `seed_training_data` False leaves the data an EAGLE head trains from as a new environment has it (none).
    Returns what happened (GateRun.execute's result), with the live endpoints' components before the run
    (`live_components_before`)."""
    team = deployment.team
    speculative = bool(team.gate.candidate.get("speculative_decoding"))
    if candidate == "drafts-rejected":
        if not speculative:
            raise ValueError(f"team {team.team}'s candidate does not speculate: no drafts to reject")
        candidate, behaviour = "faster", behaviour or DRAFTS_REJECTED
    if candidate == "adapter-quality":
        candidate, adapter_quality = "faster", {degraded_adapter(deployment): "fail", **(adapter_quality or {})}
    # The rehearsal benchmarks one level (the deployed gate runs every level): the highest up to
    # MAX_CONCURRENCY streams, so what is measured is the emulated server rather than the host's CPU
    # (at 64 streams a 9 ms ITL is 7,000 frames a second through one Python client, and a busy host
    # stalled the faster side more than the baseline twin). In the team's interleaved blocks: about
    # the requests of one long run per side, shared by the blocks (each block gets one round more, as
    # its first and last requests fall outside its measurement window), enough for >= 5 one-second
    # throughput buckets on the faster side, its blocks pooled.
    # A benchmark in rounds shares them over its first look's rounds (a clear verdict stops there).
    benchmark = team.gate.benchmark
    blocks = benchmark.blocks if benchmark.max_rounds is None else benchmark.min_rounds
    compress_options = {
        "requests_per_stream": rehearsal_requests_per_stream(16 if candidate == "faster" else 12, blocks),
        "max_new_tokens": 32,
        "top_level_only": True,
        "max_concurrency": MAX_CONCURRENCY,
    }
    behaviour = behaviour or (FASTER if candidate == "faster" else SLOWER)
    allowance: dict[str, float] = {}
    plan = deployment.gate
    modes = (plan.twin.engine_mode, plan.candidate.engine_mode) if plan is not None else ("async", "async")
    # Each emulator stands for its side's container and publishes only what that container does.
    containers = (
        (emulated_container(plan.twin.image), emulated_container(plan.candidate.image)) if plan is not None else None
    )
    with emulators(behaviour, speculative, modes, containers) as (baseline_url, candidate_url), _offline_aws():
        scenario = Scenario(
            # An adapter team's evaluation judges each adapter: its verdict is written by the job's own code.
            on_processing_job=evaluation_writer("pass", adapters=(adapter_quality or {}) if team.adapters else None),
            variant_traffic=variant_traffic(deployment, behaviour),
            trained_head_layout=trained_head_layout,
        )
        if team.adapters and team.gate.benchmark.adapter_mix is None and deployment.gate is not None:
            # The gate reads the live components' shares from CloudWatch: a week of even traffic, unless overridden.
            scenario.component_traffic = {
                naming.inference_component_name(deployment.gate.live_endpoint, label): {"Invocations": 1000}
                for label in ("base", *(adapter.name for adapter in team.adapters))
            }
        for name, value in (scenario_overrides or {}).items():
            setattr(scenario, name, value)
        handlers = lambda_handlers(baseline_url, candidate_url, decide=host_compensated_decide(BASELINE, allowance))
        for role, wrap in (wrap_handlers or {}).items():
            handlers[role] = wrap(handlers[role])
        with GateHarness(lambda_handlers=handlers, scenario=scenario, region=REGION) as harness:
            run = GateRun(template, harness, compress_options)
            run.seed_baseline_files()  # the team's model bucket holds the folders the gate stages (an EAGLE-3 head)
            seed_captured_workload(run)  # the capture a replayed benchmark reads holds recent traffic
            if seed_training_data:  # the capture (or prefix) an EAGLE head trains from holds enough traffic
                seed_training_capture(run)
                run.seed_training_data()
            for uri, body in (seed_objects or {}).items():
                bucket, key = uri.removeprefix("s3://").split("/", 1)
                s3 = harness.client("s3")
                if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                    s3.create_bucket(Bucket=bucket)
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            components_before = run.live_components()
            result = run.execute(on_state=on_state, on_history=on_history)
            result["live_components_before"] = components_before
            result["candidate_files"] = harness.s3_objects(BUCKET, "optimized/")
    result["host_allowance_ms"] = allowance
    return result
