"""The optimization gate's decision: approve a candidate only on evidence (pure: numpy, stdlib
and `optigate.bench`; no AWS).

Checks, evaluated at every concurrency level both benchmarks measured (``concurrency`` on the
check), each a :class:`Check` whose ``measured``, ``threshold`` and interval are in the unit named
below:

- ``p99_ttft`` (ms, when ``p99_ttft_ms_budget`` is set): passes only when the *upper* end of a
  95 % percentile-bootstrap interval of the candidate's p99 TTFT (requests resampled) is within
  the budget. A latency check passes only when its confidence interval clears the threshold, so a
  p99 just under the budget on too few or too noisy samples fails.
- ``p99_itl`` (ms, when ``p99_itl_ms_budget`` is set): the same for per-token ITL, with a cluster
  bootstrap over requests (a request's gaps are correlated; resampling them one by one would make
  the interval too narrow).
- ``throughput_gain`` (%): candidate vs baseline output tokens/s (the ``output_tokens_per_s``
  delta of :func:`optigate.bench.compare.compare_runs`, its interval from one-second buckets);
  passes only when the *lower* end of the relative gain's interval reaches
  ``min_throughput_gain_pct``. Fewer than :data:`MIN_THROUGHPUT_BUCKETS` one-second buckets in
  either measurement window give no usable interval and fail.
- ``error_rate`` (fraction): candidate failed requests / measured requests ≤ ``max_error_rate``.
- ``tokens_per_chunk_gain`` (%, only when the change enables speculative decoding): the gain of
  the candidate's mean tokens per streamed chunk over the baseline's (a client-side proxy for the
  acceptance rate); passes only when the lower end of a bootstrap interval on the candidate mean
  reaches ``min_tokens_per_chunk_gain_pct``. Below roughly 40 % acceptance, drafting and verifying
  costs more than it saves and speculation makes decoding slower.
- ``quality`` (the evaluation's status): passes only when the quality evaluation passed; an
  ``unresolved`` evaluation fails closed with its reasons, a missing one fails ("no quality
  evidence").
- ``shadow_traffic`` and ``shadow_error_rate`` (only when the candidate ran as a shadow variant on
  the live endpoint): the shadow must have received at least ``min_shadow_requests`` mirrored
  requests in the window (fewer cannot tell anything and fail closed), and its 5XX share of them
  must stay within ``max_error_rate``. The two variants' p99 ModelLatency is reported beside them;
  it is one figure per window without an interval, so the benchmark's intervals judge latency.
- ``coverage``: every concurrency level of ``thresholds.concurrency`` must have been measured by
  both benchmarks; an unmeasured level is missing evidence and fails.

Fail closed: a benchmark (baseline or candidate) with zero successful requests at a level fails
every latency check at that level (``p99_ttft``, ``p99_itl``, ``throughput_gain``,
``tokens_per_chunk_gain``), with ``measured`` None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.compare import Delta, compare_runs, throughput_buckets
from optigate.bench.metrics import RunSamples

CONFIDENCE = stats.CONFIDENCE
REPLICATES = 1000
SEED = 0
#: One-second throughput buckets each measurement window needs for a throughput interval.
MIN_THROUGHPUT_BUCKETS = 5
#: Values of ``change.speculative_decoding`` that mean "off".
_SPECULATION_OFF = frozenset({"", "none", "off", "false", "no", "disabled"})
#: Keys of ``gate.benchmark`` that configure the benchmark, not the decision.
_BENCHMARK_ONLY_KEYS = frozenset({"prompt_tokens", "max_new_tokens"})
_CHECK_ORDER = ("coverage", "p99_ttft", "p99_itl", "throughput_gain", "error_rate", "tokens_per_chunk_gain", "shadow_traffic", "shadow_error_rate", "quality")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Thresholds:
    """The decision part of a team's ``gate.benchmark`` (defaults as in ``BenchmarkGate``)."""

    concurrency: tuple[int, ...] = (1, 16, 64)
    p99_ttft_ms_budget: float | None = None
    p99_itl_ms_budget: float | None = None
    min_throughput_gain_pct: float = 10.0
    max_error_rate: float = 0.01
    min_tokens_per_chunk_gain_pct: float = 20.0
    min_shadow_requests: float = 100

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Thresholds:
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - _BENCHMARK_ONLY_KEYS)
        if unknown:
            # A misspelt budget must not silently switch a check off.
            raise ValueError(f"thresholds: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name in known & set(data):
            value = data[name]
            if name == "concurrency":
                if value is None:
                    raise ValueError("thresholds.concurrency must be a list of levels")
                values[name] = tuple(int(c) for c in value)
            elif value is None:
                if name not in ("p99_ttft_ms_budget", "p99_itl_ms_budget"):
                    raise ValueError(f"thresholds.{name} must be a number")
                values[name] = None
            else:
                values[name] = float(value)
        thresholds = cls(**values)
        for name in ("p99_ttft_ms_budget", "p99_itl_ms_budget"):
            budget = getattr(thresholds, name)
            if budget is not None and not budget > 0:
                raise ValueError(f"thresholds.{name} must be > 0, got {budget}")
        if not 0 <= thresholds.max_error_rate <= 1:
            raise ValueError(f"thresholds.max_error_rate must be within [0, 1], got {thresholds.max_error_rate}")
        return thresholds

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(getattr(self, f.name)) if f.name == "concurrency" else getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class GateInputs:
    """Everything the gate decides on (JSON-shaped, so a Step Functions state can carry it)."""

    team: str
    environment: str
    change: Mapping[str, Any] = field(default_factory=dict)  # quantization, speculative_decoding, container_version, ...
    thresholds: Mapping[str, Any] = field(default_factory=dict)  # the team's gate.benchmark
    baseline_benchmark: Mapping[str, Any]  # `optigate bench --json` / BenchmarkFleet merge: {"runs": [...]}
    candidate_benchmark: Mapping[str, Any]
    evaluation: Mapping[str, Any] | None = None  # optigate.evaluate verdict.json, None when not run
    price_per_hour_usd: float | None = None  # per instance
    instance_count: int = 1
    prediction: Mapping[str, Any] | None = None  # planner: decode_tpot_ms_batch1, cost_per_million_output_tokens, ...
    # Mirrored live traffic, when the candidate ran as a shadow variant: {"window_minutes",
    # "sampling_percentage", "production": {...}, "shadow": {...}}, each side {"variant",
    # "invocations", "errors_5xx", "p99_model_latency_ms"} from CloudWatch (None when no datapoint).
    shadow: Mapping[str, Any] | None = None
    seed: int = SEED

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateInputs:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"gate inputs: unknown key(s) {', '.join(unknown)}")
        missing = sorted(f for f in ("team", "environment", "baseline_benchmark", "candidate_benchmark") if data.get(f) is None)
        if missing:
            raise ValueError(f"gate inputs: missing {', '.join(missing)}")
        values = dict(data)
        for key in ("change", "thresholds"):
            if values.get(key) is None:
                values.pop(key, None)
        if values.get("instance_count") is None:
            values.pop("instance_count", None)
        return cls(**values)

    def __post_init__(self) -> None:
        if int(self.instance_count) < 1:
            raise ValueError(f"instance_count must be >= 1, got {self.instance_count}")
        if self.price_per_hour_usd is not None and not float(self.price_per_hour_usd) >= 0:
            raise ValueError(f"price_per_hour_usd must be >= 0, got {self.price_per_hour_usd}")


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Check:
    name: str
    measured: float | str | None
    threshold: float | str | None
    passed: bool
    detail: str
    ci_low: float | None = None
    ci_high: float | None = None
    concurrency: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _clean({
            "name": self.name,
            "concurrency": self.concurrency,
            "passed": self.passed,
            "measured": self.measured,
            "threshold": self.threshold,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "detail": self.detail,
        })


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
    deltas: tuple[dict[str, Any], ...] = ()  # compare_runs deltas (bootstrap intervals), for the report
    shadow: dict[str, Any] | None = None  # the mirrored-traffic figures, when a shadow ran

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def summary(self) -> str:
        where = f"{self.team}/{self.environment}"
        if self.approved:
            return f"APPROVED {where}: all {len(self.checks)} checks pass"
        names = ", ".join(dict.fromkeys(_label(c) for c in self.failed))
        return f"REJECTED {where}: {len(self.failed)} of {len(self.checks)} checks fail ({names})"

    def to_dict(self) -> dict[str, Any]:
        return _clean({
            "team": self.team,
            "environment": self.environment,
            "approved": self.approved,
            "summary": self.summary,
            "reasons": list(self.reasons),
            "checks": [c.to_dict() for c in self.checks],
            "cost_per_million_output_tokens": list(self.cost_per_million_output_tokens),
            "prediction_vs_measurement": self.prediction_vs_measurement,
            "levels": list(self.levels),
            "change": self.change,
            "thresholds": self.thresholds,
            "deltas": list(self.deltas),
            "shadow": self.shadow,
        })


def _label(check: Check) -> str:
    return check.name if check.concurrency is None else f"{check.name}@c{check.concurrency}"


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None, numpy scalars plain Python, tuples lists."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


# --------------------------------------------------------------------------- decision


def speculative_method(change: Mapping[str, Any]) -> str | None:
    """The speculative-decoding method the change turns on, or None."""
    value = change.get("speculative_decoding")
    if value is None or value is False:
        return None
    if value is True:
        return "enabled"
    if isinstance(value, str):
        return None if value.strip().lower() in _SPECULATION_OFF else value
    if isinstance(value, Mapping):
        method = value.get("method")
        if isinstance(method, str) and method.strip().lower() in _SPECULATION_OFF:
            return None
        return str(method) if method else "enabled"
    return "enabled"


def _runs_by_level(result: Mapping[str, Any], label: str) -> dict[int, RunSamples]:
    runs: dict[int, RunSamples] = {}
    for run in result.get("runs") or []:
        level = int(run["concurrency"])
        if level in runs:
            raise ValueError(f"{label} benchmark: two runs at concurrency {level}; merge shards first (optigate.bench.metrics.merge)")
        if "samples" not in run:
            raise ValueError(f"{label} benchmark: the run at concurrency {level} has no raw samples (they are needed for the intervals)")
        runs[level] = RunSamples.from_result(run)
    return runs


def cost_per_million(price_per_hour_usd: float | None, instance_count: int, output_tokens_per_s: float | None) -> float | None:
    """USD per million output tokens: endpoint price per second / endpoint output tokens per second."""
    if price_per_hour_usd is None or not output_tokens_per_s or output_tokens_per_s <= 0:
        return None
    return price_per_hour_usd * instance_count / 3600.0 / output_tokens_per_s * 1e6


def _figures(run: RunSamples) -> dict[str, Any]:
    result = run.to_result(include_samples=False)
    return {
        "requests": result["requests"],
        "successful_requests": result["successful_requests"],
        "errors": result["errors"],
        "p50_ttft_ms": result["ttft_ms"]["p50"],
        "p99_ttft_ms": result["ttft_ms"]["p99"],
        "p50_itl_ms": result["itl_ms"]["p50"],
        "p99_itl_ms": result["itl_ms"]["p99"],
        "p50_tpot_ms": result["tpot_ms"]["p50"],
        "output_tokens_per_s": result["output_tokens_per_s"],
        "mean_tokens_per_chunk": result["tokens_per_chunk"]["mean"],
        "window_s": result["window_s"],
    }


def _seed(seed: int, level: int, check: str) -> list[int]:
    return [seed, level, _CHECK_ORDER.index(check)]


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _pct(value: float) -> str:
    return f"{value:+.1f} %"


def _no_success(level: int, base: RunSamples, cand: RunSamples) -> str | None:
    empty = [f"{label} had no successful requests ({run.requests} sent{_error_text(run)})" for label, run in (("the baseline", base), ("the candidate", cand)) if not run.completions]
    return " and ".join(empty) if empty else None


def _error_text(run: RunSamples) -> str:
    return "; " + ", ".join(f"{name} {count}" for name, count in sorted(run.errors.items())) if run.errors else ""


def _latency_check(name: str, label: str, samples: list[float], counts: list[int] | None, budget: float, level: int, seed: int) -> Check:
    if not samples:
        return Check(name, None, budget, False, f"no {label} samples from the candidate", concurrency=level)
    clustered = counts is not None and len(counts) and sum(counts) == len(samples)  # else one sample per request
    point, low, high = stats.bootstrap_percentile(
        samples, 99, counts=counts if clustered else None, replicates=REPLICATES, confidence=CONFIDENCE, rng=_seed(seed, level, name)
    )
    passed = high <= budget
    detail = f"candidate p99 {label} {_ms(point)} (95 % CI {_ms(low)} to {_ms(high)}, {len(samples)} samples) vs budget {_ms(budget)}"
    if not passed:
        detail += (": the upper end of the interval is over the budget" if point <= budget else ": over the budget")
    return Check(name, point, budget, passed, detail, low, high, level)


def _throughput_check(level: int, base: RunSamples, cand: RunSamples, deltas: list[Delta], minimum_pct: float) -> Check:
    name = "throughput_gain"
    buckets = {label: len(throughput_buckets(run)) for label, run in (("baseline", base), ("candidate", cand))}
    short = [f"{label} {count}" for label, count in buckets.items() if count < MIN_THROUGHPUT_BUCKETS]
    if short:
        return Check(name, None, minimum_pct, False, f"measurement window too short for a throughput interval ({', '.join(short)} one-second buckets, at least {MIN_THROUGHPUT_BUCKETS} needed)", concurrency=level)
    delta = next((d for d in deltas if d.metric == "output_tokens_per_s"), None)
    if delta is None or not delta.baseline > 0:
        return Check(name, None, minimum_pct, False, "no baseline throughput to compare with", concurrency=level)
    gain, low, high = (100 * value / delta.baseline for value in (delta.delta, delta.low, delta.high))
    passed = low >= minimum_pct
    detail = (
        f"output throughput {delta.candidate:,.1f} vs {delta.baseline:,.1f} tokens/s: gain {_pct(gain)} "
        f"(95 % CI {_pct(low)} to {_pct(high)}) vs minimum {_pct(minimum_pct)}"
    )
    if not passed:
        detail += ": the lower end of the interval is below the minimum" if gain >= minimum_pct else ": below the minimum"
    return Check(name, gain, minimum_pct, passed, detail, low, high, level)


def _error_check(level: int, cand: RunSamples, maximum: float) -> Check:
    name = "error_rate"
    if not cand.requests:
        return Check(name, None, maximum, False, "no measured candidate requests", concurrency=level)
    failed = sum(cand.errors.values())
    rate = failed / cand.requests
    passed = rate <= maximum
    detail = f"{failed} of {cand.requests} candidate requests failed" + (f" ({_error_text(cand)[2:]})" if cand.errors else "")
    return Check(name, rate, maximum, passed, detail, concurrency=level)


def _tokens_per_chunk_check(level: int, base: RunSamples, cand: RunSamples, minimum_pct: float, method: str, seed: int) -> Check:
    name = "tokens_per_chunk_gain"
    base_mean = float(np.mean(base.tokens_per_chunk)) if base.tokens_per_chunk else 0.0
    if not base_mean > 0 or not cand.tokens_per_chunk:
        return Check(name, None, minimum_pct, False, "no tokens-per-chunk samples to compare", concurrency=level)
    mean, low, high = stats.bootstrap_mean(cand.tokens_per_chunk, replicates=REPLICATES, confidence=CONFIDENCE, rng=_seed(seed, level, name))
    gain, gain_low, gain_high = (100 * (value / base_mean - 1) for value in (mean, low, high))
    passed = gain_low >= minimum_pct
    detail = (
        f"speculative decoding ({method}): mean tokens per chunk {mean:.2f} vs {base_mean:.2f} baseline, gain {_pct(gain)} "
        f"(95 % CI {_pct(gain_low)} to {_pct(gain_high)}) vs minimum {_pct(minimum_pct)}"
    )
    if not passed:
        detail += ": too few drafted tokens are accepted; below ~40 % acceptance speculation makes decoding slower"
    return Check(name, gain, minimum_pct, passed, detail, gain_low, gain_high, level)


def _quality_check(evaluation: Mapping[str, Any] | None) -> Check:
    name = "quality"
    if evaluation is None:
        return Check(name, None, "pass", False, "no quality evidence: the evaluation did not run")
    status = str(evaluation.get("status", "")).lower() or None
    reasons = "; ".join(str(r) for r in evaluation.get("reasons") or [])
    if status == "pass":
        return Check(name, status, "pass", True, "quality evaluation passed: every metric within its tolerance")
    if status == "unresolved":
        detail = "quality evaluation unresolved, fails closed" + (f": {reasons}" if reasons else " (the data cannot tell)")
    elif status == "fail":
        detail = "quality evaluation failed" + (f": {reasons}" if reasons else "")
    else:
        detail = f"quality evaluation has no recognised status ({evaluation.get('status')!r}): fails closed"
    return Check(name, status, "pass", False, detail)


def _shadow_checks(shadow: Mapping[str, Any], thresholds: Thresholds) -> list[Check]:
    window = f"{shadow.get('window_minutes', '?')} min window"
    side = shadow.get("shadow") or {}
    invocations = side.get("invocations")
    minimum = thresholds.min_shadow_requests
    if not invocations or invocations < minimum:
        seen = 0 if not invocations else int(invocations)
        traffic = Check("shadow_traffic", seen, minimum, False, f"{seen} live requests mirrored to the shadow in the {window}: too few to judge it")
        return [traffic, Check("shadow_error_rate", None, thresholds.max_error_rate, False, "no mirrored traffic to measure")]
    traffic = Check("shadow_traffic", int(invocations), minimum, True, f"{int(invocations)} live requests mirrored to the shadow in the {window}")
    errors = side.get("errors_5xx") or 0
    rate = errors / invocations
    detail = f"{int(errors)} of {int(invocations)} mirrored requests failed with 5XX"
    return [traffic, Check("shadow_error_rate", rate, thresholds.max_error_rate, rate <= thresholds.max_error_rate, detail)]


def _threshold_text(check: Check) -> str:
    if check.name in ("p99_ttft", "p99_itl"):
        return f"budget {_ms(check.threshold)} on the upper end of the 95 % interval"
    if check.name in ("throughput_gain", "tokens_per_chunk_gain"):
        return f"minimum {_pct(check.threshold)} on the lower end of the 95 % interval"
    if check.name in ("error_rate", "shadow_error_rate"):
        return f"maximum {check.threshold:.2%}"
    if check.name == "shadow_traffic":
        return f"at least {check.threshold:.0f} mirrored requests"
    if check.name == "quality":
        return "status pass"
    return f"concurrency {check.threshold}" if check.threshold is not None else "a level measured by both"


def _reason(check: Check) -> str:
    """One sentence per failed check: the check, where, the measured value and the threshold."""
    where = f" at concurrency {check.concurrency}" if check.concurrency is not None else ""
    if check.name == "quality":
        return f"quality fails: {check.detail} (required: {_threshold_text(check)})."
    if check.name == "coverage":
        return f"coverage{where} fails: {check.detail}."
    if check.measured is None:
        return f"{check.name}{where} fails closed: {check.detail}; {_threshold_text(check)}."
    if check.name in ("p99_ttft", "p99_itl"):
        metric = "TTFT" if check.name == "p99_ttft" else "ITL"
        return (
            f"{check.name}{where} fails: candidate p99 {metric} is {_ms(check.measured)} with a 95 % interval up to "
            f"{_ms(check.ci_high)}, over the {_ms(check.threshold)} budget that the whole interval must stay within."
        )
    if check.name in ("throughput_gain", "tokens_per_chunk_gain"):
        what = "output throughput gain" if check.name == "throughput_gain" else "mean tokens-per-chunk gain"
        tail = "" if check.name == "throughput_gain" else " (speculation accepting this few drafted tokens slows decoding)"
        return (
            f"{check.name}{where} fails: {what} is {_pct(check.measured)} with a 95 % interval down to {_pct(check.ci_low)}, "
            f"below the {_pct(check.threshold)} minimum that the whole interval must reach{tail}."
        )
    if check.name in ("error_rate", "shadow_error_rate"):
        return f"{check.name}{where} fails: {check.detail}, an error rate of {check.measured:.2%}, above the {check.threshold:.2%} maximum."
    if check.name == "shadow_traffic":
        return f"shadow_traffic fails closed: {check.detail}; {_threshold_text(check)}."
    return f"{check.name}{where} fails: {check.detail}."


def decide(inputs: GateInputs) -> GateVerdict:
    thresholds = Thresholds.from_dict(inputs.thresholds)
    change = dict(inputs.change or {})
    method = speculative_method(change)
    base_runs = _runs_by_level(inputs.baseline_benchmark, "baseline")
    cand_runs = _runs_by_level(inputs.candidate_benchmark, "candidate")
    common = sorted(set(base_runs) & set(cand_runs))
    price, count = inputs.price_per_hour_usd, int(inputs.instance_count)
    price = None if price is None else float(price)

    checks: list[Check] = []
    for level in thresholds.concurrency:
        if level not in common:
            missing = " and ".join(label for label, runs in (("baseline", base_runs), ("candidate", cand_runs)) if level not in runs)
            checks.append(Check("coverage", None, level, False, f"concurrency {level} is in the gate's levels but the {missing} benchmark did not measure it", concurrency=level))
    if not common:
        checks.append(Check("coverage", None, None, False, "no concurrency level was measured by both benchmarks"))

    levels: list[dict[str, Any]] = []
    costs: list[dict[str, Any]] = []
    all_deltas: list[Delta] = []
    for level in common:
        base, cand = base_runs[level], cand_runs[level]
        empty = _no_success(level, base, cand)
        deltas = compare_runs(base, cand, seed=inputs.seed) if not empty else []
        all_deltas += deltas
        level_checks: list[Check] = []
        if thresholds.p99_ttft_ms_budget is not None:
            level_checks.append(
                Check("p99_ttft", None, thresholds.p99_ttft_ms_budget, False, empty, concurrency=level) if empty
                else _latency_check("p99_ttft", "TTFT", cand.ttft_ms, None, thresholds.p99_ttft_ms_budget, level, inputs.seed)
            )
        if thresholds.p99_itl_ms_budget is not None:
            level_checks.append(
                Check("p99_itl", None, thresholds.p99_itl_ms_budget, False, empty, concurrency=level) if empty
                else _latency_check("p99_itl", "ITL", cand.itl_ms, cand.itl_counts, thresholds.p99_itl_ms_budget, level, inputs.seed)
            )
        level_checks.append(
            Check("throughput_gain", None, thresholds.min_throughput_gain_pct, False, empty, concurrency=level) if empty
            else _throughput_check(level, base, cand, deltas, thresholds.min_throughput_gain_pct)
        )
        level_checks.append(_error_check(level, cand, thresholds.max_error_rate))
        if method is not None:
            level_checks.append(
                Check("tokens_per_chunk_gain", None, thresholds.min_tokens_per_chunk_gain_pct, False, empty, concurrency=level) if empty
                else _tokens_per_chunk_check(level, base, cand, thresholds.min_tokens_per_chunk_gain_pct, method, inputs.seed)
            )
        checks += level_checks

        base_fig, cand_fig = _figures(base), _figures(cand)
        gain = next((c.measured for c in level_checks if c.name == "throughput_gain"), None)
        if gain is None and not empty and base_fig["output_tokens_per_s"] > 0:
            gain = 100 * (cand_fig["output_tokens_per_s"] / base_fig["output_tokens_per_s"] - 1)
        levels.append({"concurrency": level, "baseline": base_fig, "candidate": cand_fig, "throughput_gain_pct": gain})
        # No successful request, no cost: tokens of warm-up requests alone are not a service rate.
        costs.append({
            "concurrency": level,
            "baseline": cost_per_million(price, count, base_fig["output_tokens_per_s"]) if base.completions else None,
            "candidate": cost_per_million(price, count, cand_fig["output_tokens_per_s"]) if cand.completions else None,
            "baseline_output_tokens_per_s": base_fig["output_tokens_per_s"],
            "candidate_output_tokens_per_s": cand_fig["output_tokens_per_s"],
        })

    checks.append(_quality_check(inputs.evaluation))
    if inputs.shadow is not None:
        checks += _shadow_checks(inputs.shadow, thresholds)
    checks.sort(key=lambda c: (c.concurrency is None, c.concurrency or 0, _CHECK_ORDER.index(c.name)))
    reasons = tuple(_reason(c) for c in checks if not c.passed)
    return GateVerdict(
        team=inputs.team,
        environment=inputs.environment,
        approved=bool(checks) and all(c.passed for c in checks),
        checks=tuple(checks),
        reasons=reasons,
        cost_per_million_output_tokens=tuple(costs),
        prediction_vs_measurement=_prediction_vs_measurement(inputs.prediction, levels, costs),
        levels=tuple(levels),
        change=change,
        thresholds={**thresholds.to_dict(), "speculative_decoding": method},
        deltas=tuple(d.to_dict() for d in all_deltas),
        shadow=_clean(dict(inputs.shadow)) if inputs.shadow is not None else None,
    )


def _ratio(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or not predicted:
        return None
    return measured / predicted


def _prediction_vs_measurement(prediction: Mapping[str, Any] | None, levels: list[dict[str, Any]], costs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The planner's figures (roofline lower bounds) next to what the candidate measured."""
    if not prediction:
        return None
    at_one = next((lvl["candidate"] for lvl in levels if lvl["concurrency"] == 1), None)
    tpot = prediction.get("decode_tpot_ms_batch1")
    prefill = prediction.get("prefill_ms")
    cost = prediction.get("cost_per_million_output_tokens")
    measured_costs = [c for c in costs if c["candidate"] is not None]
    cheapest = min(measured_costs, key=lambda c: c["candidate"]) if measured_costs else None
    measured_tpot = at_one["p50_tpot_ms"] if at_one else None
    measured_ttft = at_one["p50_ttft_ms"] if at_one else None
    measured_cost = cheapest["candidate"] if cheapest else None
    return {
        "decode_tpot_ms_batch1": {
            "predicted": tpot, "measured": measured_tpot, "measured_as": "candidate p50 TPOT at concurrency 1", "ratio": _ratio(measured_tpot, tpot),
        },
        "prefill_ms": {
            "predicted": prefill, "measured": measured_ttft, "measured_as": "candidate p50 TTFT at concurrency 1 (includes network and queueing)", "ratio": _ratio(measured_ttft, prefill),
        },
        "cost_per_million_output_tokens": {
            "predicted": cost, "measured": measured_cost,
            "measured_as": f"candidate at concurrency {cheapest['concurrency']} (its cheapest level)" if cheapest else "no measured cost (no price or no throughput)",
            "ratio": _ratio(measured_cost, cost),
        },
        "kv_capacity_tokens": {"predicted": prediction.get("kv_capacity_tokens"), "measured": None, "measured_as": "not observable from the client", "ratio": None},
        "note": "planner figures are roofline lower bounds: a measured/predicted ratio of 1 or more is expected; far above 1 leaves room to optimize",
    }
