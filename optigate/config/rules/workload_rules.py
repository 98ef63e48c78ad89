"""Benchmark workload rules: the gate's captured-traffic workload (gate.benchmark.workload) and its synthetic length
distributions (gate.benchmark.synthetic), and, across files, the data capture a captured workload reads. The shared
prefix's fit in the drawn prompt lengths (OG462) needs the workload builder: optigate.deployment.gate_workload."""

from __future__ import annotations

from collections.abc import Mapping

from optigate.config.models import PERCENTILES_ORDERED, EnvironmentsFile, TeamConfig
from optigate.config.rules.cross_file import effective_overrides
from optigate.config.rules.registry import PathT, Problem, rule

ONE_WORKLOAD = rule("OG460", "gate.benchmark.workload or gate.benchmark.synthetic, not both")
PERCENTILES_IN_ORDER = rule(
    "OG461", "a length distribution's p90 is at least its p50 (model validator)", model_message=PERCENTILES_ORDERED
)
REPLAY_THROUGHPUT = rule("OG463", "a replayed workload asks no throughput gain (its arrival rate is the recording's)")
CROSS_CHECK_SAME_WORKLOAD = rule(
    "OG464", "a managed cross-check only with the one-length synthetic workload it can send"
)
CAPTURE_REPLAYABLE = rule("OG620", "a benchmark workload from data capture has a capture the workers read")

BENCHMARK: PathT = ("gate", "benchmark")
#: The request bodies optigate.bench.core.capture reads: LMI {inputs, parameters}, OpenAI chat (messages) and
#: completions (prompt). ShareGPT is a dataset format, not a request an endpoint receives.
REPLAYABLE_FORMATS = ("openai_chat", "openai_completions", "lmi")


def workload_problems(team: TeamConfig) -> list[Problem]:
    benchmark = team.gate.benchmark
    problems: list[Problem] = []
    if benchmark.workload is not None and benchmark.synthetic is not None:
        problems.append(
            Problem(
                (*BENCHMARK, "synthetic"),
                "the benchmark sends either the captured workload or a synthetic one: remove `synthetic` (a captured "
                "workload brings its own lengths), or `workload`",
                ONE_WORKLOAD,
            )
        )
    if benchmark.workload is not None and benchmark.workload.kind == "replay" and benchmark.min_throughput_gain_pct > 0:
        problems.append(
            Problem(
                (*BENCHMARK, "min_throughput_gain_pct"),
                "a replay sends the recorded arrivals to both sides, so both deliver the same tokens/s while they keep "
                f"up: a {benchmark.min_throughput_gain_pct:g} % gain cannot be shown. Set it to 0 or a negative "
                "non-inferiority margin (e.g. -20) and judge the replay by its latency budgets, or use kind: sessions "
                "(a closed loop at each level, where a faster candidate does deliver more)",
                REPLAY_THROUGHPUT,
            )
        )
    if benchmark.cross_check == "sagemaker" and (benchmark.workload is not None or benchmark.synthetic is not None):
        problems.append(
            Problem(
                (*BENCHMARK, "cross_check"),
                "SageMaker's managed benchmark sends synthetic prompts of one prompt_tokens and max_new_tokens, not "
                "this workload: its figures would disagree because the load differs, not the measurement; set "
                "cross_check: none, or benchmark with the one-length synthetic workload",
                CROSS_CHECK_SAME_WORKLOAD,
            )
        )
    return problems


def capture_replay_problems(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """A team whose gate benchmarks with its data capture needs, in every environment its gate runs in, a capture
    (both capture modes are always on: optigate.constructs.data_capture) in a request format the workers read. Either
    encryption is readable: the workers are granted kms:Decrypt of the endpoint's capture key."""
    problems: list[Problem] = []
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
                problems.append(
                    Problem(
                        ("environments", index, *where, "data_capture"),
                        f"team '{name}' benchmarks its gate with its data capture, but {environment.name} captures "
                        f"nothing: set data_capture: {{percentage: N}} for {name} in {environment.name}, or give "
                        "gate.benchmark.workload.from an S3 URI of capture files",
                        CAPTURE_REPLAYABLE,
                    )
                )
            elif capture.request_format is not None and capture.request_format not in REPLAYABLE_FORMATS:
                problems.append(
                    Problem(
                        ("environments", index, *where, "data_capture", "request_format"),
                        f"team '{name}' replays its capture in {environment.name}, whose clients send "
                        f"{capture.request_format}: the benchmark reads LMI {{inputs, parameters}} and OpenAI chat or "
                        "completions bodies only",
                        CAPTURE_REPLAYABLE,
                    )
                )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    ONE_WORKLOAD,
    PERCENTILES_IN_ORDER,
    REPLAY_THROUGHPUT,
    CROSS_CHECK_SAME_WORKLOAD,
    CAPTURE_REPLAYABLE,
)
