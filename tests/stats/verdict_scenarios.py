"""Fixed inputs for each consumer of the judge, built from the existing tests' data, and each
consumer's verdicts on them as its report writes them (``to_dict``, the shape that stays the same).

Kept free of `optigate.judge` so the same code runs against the package before the judge existed:
the expected words in test_judge.py were produced that way (see its docstring), not by the judge."""

from __future__ import annotations

from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.compare import compare_blocks
from optigate.bench.metrics import RunSamples
from optigate.evaluate.quality_verdict import compare
from optigate.gate.decision import GateInputs, decide
from tests.bench.test_compare import block
from tests.fixtures.simulated_blocks import Shape, simulated_block
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, synthetic_run


def bench_verdicts() -> dict[str, list[tuple[str, str, int, str]]]:
    """`bench compare` on tests/bench/test_compare.py's data: its four words' sides (twelve runs a side,
    so "equivalent" can show), its simulated blocks (drifting, faster, steady) and a failed candidate:
    (metric, statistic, level, verdict) per delta."""
    rng = stats.generator(3)

    def side(median: float, runs: int = 3) -> list[RunSamples]:
        return [block(1, list(rng.lognormal(np.log(median), 0.05, 200))) for _ in range(runs)]

    base = side(150, 12)
    same, quicker, slower = side(150, 12), side(120), side(180)
    drifting = [simulated_block(4, 32, Shape(drift=0.1), tokens=64, seed=[1, b]) for b in range(3)]
    faster = [simulated_block(4, 32, Shape(itl_ms=12.0, drift=0.1), tokens=64, seed=[2, b]) for b in range(3)]
    steady = [simulated_block(4, 32, Shape(drift=0.0), tokens=64, seed=[3, 0])] * 3
    failed = RunSamples(4, queue_ms=[0.0] * 20, errors={"ModelError": 20})
    pairs = {
        "twelve runs alike": (base, same),
        "twenty percent quicker": (base, quicker),
        "twenty percent slower": (base, slower),
        "drifting vs faster": (drifting, faster),
        "steady vs steady": (steady, steady),
        "faster vs drifting": (faster, drifting),
        "candidate failed": (steady, [failed]),
    }
    return {
        name: [
            (row["metric"], row["statistic"], row["concurrency"], row["verdict"])
            for row in (delta.to_dict() for delta in compare_blocks(base, cand))
        ]
        for name, (base, cand) in pairs.items()
    }


def gate_verdicts() -> dict[str, tuple[str, list[tuple[str, int | None, str]]]]:
    """The gate's decision on tests/gate_logic/test_decide.py's synthetic runs under thresholds that
    pass, straddle and fail: (outcome, [(check, level, outcome)])."""
    baseline = bench(synthetic_run(4, seed=1))
    faster = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), ttft_ms=120.0, seed=2))
    slower = bench(synthetic_run(4, itl_ms=itl_for_gain(-0.10), seed=3))
    erring = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), error_every=20, seed=4))
    unresolved = {"status": "unresolved", "reasons": ["qa_f1 on the whole dataset: cannot resolve"]}
    shadow = {
        "window_minutes": 30,
        "sampling_percentage": 10,
        "production": {"variant": "baseline", "invocations": 900, "errors_5xx": 0},
        "shadow": {"variant": "candidate", "invocations": 90, "errors_5xx": 3},
    }
    cases: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "faster": (faster, {}),
        "slower": (slower, {}),
        "same": (baseline, {}),
        "errors": (erring, {}),
        "tight budgets": (
            faster,
            {"thresholds": {**THRESHOLDS, "p99_ttft_ms_budget": 150.0, "p99_itl_ms_budget": 12.0}},
        ),
        "high minimum": (faster, {"thresholds": {**THRESHOLDS, "min_throughput_gain_pct": 40.0}}),
        "speculation": (faster, {"change": {"speculative_decoding": "eagle"}}),
        "quality unresolved": (faster, {"evaluation": unresolved}),
        "no quality": (faster, {"evaluation": None}),
        "shadow": (faster, {"shadow": shadow}),
    }
    out = {}
    for name, (candidate, overrides) in cases.items():
        values: dict[str, Any] = {
            "team": "chat",
            "environment": "dev",
            "thresholds": THRESHOLDS,
            "baseline_benchmark": baseline,
            "candidate_benchmark": candidate,
            "evaluation": PASS,
            **overrides,
        }
        data = decide(GateInputs(**values)).to_dict()
        out[name] = (data["outcome"], [(c["name"], c["concurrency"], c["outcome"]) for c in data["checks"]])
    return out


def _records(n: int, categories: tuple[str, ...] = ("a", "b")) -> list[dict[str, Any]]:
    return [{"id": str(i), "category": categories[i % len(categories)], "prompt_tokens": 100} for i in range(n)]


def _scores(values: list[float], refusals: int = 0) -> list[dict[str, float]]:
    return [{"qa_exact_match": float(v), "refusal": 1.0 if i < refusals else 0.0} for i, v in enumerate(values)]


def evaluation_verdicts() -> dict[str, tuple[str, list[tuple[str, str, str]]]]:
    """The quality evaluation on tests/evaluate/test_compare_and_scoring.py's records: (status,
    [(metric, slice, status)])."""
    hidden = [1.0] * 300
    hard = [i for i in range(300) if i % 3 == 2]
    for i in hard[:3]:
        hidden[i] = 0.0
    noisy_base = [0.0 if i % 20 == 10 else 1.0 for i in range(120)]
    noisy_cand = [0.0 if i % 20 == 0 else 1.0 for i in range(120)]
    cases = {
        "identical 200": (_records(200), _scores([1] * 150 + [0] * 50), _scores([1] * 150 + [0] * 50)),
        "identical 20": (_records(20), _scores([1] * 20), _scores([1] * 20)),
        "drop in a slice": (_records(300, ("easy", "easy", "hard")), _scores([1.0] * 300), _scores(hidden)),
        "more refusals": (_records(200), _scores([1] * 200), _scores([1] * 200, refusals=2)),
        "fewer refusals": (_records(200), _scores([1] * 200, refusals=2), _scores([1] * 200)),
        "noise": (_records(120), _scores(noisy_base), _scores(noisy_cand)),
        "ten percent drop": (
            _records(400),
            _scores([1.0] * 400),
            _scores([0.0 if i % 10 == 0 else 1.0 for i in range(400)]),
        ),
        "no records": ([], [], []),
    }
    out = {}
    for name, (records, base, cand) in cases.items():
        data = compare(records, base, cand).to_dict()
        out[name] = (data["status"], [(c["metric"], c["slice"], c["status"]) for c in data["checks"]])
    return out
