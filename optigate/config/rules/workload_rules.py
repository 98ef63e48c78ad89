"""Benchmark workload rules: the gate's captured-traffic workload (gate.benchmark.workload) and its synthetic length
distributions (gate.benchmark.synthetic), and, across files, the data capture a captured workload reads. The shared
prefix's fit in the drawn prompt lengths (OG462) needs the workload builder: optigate.deployment.gate_workload."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import BaseModel

from optigate.config.models import EnvironmentsFile, TeamConfig
from optigate.config.rule_registry import Found, PathT, Problem, rule_check
from optigate.config.rules.cross_file import effective_overrides

# OG461 (a length distribution's p90 at least its p50) is checked by LengthPercentiles' model validator while the file
# is read: its function is beside it, in optigate.config.models.

BENCHMARK: PathT = ("gate", "benchmark")
#: The request bodies optigate.bench.core.capture reads: LMI {inputs, parameters}, OpenAI chat (messages) and
#: completions (prompt). ShareGPT is a dataset format, not a request an endpoint receives.
REPLAYABLE_FORMATS = ("openai_chat", "openai_completions", "lmi")


def workload_problems(team: TeamConfig) -> list[Problem]:
    """The workload's rules in the order they are reported, one rule function each."""
    return [*one_workload(team), *replay_throughput(team), *cross_check_same_workload(team), *rounds_budget(team)]


@rule_check("OG460", "gate.benchmark.workload or gate.benchmark.synthetic, not both")
def one_workload(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark` gives a captured workload (`workload`) or a synthetic one (`synthetic`), not both.

    Why: the benchmark sends one workload, and a captured workload brings its own lengths.
    """
    benchmark = team.gate.benchmark
    if benchmark.workload is not None and benchmark.synthetic is not None:
        yield (
            (*BENCHMARK, "synthetic"),
            "the benchmark sends either the captured workload or a synthetic one: remove `synthetic` (a captured "
            "workload brings its own lengths), or `workload`",
        )


@rule_check("OG463", "a replayed workload asks no throughput gain (its arrival rate is the recording's)")
def replay_throughput(team: TeamConfig) -> Iterator[Found]:
    """With a replayed workload (`workload.kind: replay`), `gate.benchmark.min_throughput_gain_pct` is 0 or a
    negative non-inferiority margin.

    Why: a replay sends the recorded arrivals to both sides (one run per block on the recorded schedule), so both
    deliver the recording's tokens/s while they keep up: a gain cannot be shown. The latency budgets judge a replay;
    `kind: sessions` runs a closed loop at each level, where a faster candidate does deliver more.
    """
    benchmark = team.gate.benchmark
    if benchmark.workload is not None and benchmark.workload.kind == "replay" and benchmark.min_throughput_gain_pct > 0:
        yield (
            (*BENCHMARK, "min_throughput_gain_pct"),
            "a replay sends the recorded arrivals to both sides, so both deliver the same tokens/s while they keep "
            f"up: a {benchmark.min_throughput_gain_pct:g} % gain cannot be shown. Set it to 0 or a negative "
            "non-inferiority margin (e.g. -20) and judge the replay by its latency budgets, or use kind: sessions "
            "(a closed loop at each level, where a faster candidate does deliver more)",
        )


@rule_check("OG464", "a managed cross-check only with the one-length synthetic workload it can send")
def cross_check_same_workload(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark.cross_check: sagemaker` only with the default workload: no `workload` and no `synthetic`.

    Why: SageMaker's managed benchmark (CreateAIBenchmarkJob, NVIDIA AIPerf) sends synthetic prompts of one
    `prompt_tokens` and `max_new_tokens`, not a captured or varied workload; its figures would disagree with
    optigate's because the load differs, not the measurement.
    """
    benchmark = team.gate.benchmark
    if benchmark.cross_check == "sagemaker" and (benchmark.workload is not None or benchmark.synthetic is not None):
        yield (
            (*BENCHMARK, "cross_check"),
            "SageMaker's managed benchmark sends synthetic prompts of one prompt_tokens and max_new_tokens, not "
            "this workload: its figures would disagree because the load differs, not the measurement; set "
            "cross_check: none, or benchmark with the one-length synthetic workload",
        )


@rule_check("OG465", "a benchmark in rounds looks first within its budget; min_rounds and max_minutes need max_rounds")
def rounds_budget(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark.min_rounds` is at most `max_rounds`; `min_rounds` and `max_minutes` differ from their defaults
    only with `max_rounds`, and `blocks` only without it.

    Why: the gate looks after each round from min_rounds to max_rounds and shares its confidence among those looks;
    a first look after the budget would never come. Without max_rounds the benchmark has a fixed size (`blocks`
    rounds, judged once), so a minimum or a time budget would silently do nothing; with it, its rounds are the
    blocks, so `blocks` would.
    """
    benchmark = team.gate.benchmark
    # Values, not the keys given: a block written back from a dump (advise's trial paste) gives every key.
    changed = {key for key in ("blocks", "min_rounds", "max_minutes") if _differs_from_default(benchmark, key)}
    if benchmark.max_rounds is not None and "blocks" in changed:
        yield (
            (*BENCHMARK, "blocks"),
            "blocks sizes a fixed benchmark; with max_rounds each round is one block a side, so remove blocks (or "
            "max_rounds, for a fixed size)",
        )
    if benchmark.max_rounds is None:
        for key in ("max_minutes", "min_rounds"):
            if key in changed:
                yield (
                    (*BENCHMARK, key),
                    f"{key} applies to a benchmark in rounds: set max_rounds too (e.g. max_rounds: 12), or remove "
                    f"{key} (without max_rounds the benchmark is `blocks` rounds, judged once)",
                )
    elif benchmark.min_rounds > benchmark.max_rounds:
        yield (
            (*BENCHMARK, "min_rounds"),
            f"the first look (after min_rounds {benchmark.min_rounds}) would come after the budget (max_rounds "
            f"{benchmark.max_rounds}): lower min_rounds or raise max_rounds",
        )


def _differs_from_default(model: BaseModel, key: str) -> bool:
    return bool(getattr(model, key) != type(model).model_fields[key].default)


@rule_check("OG620", "a benchmark workload from data capture has a capture the workers read")
def capture_replayable(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> Iterator[Found]:
    """A team whose gate benchmarks with its data capture (`gate.benchmark.workload.from: data_capture`) has, in every
    environment its gate runs in, a data capture in a request format the benchmark workers read (LMI
    {inputs, parameters}, OpenAI chat or completions), environment by environment and team by team.

    Why: the workers read the endpoint's own capture inside the account (optigate.bench.core.capture), and an
    environment that captures nothing gives them nothing to send; ShareGPT is a dataset format, not a request an
    endpoint receives. Both capture modes are always on (optigate.constructs.data_capture), and either encryption is
    readable: the workers are granted kms:Decrypt of the endpoint's capture key.
    """
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            workload = team.gate.benchmark.workload
            if not team.gate.candidate or workload is None or workload.source != "data_capture":
                continue
            overrides = effective_overrides(team, environment)
            capture = overrides.capture
            own = environment.teams.get(name)
            where = ("teams", name) if own is not None else ("overrides",)
            if capture is None:
                yield (
                    ("environments", index, *where, "data_capture"),
                    f"team '{name}' benchmarks its gate with its data capture, but {environment.name} captures "
                    f"nothing: set data_capture: {{percentage: N}} for {name} in {environment.name}, or give "
                    "gate.benchmark.workload.from an S3 URI of capture files",
                )
            elif capture.request_format is not None and capture.request_format not in REPLAYABLE_FORMATS:
                yield (
                    ("environments", index, *where, "data_capture", "request_format"),
                    f"team '{name}' replays its capture in {environment.name}, whose clients send "
                    f"{capture.request_format}: the benchmark reads LMI {{inputs, parameters}} and OpenAI chat or "
                    "completions bodies only",
                )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    one_workload,
    replay_throughput,
    cross_check_same_workload,
    rounds_budget,
    capture_replayable,
)
