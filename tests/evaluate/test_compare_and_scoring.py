"""The comparison, scoring and spot-check logic, without fmeval: pure functions over scores."""

from __future__ import annotations

import pytest

from optigate.config.models import EvaluationGate
from optigate.evaluate import scoring
from optigate.evaluate.quality_verdict import compare, slices_of, status
from optigate.evaluate.spotcheck import select


def _records(n: int, categories=("a", "b"), long_every: int = 0):
    return [
        {
            "id": str(i),
            "category": categories[i % len(categories)],
            "model_input": f"q{i}",
            "target_output": "x",
            "prompt_tokens": 9000 if long_every and i % long_every == 0 else 100,
        }
        for i in range(n)
    ]


def _scores(values):
    return [{"qa_exact_match": float(v), "refusal": 0.0} for v in values]


def test_identical_scores_on_enough_records_pass():
    verdict = compare(_records(200), _scores([1] * 150 + [0] * 50), _scores([1] * 150 + [0] * 50))
    assert verdict.status == "pass" and verdict.reasons == []


def test_identical_scores_on_twenty_records_cannot_resolve_one_percent():
    verdict = compare(_records(20), _scores([1] * 20), _scores([1] * 20))
    assert verdict.status == "unresolved"
    assert "cannot resolve 1.0% with 20 records" in verdict.reasons[0]
    assert "at least 100 records are needed" in verdict.reasons[0]


def test_a_drop_hidden_in_one_slice_fails_and_names_it():
    records = _records(300, categories=("easy", "easy", "hard"))
    baseline = [1.0] * 300
    candidate = list(baseline)
    hard = [i for i, r in enumerate(records) if r["category"] == "hard"]
    for i in hard[:3]:  # 3 of 100 hard records: 3 % on the slice, 1 % overall
        candidate[i] = 0.0
    verdict = compare(records, _scores(baseline), _scores(candidate))
    assert verdict.status == "fail"
    failing = {(c.name, c.slice) for c in verdict.checks if status(c) == "fail"}
    assert failing == {("qa_exact_match", "category=hard")}
    assert verdict.reasons == ["qa_exact_match on category=hard: drops by 3.0% (tolerance 1.0%)"]


def test_more_refusals_fail_and_fewer_pass():
    records = _records(200)
    base = _scores([1] * 200)
    more = [dict(s, refusal=1.0 if i < 2 else 0.0) for i, s in enumerate(base)]
    assert compare(records, base, more).status == "fail"
    fewer_base = [dict(s, refusal=1.0 if i < 2 else 0.0) for i, s in enumerate(base)]
    assert compare(records, fewer_base, base).status == "pass"


def test_noise_within_tolerance_but_a_wide_interval_is_unresolved():
    records = _records(120)
    baseline = [1.0] * 120
    candidate = [0.0 if i % 20 == 0 else 1.0 for i in range(120)]  # 6 worse...
    baseline = [0.0 if i % 20 == 10 else b for i, b in enumerate(baseline)]  # ...and 6 better
    verdict = compare(records, _scores(baseline), _scores(candidate))
    check = next(c for c in verdict.checks if c.slice == "all" and c.name == "qa_exact_match")
    assert check.measured == pytest.approx(0.0)
    assert check.low < -0.01 < 0.01 < check.high
    assert status(check) == "unresolved" and verdict.status == "unresolved"


def test_the_interval_covers_the_observed_delta():
    records = _records(400)
    baseline = [1.0] * 400
    candidate = [0.0 if i % 10 == 0 else 1.0 for i in range(400)]
    check = next(
        c
        for c in compare(records, _scores(baseline), _scores(candidate)).checks
        if c.slice == "all" and c.name == "qa_exact_match"
    )
    assert check.measured == pytest.approx(-0.1)
    assert check.low < -0.1 < check.high and status(check) == "fail"


def test_long_context_slice_comes_from_prompt_tokens():
    slices = slices_of(_records(10, long_every=5), EvaluationGate(long_context_prompt_tokens=4096))
    assert slices["long_context"] == [0, 5]
    assert slices["category=a"] == [0, 2, 4, 6, 8]


def test_scores_must_align():
    with pytest.raises(ValueError, match="align"):
        compare(_records(3), _scores([1, 1, 1]), _scores([1, 1]))


@pytest.mark.parametrize(
    "output, target, em, qem, f1",
    [
        ("Paris", "Paris", 1, 1, 1.0),
        ("The Paris.", "paris", 0, 1, 1.0),
        ("It is Paris", "Paris<OR>City of Light", 0, 0, 2 * (1 / 3 * 1) / (1 / 3 + 1)),
        ("London", "Paris", 0, 0, 0.0),
    ],
)
def test_qa_scores(output, target, em, qem, f1):
    assert scoring.exact_match(output, target) == em
    assert scoring.quasi_exact_match(output, target) == qem
    assert scoring.f1(output, target) == pytest.approx(f1)


def test_refusal_patterns():
    assert scoring.is_refusal("I'm sorry, but I can't help with that request.")
    assert scoring.is_refusal("As an AI language model I cannot answer")
    assert not scoring.is_refusal("The answer is 42.")
    assert scoring.is_refusal("Nope.", (r"^nope",))


def test_spot_check_reads_the_slices_where_the_candidate_lost_most():
    records = _records(90, categories=("easy", "hard", "mid"))
    baseline = [{"qa_f1": 1.0 if r["category"] == "easy" else 0.5 if r["category"] == "hard" else 0.8} for r in records]
    candidate = [dict(s) for s in baseline]
    for i, r in enumerate(records):
        if r["category"] == "hard" and i % 2:
            candidate[i]["qa_f1"] = 0.0
    verdict = compare(records, baseline, candidate)
    outputs = [f"out{i}" for i in range(90)]
    spot = select(
        records,
        baseline,
        candidate,
        outputs,
        [o if i % 2 == 0 else "changed" for i, o in enumerate(outputs)],
        EvaluationGate(),
        verdict,
        size=10,
    )
    assert spot.read_from == ["category=hard"]  # the only slice that regressed
    assert len(spot.rows) == 10
    assert all(row["slices"] == ["category=hard"] and row["candidate_scores"]["qa_f1"] == 0.0 for row in spot.rows)
