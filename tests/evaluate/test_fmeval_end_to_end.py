"""A real fmeval run (in the evaluation environment) against emulated endpoints in answer mode."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from optigate.emulator.process import emulator_process
from optigate.evaluate.sample_data import generate, write
from tests.conftest import REPO

# Every test here reads one real fmeval run in the evaluation environment (a minute): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

EVAL_PYTHON = os.environ.get("OPTIGATE_EVAL_PYTHON", str(REPO / ".venv-eval" / "bin" / "python"))


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    if not Path(EVAL_PYTHON).exists():
        pytest.fail(f"the evaluation environment is missing ({EVAL_PYTHON}); scripts/setup.sh creates it")
    folder = tmp_path_factory.mktemp("fmeval")
    write(folder / "full.jsonl", generate())
    small_records = generate({"arithmetic": 5, "multi_step": 5, "lookup": 5, "long_context": 5}, seed=1)
    write(folder / "small.jsonl", small_records)
    both = write(folder / "answers.jsonl", generate() + small_records)
    answers = {"answers_file": str(both), "ttft_ms": 1, "itl_ms": 0.1}
    config = {
        "endpoints": {
            "baseline": answers,
            "same": answers,
            "worse": {**answers, "wrong_fraction": 0.04, "wrong_categories": ["multi_step"]},
            "refuser": {**answers, "refuse_fraction": 0.03},
            # An adapter team's twin and candidate: the candidate's reply adapter loses multi-step answers.
            "adapters-twin": {**answers, "inference_components": {"twin-base": answers, "twin-reply": answers}},
            "adapters-cand": {
                **answers,
                "inference_components": {
                    "cand-base": answers,
                    "cand-reply": {**answers, "wrong_fraction": 0.04, "wrong_categories": ["multi_step"]},
                },
            },
        }
    }
    with emulator_process(config) as url:
        result = subprocess.run(
            [
                EVAL_PYTHON,
                str(REPO / "tests" / "evaluate" / "fmeval_scenarios.py"),
                "--url",
                url,
                "--data",
                str(folder),
                "--out",
                str(folder / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
            env={
                **os.environ,
                "AWS_ACCESS_KEY_ID": "x",
                "AWS_SECRET_ACCESS_KEY": "x",
                "PARALLELIZATION_FACTOR": "2",
                "RAY_DISABLE_USAGE_STATS": "1",
            },
        )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), folder / "out"


def _check(verdict, metric, slice_name):
    return next(c for c in verdict["checks"] if c["metric"] == metric and c["slice"] == slice_name)


def test_identical_answers_pass_with_every_fmeval_metric(scenarios):
    summary, _ = scenarios
    verdict = summary["identical"]
    assert verdict["records"] >= 50
    assert verdict["status"] == "pass", verdict["reasons"]
    metrics = {c["metric"] for c in verdict["checks"]}
    assert {
        "factual_knowledge",
        "factual_knowledge_quasi_exact",
        "qa_exact_match",
        "qa_quasi_exact_match",
        "qa_f1",
        "classification_accuracy_score",
        "refusal",
    } <= metrics
    assert _check(verdict, "qa_exact_match", "all")["baseline"] == 1.0  # the emulator answers from the table
    assert _check(verdict, "classification_accuracy_score", "category=sentiment")["candidate"] == 1.0


def test_candidate_three_percent_worse_on_one_slice_fails_naming_it(scenarios):
    summary, _ = scenarios
    verdict = summary["worse_slice"]
    assert verdict["status"] == "fail"
    failing = {(c["metric"], c["slice"]) for c in verdict["checks"] if c["status"] == "fail"}
    assert ("qa_exact_match", "category=multi_step") in failing
    assert all(slice_name == "category=multi_step" for _, slice_name in failing)
    assert any("category=multi_step" in reason for reason in verdict["reasons"])
    # Averaged over the whole dataset the damage is under 1 % and would have passed.
    assert abs(_check(verdict, "qa_exact_match", "all")["delta"]) < 0.01


def test_candidate_refusing_more_fails(scenarios):
    summary, _ = scenarios
    verdict = summary["refuses_more"]
    assert verdict["status"] == "fail"
    refusal = _check(verdict, "refusal", "all")
    assert refusal["status"] == "fail" and refusal["candidate"] > refusal["baseline"] == 0.0
    assert any(reason.startswith("refusal on all") for reason in verdict["reasons"])


def test_twenty_records_cannot_resolve_one_percent(scenarios):
    summary, _ = scenarios
    verdict = summary["small"]
    assert verdict["records"] == 20
    # Identical answers, yet no pass: one record moves the mean by 5 %.
    assert verdict["status"] == "unresolved" and not verdict["passed"]
    assert any(
        "cannot resolve 1.0% with 20 records" in reason and "at least 100 records are needed" in reason
        for reason in verdict["reasons"]
    )


def test_outputs_include_scores_and_a_50_record_spot_check(scenarios):
    _, out = scenarios
    folder = out / "worse_slice"
    assert json.loads((folder / "verdict.json").read_text())["status"] == "fail"
    assert len((folder / "scores.jsonl").read_text().splitlines()) == 320
    summary, *spot = [json.loads(line) for line in (folder / "spotcheck.jsonl").read_text().splitlines()]
    assert summary["kind"] == "summary" and summary["status"] == "fail"
    assert summary["read_from"][0] == "category=multi_step"  # the slice that regressed, not the hardest one
    assert len(spot) == 50
    assert spot[0]["baseline_output"] != spot[0]["candidate_output"]  # the losses come first
    assert spot[0]["slices"][0] == "category=multi_step"
    assert spot[0]["baseline_scores"]["qa_exact_match"] > spot[0]["candidate_scores"]["qa_exact_match"]
    assert "Verdict: FAIL" in (folder / "spotcheck.html").read_text()


def test_an_unknown_endpoint_is_one_line_naming_it(scenarios):
    summary, out = scenarios
    assert summary["unknown_endpoint"]["error"] == (
        "candidate endpoint 'nope': ValidationError: Endpoint nope (variant AllTraffic) not found.; check the name "
        "(endpoint, endpoint@variant or endpoint#inference-component) with `aws sagemaker describe-endpoint`"
    )
    assert not (out / "unknown_endpoint" / "verdict.json").exists()


def test_a_refused_connection_is_one_line_saying_what_to_do(scenarios):
    summary, _ = scenarios
    error = summary["connection_refused"]["error"]
    assert error.startswith("baseline endpoint 'baseline': cannot connect to http://127.0.0.1:9")
    assert "start the endpoint (or `optigate emulate`) or fix --endpoint-url" in error


def test_each_adapter_is_judged_on_its_component_and_one_losing_quality_fails(scenarios):
    summary, out = scenarios
    verdict = summary["adapters"]
    assert verdict["exit"] == 0  # --exit-zero-on-verdict: the verdict is the gate's to read
    assert verdict["status"] == "fail" and verdict["passed"] is False
    assert {name: v["status"] for name, v in verdict["adapters"].items()} == {"base": "pass", "reply": "fail"}
    assert any(r.startswith("adapter reply: qa_exact_match on category=multi_step") for r in verdict["reasons"])
    assert all(r.startswith("adapter reply: ") for r in verdict["reasons"])
    summary_line, *rows = [json.loads(line) for line in (out / "adapters" / "spotcheck.jsonl").read_text().splitlines()]
    assert [a["adapter"] for a in summary_line["adapters"]] == ["reply"]
    assert summary_line["adapters"][0]["sides"] == ["adapters-twin#twin-reply", "adapters-cand#cand-reply"]
    assert rows and {row["adapter"] for row in rows} == {"reply"}
    assert rows[0]["baseline_output"] != rows[0]["candidate_output"]  # the losses come first
