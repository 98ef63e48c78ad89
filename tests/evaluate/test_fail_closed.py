"""The evaluation fails closed: no records is never a pass, bad input is one line with exit 2, `0` and
`""` are references, and the spot check reads the slices that regressed. No fmeval here: the job's
dataset, verdict and output logic run in the main environment with a scorer built from `scoring`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from optigate.config.models import EvaluationGate
from optigate.evaluate import job, scoring, spotcheck
from optigate.evaluate.dataset import load_dataset
from optigate.evaluate.input_errors import InputError
from optigate.evaluate.quality_verdict import compare
from tests.conftest import REPO
from tests.fixtures.answer_tables import AnswerTable, score_with_tables


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _arguments(dataset: Path, out: Path) -> list[str]:
    return ["--dataset", str(dataset), "--baseline", "b", "--candidate", "c", "--out", str(out)]


def _run_job(tmp_path: Path, dataset: Path, capsys) -> tuple[int, str, str]:
    code = job.main(_arguments(dataset, tmp_path / "out"))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- no records


@pytest.mark.parametrize("content", ["", "\n\n   \n\t\n"], ids=["empty", "blank-lines"])
def test_a_dataset_without_records_cannot_resolve_and_exits_3(tmp_path, capsys, content):
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(content)
    code, out, err = _run_job(tmp_path, dataset, capsys)
    assert code == 3, (out, err)
    assert out.startswith("UNRESOLVED: 0 records; no records: cannot resolve 1.0%")
    written = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert written["status"] == "unresolved" and written["passed"] is False and written["records"] == 0
    assert written["reasons"] == ["no records: cannot resolve 1.0%; at least 100 records are needed"]
    summary = json.loads((tmp_path / "out" / "spotcheck.jsonl").read_text().splitlines()[0])
    assert summary["kind"] == "summary" and summary["status"] == "unresolved"


def test_exit_zero_on_verdict_still_writes_unresolved_for_no_records(tmp_path, capsys):
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("")
    assert job.main([*_arguments(dataset, tmp_path / "out"), "--exit-zero-on-verdict"]) == 0
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["status"] == "unresolved"
    assert capsys.readouterr().out.startswith("UNRESOLVED: 0 records")


def test_zero_records_compare_to_unresolved_not_pass():
    verdict = compare([], [], [])
    assert verdict.status == "unresolved" and not verdict.passed and verdict.checks == []


def test_records_without_any_score_are_unresolved():
    records = [{"id": str(i), "category": "", "prompt_tokens": 1} for i in range(200)]
    verdict = compare(records, [{}] * 200, [{}] * 200)
    assert verdict.status == "unresolved"
    assert verdict.reasons[0].startswith("no scored records (200 in the dataset): cannot resolve 1.0%")


def test_one_identical_record_cannot_resolve():
    records = [{"id": "0", "category": "", "prompt_tokens": 1}]
    scores = [{"qa_exact_match": 1.0, "refusal": 0.0}]
    verdict = compare(records, scores, scores)
    assert verdict.status == "unresolved"
    assert "cannot resolve 1.0% with 1 records" in verdict.reasons[0]


# --------------------------------------------------------------------------- bad input: one line, exit 2

GOOD = '{"model_input": "2+2?", "target_output": "4"}'


@pytest.mark.parametrize(
    "lines, line, message",
    [
        ([GOOD, '{"model_input": "3+3?", "target_output": "6"'], 2, "not valid JSON (Expecting ',' delimiter"),
        ([GOOD, "", "not json at all"], 3, "not valid JSON (Expecting value at column 1)"),
        (['["2+2?", "4"]'], 1, "expected a JSON object per line, found an array"),
        ([GOOD, '"just a string"'], 2, "expected a JSON object per line, found a string"),
        ([GOOD, '{"model_input": "3+3?"}'], 2, "missing target_output (or answer)"),
        (['{"target_output": "4"}'], 1, "missing model_input (or prompt/question)"),
        (['{"category": "x"}'], 1, "missing model_input (or prompt/question) and target_output (or answer)"),
        (['{"model_input": "3+3?", "target_output": null}'], 1, "missing target_output (or answer)"),
        (['{"model_input": "q", "answer": {"a": 1}}'], 1, "answer must be a string, a number or a list of them"),
        (['{"model_input": "q", "answer": []}'], 1, "answer as a list must hold one or more strings or numbers"),
        (['{"model_input": ["q"], "answer": "a"}'], 1, "model_input must be text, found an array"),
        (['{"model_input": "q", "answer": "a", "task": "summarize"}'], 1, "task must be one of qa, classification"),
        (['{"model_input": "q", "answer": "a", "prompt_tokens": "many"}'], 1, "prompt_tokens must be a whole number"),
        (['{"id": 7, "prompt": "q", "answer": "a"}', '{"id": "7", "prompt": "r", "answer": "b"}'], 2, "id '7' already"),
    ],
)
def test_a_malformed_dataset_is_one_line_naming_file_and_line_with_exit_2(tmp_path, capsys, lines, line, message):
    dataset = _write(tmp_path / "data.jsonl", lines)
    code, out, err = _run_job(tmp_path, dataset, capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {dataset}:{line}: {message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # no verdict from a dataset that could not be read


def test_a_missing_dataset_file_is_an_input_error(tmp_path, capsys):
    code, _, err = _run_job(tmp_path, tmp_path / "absent.jsonl", capsys)
    assert code == 2 and err == f"error: {tmp_path / 'absent.jsonl'}: no such file\n"


def test_a_folder_must_hold_exactly_one_dataset(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        _write(tmp_path / name, [GOOD])
    with pytest.raises(InputError, match=r"expected exactly one \.jsonl file in the folder, found 2"):
        load_dataset(tmp_path)


@pytest.mark.slow
def test_the_command_line_reports_bad_input_and_no_records_by_exit_code(tmp_path):
    """`optigate evaluate` itself (re-run in the evaluation environment when fmeval is elsewhere)."""
    bad = _write(tmp_path / "bad.jsonl", [GOOD, "[1, 2]"])
    empty = _write(tmp_path / "empty.jsonl", [""])
    results = {
        name: subprocess.run(
            [sys.executable, "-m", "optigate.cli", "evaluate", *_arguments(path, tmp_path / name)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=900,
        )
        for name, path in (("bad", bad), ("empty", empty))
    }
    assert results["bad"].returncode == 2, results["bad"].stderr
    assert results["bad"].stderr == f"error: {bad}:2: expected a JSON object per line, found an array\n"
    assert results["empty"].returncode == 3, results["empty"].stderr
    assert "cannot resolve" in results["empty"].stdout and "Traceback" not in results["empty"].stderr


def test_thresholds_out_of_range_are_an_input_error(tmp_path, capsys):
    dataset = _write(tmp_path / "data.jsonl", [GOOD])
    code = job.main([*_arguments(dataset, tmp_path / "o"), "--max-metric-drop-abs", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --max-metric-drop-abs: ") and err.count("\n") == 1


# --------------------------------------------------------------------------- endpoints


def test_a_refused_connection_names_the_side_and_what_to_do(tmp_path):
    def refused(runner, records):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/endpoints/c/invocations")

    records = [{"id": "1", "model_input": "q", "target_output": "a", "category": "", "prompt_tokens": 1}]
    with pytest.raises(InputError) as raised:
        job.evaluate(records, "chat-prod", "chat-prod-candidate", EvaluationGate(), tmp_path, score=refused)
    assert str(raised.value).startswith(
        "baseline endpoint 'chat-prod': cannot connect to http://127.0.0.1:9/endpoints/c/invocations "
        "(connection refused or unreachable); start the endpoint"
    )
    assert not (tmp_path / "verdict.json").exists()


def test_an_unknown_endpoint_names_the_side_and_how_to_check_it(tmp_path):
    table = AnswerTable({"1": "a"})

    def unknown_candidate(runner, records):
        if runner is table:
            return score_with_tables(runner, records)
        raise ClientError(
            {"Error": {"Code": "ValidationError", "Message": "Endpoint nope of account 1 not found."}}, "InvokeEndpoint"
        )

    records = [{"id": "1", "model_input": "q", "target_output": "a", "category": "", "prompt_tokens": 1}]
    with pytest.raises(InputError) as raised:
        job.evaluate(records, table, "nope", EvaluationGate(), tmp_path, score=unknown_candidate)
    assert str(raised.value) == (
        "candidate endpoint 'nope': ValidationError: Endpoint nope of account 1 not found.; check the name "
        "(endpoint, endpoint@variant or endpoint#inference-component) with `aws sagemaker describe-endpoint`"
    )


# --------------------------------------------------------------------------- 0 and "" as references


def test_zero_and_empty_references_are_read_as_references(tmp_path):
    dataset = _write(
        tmp_path / "data.jsonl",
        [
            '{"id": "zero", "model_input": "3-3?", "target_output": 0}',
            '{"id": "empty", "prompt": "Say nothing.", "answer": ""}',
            '{"id": "alternatives", "question": "Zero?", "answer": [0, "zero", "none"]}',
        ],
    )
    records = {r["id"]: r for r in load_dataset(dataset)}
    assert records["zero"]["target_output"] == "0" and records["zero"]["line"] == 1
    assert records["empty"]["target_output"] == "" and records["empty"]["model_input"] == "Say nothing."
    assert records["alternatives"]["target_output"] == "0<OR>zero<OR>none"


@pytest.mark.parametrize(
    "output, target, expected",
    [("0", "0", 1.0), ("1", "0", 0.0), ("", "", 1.0), ("something", "", 0.0), ("", "0", 0.0)],
)
def test_zero_and_empty_references_are_scored(output, target, expected):
    assert scoring.exact_match(output, target) == expected
    assert scoring.quasi_exact_match(output, target) == expected
    assert scoring.f1(output, target) == expected


def test_a_candidate_that_misses_zero_references_fails(tmp_path):
    lines = [json.dumps({"id": str(i), "model_input": f"{i}-{i}?", "target_output": 0}) for i in range(200)]
    records = load_dataset(_write(tmp_path / "data.jsonl", lines))
    right = AnswerTable({r["id"]: "0" for r in records})
    wrong = AnswerTable({r["id"]: ("1" if int(r["id"]) < 10 else "0") for r in records})
    verdict = job.evaluate(records, right, wrong, EvaluationGate(), tmp_path / "out", score=score_with_tables)
    check = next(c for c in verdict.checks if c.name == "qa_exact_match" and c.slice == "all")
    assert (check.baseline, check.candidate) == (1.0, pytest.approx(0.95))
    assert verdict.status == "fail"
    same = job.evaluate(records, right, right, EvaluationGate(), tmp_path / "same", score=score_with_tables)
    assert same.status == "pass"


# --------------------------------------------------------------------------- the spot check


def _geography_regresses():
    """Geography (easy, 60 records) loses 6 answers; arithmetic (hard, 60) is low on both sides and
    disagrees a lot, but its mean does not move: 12 records better, 12 worse."""
    records, base, cand = [], {}, {}
    for i in range(60):
        rid = f"geo-{i:02d}"
        records.append({"id": rid, "category": "geography", "model_input": f"Capital {i}?", "target_output": "Paris"})
        base[rid], cand[rid] = "Paris", ("Lyon" if i < 6 else "Paris")
    for i in range(60):
        rid = f"math-{i:02d}"
        records.append({"id": rid, "category": "arithmetic", "model_input": f"{i}*17?", "target_output": str(i * 17)})
        right = str(i * 17)
        base[rid] = right if i < 12 else "?"
        cand[rid] = right if 12 <= i < 24 else "?"
    records[0]["target_output"] = "Paris<OR>City of Light"
    for record in records:
        record["prompt_tokens"] = 10
    return records, AnswerTable(base), AnswerTable(cand)


def test_the_spot_check_reads_the_slice_that_regressed_not_the_lowest_scoring(tmp_path):
    records, baseline, candidate = _geography_regresses()
    verdict = job.evaluate(records, baseline, candidate, EvaluationGate(), tmp_path, score=score_with_tables)
    assert verdict.status == "fail" and any("category=geography" in r for r in verdict.reasons)
    lines = [json.loads(line) for line in (tmp_path / "spotcheck.jsonl").read_text().splitlines()]
    summary, rows = lines[0], lines[1:]
    assert summary["kind"] == "summary" and summary["status"] == "fail" and summary["reasons"] == verdict.reasons
    assert summary["read_from"] == ["category=geography"]
    by_slice = {s["slice"]: s for s in summary["slices"]}
    assert by_slice["category=geography"]["status"] == "fail"
    assert by_slice["category=geography"]["regression"] == pytest.approx(0.1)
    assert by_slice["category=arithmetic"]["regression"] == pytest.approx(0.0)
    assert by_slice["category=arithmetic"]["baseline"] == by_slice["category=arithmetic"]["candidate"] == 0.2
    assert [s["slice"] for s in summary["slices"]][:2] == ["all", "category=geography"]
    # Every row is geography, and the six lost answers come first.
    assert {row["slices"][0] for row in rows} == {"category=geography"} and len(rows) == 50
    assert [row["id"] for row in rows[:6]] == [f"geo-{i:02d}" for i in range(6)]
    assert rows[0]["answers"] == ["Paris", "City of Light"]


def test_the_spot_check_page_starts_with_the_verdict_and_lists_alternatives(tmp_path):
    records, baseline, candidate = _geography_regresses()
    job.evaluate(records, baseline, candidate, EvaluationGate(), tmp_path, score=score_with_tables)
    page = (tmp_path / "spotcheck.html").read_text()
    assert page.index("Verdict: FAIL") < page.index("Scores per slice") < page.index("<td>geo-00</td>")
    # Both sides named and the number of records scored, right under the verdict.
    assert page.index("Verdict: FAIL") < page.index("records scored on each side") < page.index("Scores per slice")
    assert f"{len(records)} records scored on each side" in page
    assert "qa_exact_match on category=geography: drops by 10.0%" in page
    assert "<ul><li>Paris</li><li>City of Light</li></ul>" in page
    assert "&lt;OR&gt;" not in page and "[&#x27;" not in page


def test_with_no_regressed_slice_the_spot_check_reads_the_whole_dataset():
    records, baseline, _ = _geography_regresses()
    rows = score_with_tables(baseline, records)
    scores = [job.scores_of(rows[r["id"]]) for r in records]
    outputs = [rows[r["id"]]["model_output"] for r in records]
    verdict = compare(records, scores, scores)
    spot = spotcheck.select(records, scores, scores, outputs, outputs, EvaluationGate(), verdict, size=5)
    assert spot.read_from == ["all"] and len(spot.rows) == 5
