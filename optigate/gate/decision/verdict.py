"""The gate's verdict: :func:`decide` runs every check at every level both benchmarks measured
and returns a :class:`GateVerdict` with the reasons, costs and the planner's prediction beside
what was measured.

Three outcomes, as a canary judge's: any failed check REJECTED; else any inconclusive check
INCONCLUSIVE (the data cannot tell: a person decides, nothing is promoted by itself); else
APPROVED. No checks at all is REJECTED."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optigate import stats
from optigate.bench.compare import Delta, MarginLike, compare_adapters, compare_blocks
from optigate.bench.core.metrics import RunSamples
from optigate.config.models import BenchmarkGate, CrossCheckTolerance
from optigate.gate.decision.acceptance import acceptance_checks
from optigate.gate.decision.adapters import adapter_blocks, adapter_latency_checks, adapter_names, quality_checks
from optigate.gate.decision.checks import (
    check_dict,
    coverage_checks,
    json_safe,
    level_checks,
    mean_throughput,
    no_success,
    pool,
    schedule_checks,
    shadow_checks,
    sort_key,
)
from optigate.gate.decision.inputs import BENCHMARK_ONLY_KEYS, GateInputs, blocks_by_level, speculative_method
from optigate.gate.decision.prediction import prediction_vs_measurement
from optigate.gate.decision.slo_checks import (
    capacity_check,
    capacity_summary,
    gate_slo,
    goodput_check,
    side_capacity,
    side_goodput,
    slo_checks,
)
from optigate.gate.decision.wording import CheckName, label, reason
from optigate.gate.report_format import FORMAT_VERSION
from optigate.gate.server_metrics import figures_to_report
from optigate.judge import Check, Outcome, overall
from optigate.plan.cost import CostBasis

APPROVED, REJECTED, UNDECIDED = "APPROVED", "REJECTED", "INCONCLUSIVE"
OUTCOMES = (APPROVED, REJECTED, UNDECIDED)


@dataclass(frozen=True)
class GateVerdict:
    team: str
    environment: str
    approved: bool
    checks: tuple[Check, ...]
    reasons: tuple[str, ...]
    cost_per_million_output_tokens: tuple[dict[str, Any], ...]  # per level: baseline, candidate (USD)
    prediction_vs_measurement: dict[str, Any] | None
    levels: tuple[dict[str, Any], ...] = ()  # per level: baseline and candidate figures
    change: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    deltas: tuple[dict[str, Any], ...] = ()  # compare_blocks deltas (block-aware intervals), for the report
    shadow: dict[str, Any] | None = None  # the mirrored-traffic figures, when a shadow ran
    # SageMaker's managed benchmark beside optigate's (optigate.gate.cross_check.compare); it never changes the
    # outcome, which is optigate's checks' alone.
    cross_check: dict[str, Any] | None = None
    # Both sides' capacity at the SLO (optigate.gate.decision.slo_checks.capacity_summary); None without a latency
    # budget (no SLO) or without a level both sides measured.
    capacity: dict[str, Any] | None = None
    # The endpoints' own metrics for the benchmark's window as the report shows them (figures_to_report).
    server_metrics: dict[str, Any] | None = None
    traffic: dict[str, Any] | None = None  # the captured workload's shape, as GateInputs.traffic carried it
    adapter_check: dict[str, Any] | None = None  # each new adapter version's archive, as GateInputs carried it
    cost_basis: dict[str, Any] | None = None  # what the costs price (optigate.plan.cost.CostBasis.to_json)
    # The benchmark's rounds: how many, the looks' confidence, why they stopped and what they cost
    # (optigate.gate.decision.looks.rounds_summary); None when the decision was given no rounds.
    rounds: dict[str, Any] | None = None

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome is Outcome.FAIL)

    @property
    def inconclusive(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome is Outcome.INCONCLUSIVE)

    @property
    def outcome(self) -> str:
        """APPROVED, REJECTED or INCONCLUSIVE (see the module docstring)."""
        return outcome_of(self.checks)

    @property
    def summary(self) -> str:
        where = f"{self.team}/{self.environment}"
        outcome = self.outcome
        if outcome == APPROVED:
            return f"APPROVED {where}: all {len(self.checks)} checks pass"
        unread = [c.detail for c in self.inconclusive if c.name == CheckName.INPUTS]
        if unread:  # the notification says which file and where: a person fixes or re-runs, then decides
            more = f" (and {len(unread) - 1} more in the report)" if len(unread) > 1 else ""
            return (
                f"INCONCLUSIVE {where}: nothing decided, a file the gate reads failed its schema: {unread[0]}{more}. "
                "A person decides: approve or reject the model package"
            )
        if outcome == UNDECIDED:
            names = ", ".join(dict.fromkeys(label(c) for c in self.inconclusive))
            return (
                f"INCONCLUSIVE {where}: {len(self.inconclusive)} of {len(self.checks)} checks cannot tell ({names}); "
                "none fails. A person decides: approve or reject the model package"
            )
        names = ", ".join(dict.fromkeys(label(c) for c in self.failed))
        return f"REJECTED {where}: {len(self.failed)} of {len(self.checks)} checks fail ({names})"

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "format_version": FORMAT_VERSION,  # the layout optigate.gate.report_file reads back
                "team": self.team,
                "environment": self.environment,
                "approved": self.approved,
                "outcome": self.outcome,
                "summary": self.summary,
                "reasons": list(self.reasons),
                "checks": [check_dict(c) for c in self.checks],
                "cost_per_million_output_tokens": list(self.cost_per_million_output_tokens),
                "cost_basis": self.cost_basis,
                "prediction_vs_measurement": self.prediction_vs_measurement,
                "levels": list(self.levels),
                "change": self.change,
                "thresholds": self.thresholds,
                "deltas": list(self.deltas),
                "shadow": self.shadow,
                "cross_check": self.cross_check,
                "capacity": self.capacity,
                "server_metrics": self.server_metrics,
                "traffic": self.traffic,
                "adapter_check": self.adapter_check,
                "rounds": self.rounds,
            }
        )


# Over 80 lines: every check of a verdict gathered in one place, in the order the report prints them.
def decide(inputs: GateInputs, *, confidence: float = stats.CONFIDENCE) -> GateVerdict:
    """APPROVED only when every check passes, REJECTED when any fails, else INCONCLUSIVE; raises
    ValueError on invalid thresholds or benchmarks. Every check's interval is at `confidence` (a look of a gate
    in rounds spends a share of the 95 %: optigate.gate.decision.looks)."""
    thresholds = inputs.gate_thresholds()
    change = dict(inputs.change or {})
    method = speculative_method(change)
    base_runs = blocks_by_level(inputs.baseline_benchmark, "baseline")
    cand_runs = blocks_by_level(inputs.candidate_benchmark, "candidate")
    common = sorted(set(base_runs) & set(cand_runs))
    basis, count = inputs.basis, int(inputs.instance_count)
    slo = gate_slo(thresholds)  # None: no latency budget, so no goodput or capacity
    at_slo: tuple[dict[int, list[Check]], dict[int, list[Check]]] = ({}, {})  # each side's p99 checks per level

    checks = coverage_checks(thresholds.concurrency, base_runs, cand_runs)
    checks += schedule_checks({"baseline": inputs.baseline_benchmark, "candidate": inputs.candidate_benchmark})
    levels: list[dict[str, Any]] = []
    costs: list[dict[str, Any]] = []
    all_deltas: list[Delta] = []
    for level in common:
        base_blocks, cand_blocks = base_runs[level], cand_runs[level]
        base, cand = pool(base_blocks), pool(cand_blocks)
        empty = no_success(base, cand)
        all_deltas += compare(base_blocks, cand_blocks, thresholds, inputs.seed) if not empty else []
        if not empty and adapter_names(base_blocks, cand_blocks):  # each adapter's deltas, Holm across adapters
            sides = {level: base_blocks}, {level: cand_blocks}
            all_deltas += compare_adapters(*sides, margin_pct=margins(thresholds), seed=inputs.seed)
        at_level = level_checks(level, base_blocks, cand_blocks, thresholds, method, inputs.seed, confidence)
        if slo is not None:
            at_level.append(
                goodput_check(
                    level,
                    base_blocks,
                    cand_blocks,
                    slo,
                    thresholds.max_goodput_loss_pct,
                    inputs.seed,
                    empty,
                    confidence,
                )
            )
            at_slo[0][level] = slo_checks(level, base_blocks, thresholds, inputs.seed, confidence)
            at_slo[1][level] = [c for c in at_level if c.name in (CheckName.P99_TTFT, CheckName.P99_ITL)]
        checks += at_level + adapter_latency_checks(
            level, base_blocks, cand_blocks, thresholds, inputs.seed, confidence
        )

        base_fig, cand_fig = _figures(base_blocks), _figures(cand_blocks)
        gain = next((c.measured for c in at_level if c.name == CheckName.THROUGHPUT_GAIN), None)
        if gain is None and not empty and base_fig["output_tokens_per_s"] > 0:
            gain = 100 * (cand_fig["output_tokens_per_s"] / base_fig["output_tokens_per_s"] - 1)
        at = {"concurrency": level, "baseline": base_fig, "candidate": cand_fig, "throughput_gain_pct": gain}
        if slo is not None:
            difference = next(c for c in at_level if c.name == CheckName.GOODPUT)
            at["goodput"] = {
                "baseline": side_goodput(base_blocks, slo),
                "candidate": side_goodput(cand_blocks, slo),
                "difference_pts": difference.measured,
                "ci_pts": [difference.low, difference.high],
            }
        adapters = adapter_names(base_blocks, cand_blocks)
        if adapters:  # each adapter's figures beside all traffic's (a side that sent it nothing: None)
            at["adapters"] = {
                adapter: {
                    side: _figures(blocks) if blocks else None
                    for side, blocks in (
                        ("baseline", adapter_blocks(base_blocks, adapter)),
                        ("candidate", adapter_blocks(cand_blocks, adapter)),
                    )
                }
                for adapter in adapters
            }
        levels.append(at)
        # No successful request, no cost: tokens of warm-up requests alone are not a service rate.
        costs.append(
            {
                "concurrency": level,
                "baseline": basis.cost_per_million(base_fig["output_tokens_per_s"]) if base.completions else None,
                "candidate": basis.cost_per_million(cand_fig["output_tokens_per_s"]) if cand.completions else None,
                "baseline_output_tokens_per_s": base_fig["output_tokens_per_s"],
                "candidate_output_tokens_per_s": cand_fig["output_tokens_per_s"],
            }
        )

    capacity = None
    if slo is not None and common:
        base_capacity, cand_capacity = (side_capacity(per_level, thresholds) for per_level in at_slo)
        checks.append(capacity_check(base_capacity, cand_capacity, slo))
        peak = None if inputs.peak_concurrency is None else float(inputs.peak_concurrency)
        capacity = capacity_summary(base_capacity, cand_capacity, slo, count, peak)
    checks += quality_checks(inputs.evaluation)
    # A speculative change: its acceptance from the evidence the plan names (the client's chunks on LMI).
    measured = {level: (base_runs[level], cand_runs[level]) for level in common}
    checks += acceptance_checks(
        method, inputs.speculation, measured, inputs.server_metrics, change, inputs.seed, confidence
    )
    if inputs.shadow is not None:
        checks += shadow_checks(inputs.shadow, thresholds)
    checks.sort(key=sort_key)
    return GateVerdict(
        team=inputs.team,
        environment=inputs.environment,
        approved=outcome_of(checks) == APPROVED,
        checks=tuple(checks),
        reasons=tuple(reason(c) for c in checks if not c.passed),
        cost_per_million_output_tokens=tuple(costs),
        cost_basis=basis.to_json(),
        prediction_vs_measurement=prediction_vs_measurement(inputs.prediction, levels, costs),
        levels=tuple(levels),
        change=change,
        thresholds={**thresholds.model_dump(exclude=set(BENCHMARK_ONLY_KEYS)), "speculative_decoding": method},
        deltas=tuple(d.to_dict() for d in all_deltas),
        shadow=json_safe(dict(inputs.shadow)) if inputs.shadow is not None else None,
        cross_check=_cross_check(inputs.cross_check, levels),
        capacity=json_safe(capacity) if capacity is not None else None,
        server_metrics=figures_to_report(inputs.server_metrics) if inputs.server_metrics is not None else None,
        traffic=json_safe(dict(inputs.traffic)) if inputs.traffic is not None else None,
        adapter_check=json_safe(dict(inputs.adapter_check)) if inputs.adapter_check is not None else None,
    )


def unreadable_verdict(
    team: str, environment: str, problems: Sequence[str], change: Mapping[str, Any] | None = None
) -> GateVerdict:
    """The verdict when a file the decision reads failed its schema (`problems`: each one's file, JSON path,
    expected and found): INCONCLUSIVE, one ``inputs`` check per problem and no other. No figure is computed from
    such a file: a verdict from garbage would be worse than none, so nothing is promoted and a person decides."""
    if not problems:
        raise ValueError("an unreadable verdict needs the problem that made it")
    checks = tuple(Check(CheckName.INPUTS, Outcome.INCONCLUSIVE, None, None, problem) for problem in problems)
    return GateVerdict(
        team=team,
        environment=environment,
        approved=False,
        checks=checks,
        reasons=tuple(reason(c) for c in checks),
        cost_per_million_output_tokens=(),
        prediction_vs_measurement=None,
        change=json_safe(dict(change or {})),
    )


def _cross_check(cross_check: Mapping[str, Any] | None, levels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The managed benchmark beside optigate's figures, or None when the gate ran none."""
    if cross_check is None:
        return None
    from optigate.gate.cross_check import compare as cross_compare

    tolerance = {**CrossCheckTolerance().model_dump(), **(cross_check.get("tolerance") or {})}
    return json_safe(cross_compare(levels, cross_check.get("jobs") or [], tolerance))


def compare(
    base_blocks: Sequence[RunSamples], cand_blocks: Sequence[RunSamples], thresholds: BenchmarkGate, seed: int
) -> list[Delta]:
    """Every metric's verdict at one level, the blocks of each side resampled (the report's deltas)."""
    return compare_blocks(base_blocks, cand_blocks, margin_pct=margins(thresholds), seed=seed)


def margins(thresholds: BenchmarkGate) -> MarginLike:
    """The practical margin of each metric the deltas compare."""
    by_metric = {"default": thresholds.equivalence_margin_pct}
    by_metric.update({str(metric): margin for metric, margin in thresholds.metric_margins_pct.items()})
    return by_metric


def outcome_of(checks: Sequence[Check]) -> str:
    """Any fail REJECTED; else any inconclusive INCONCLUSIVE; else APPROVED (no checks: REJECTED)."""
    return {Outcome.FAIL: REJECTED, Outcome.INCONCLUSIVE: UNDECIDED, Outcome.PASS: APPROVED}[
        overall(c.outcome for c in checks)
    ]


def cost_per_million(
    price_per_hour_usd: float | None, instance_count: int, output_tokens_per_s: float | None
) -> float | None:
    """USD per million output tokens: endpoint price per second / endpoint output tokens per second."""
    return CostBasis.instances("", price_per_hour_usd, 1, instance_count).cost_per_million(output_tokens_per_s)


def _figures(blocks: Sequence[RunSamples]) -> dict[str, Any]:
    """A side's figures at one level, its blocks pooled: latency percentiles and counts over every
    block's samples; throughput the mean of the blocks' (each over its window), the window their sum."""
    result = pool(blocks).to_result(include_samples=False)
    windows = [block.to_result(include_samples=False)["window_s"] for block in blocks]
    result["output_tokens_per_s"] = mean_throughput(blocks)
    result["window_s"] = sum(w for w in windows if w is not None) if any(w is not None for w in windows) else None
    return {
        "requests": result["requests"],
        "successful_requests": result["successful_requests"],
        "errors": result["errors"],
        "p50_ttft_ms": result["ttft_ms"]["p50"],
        "p99_ttft_ms": result["ttft_ms"]["p99"],
        "p50_itl_ms": result["itl_ms"]["p50"],
        "p99_itl_ms": result["itl_ms"]["p99"],
        "p50_tpot_ms": result["tpot_ms"]["p50"],
        "p99_tpot_ms": result["tpot_ms"]["p99"],
        "output_tokens_per_s": result["output_tokens_per_s"],
        "mean_tokens_per_chunk": result["tokens_per_chunk"]["mean"],
        "window_s": result["window_s"],
    }
