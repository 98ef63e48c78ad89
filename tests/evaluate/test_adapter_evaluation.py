"""Quality per adapter: each adapter's component judged on its own records, one adapter that loses quality rejects
the candidate and its spot check names it, an adapter without records is never a pass, and a malformed adapters
spec is one line with exit 2. No fmeval: the endpoints are answer tables scored with `scoring` (test_fail_closed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from optigate.config.models import EvaluationGate
from optigate.evaluate import job
from optigate.evaluate.adapter_verdicts import overall
from optigate.evaluate.quality_verdict import compare
from tests.fixtures.answer_tables import AnswerTable, score_with_tables

ADAPTERS = ("base", "reply", "triage")


class ComponentTable(AnswerTable):
    """An answer table standing for `endpoint#component` (named as the job names a SageMaker runner's side)."""

    def __init__(self, spec: str, answers: dict[str, str]):
        super().__init__(answers)
        name, component = spec.split("#")
        self.endpoint = SimpleNamespace(endpoint_name=name, target_variant=None, inference_component=component)


def _dataset(folder: Path, adapter: str, n: int = 200) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{adapter}.jsonl"
    lines = [
        json.dumps({"id": f"{adapter}-{i:03d}", "model_input": f"{adapter} question {i}?", "target_output": f"a{i}"})
        for i in range(n)
    ]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _tables(datasets: dict[str, Path], loses: dict[str, int]) -> dict[str, ComponentTable]:
    """Answer tables by `endpoint#component`: every baseline component right; a candidate's adapter wrong on
    its first `loses[adapter]` records."""
    tables: dict[str, AnswerTable] = {}
    for adapter, path in datasets.items():
        ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
        right = {rid: f"a{int(rid.rsplit('-', 1)[1])}" for rid in ids}
        lost = set(ids[: loses.get(adapter, 0)])
        twin, cand = f"twin#twin-{adapter}", f"cand#cand-{adapter}"
        tables[twin] = ComponentTable(twin, right)
        tables[cand] = ComponentTable(cand, {rid: ("wrong" if rid in lost else a) for rid, a in right.items()})
    return tables


def _main(monkeypatch, capsys, tables: dict[str, AnswerTable], arguments: list[str]) -> tuple[int, str, str]:
    """`job.main` with each `endpoint#component` answered from its table (no SageMaker, no fmeval)."""
    monkeypatch.setattr(job, "_runner", lambda args, spec: tables[spec])
    monkeypatch.setattr(job, "score_model", score_with_tables)
    code = job.main(arguments)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _adapter_arguments(datasets: dict[str, Path], out: Path, default: Path) -> list[str]:
    arguments = ["--dataset", str(default), "--baseline", "twin", "--candidate", "cand", "--out", str(out)]
    for adapter, path in datasets.items():
        arguments += ["--adapter", adapter, f"twin-{adapter}", f"cand-{adapter}"]
        if path != default:
            arguments.append(str(path))
    return arguments


def test_one_adapter_that_loses_quality_fails_the_whole_and_its_spot_check_names_it(tmp_path, monkeypatch, capsys):
    datasets = {adapter: _dataset(tmp_path / "data", adapter) for adapter in ADAPTERS}
    tables = _tables(datasets, loses={"reply": 10})
    out = tmp_path / "out"
    code, stdout, err = _main(monkeypatch, capsys, tables, _adapter_arguments(datasets, out, datasets["base"]))
    assert (code, err) == (1, "")
    assert stdout.startswith("FAIL: 3 adapters, 600 records; adapter reply: ")
    written = json.loads((out / "verdict.json").read_text())
    assert written["status"] == "fail" and written["passed"] is False and written["records"] == 600
    assert {name: v["status"] for name, v in written["adapters"].items()} == {
        "base": "pass",
        "reply": "fail",
        "triage": "pass",
    }
    assert written["reasons"] and all(r.startswith("adapter reply: ") for r in written["reasons"])
    assert "adapter reply: qa_exact_match on all: drops by 5.0% (tolerance 1.0%)" in written["reasons"]
    assert {c["adapter"] for c in written["checks"]} == set(ADAPTERS)
    assert written["adapters"]["reply"]["records"] == 200
    # Each adapter's own files, as a single evaluation writes them.
    assert json.loads((out / "adapters" / "triage" / "verdict.json").read_text())["status"] == "pass"
    assert (out / "adapters" / "reply" / "scores.jsonl").read_text().count("\n") == 200
    # The spot check: the failing adapter's worst records, each naming the adapter, the ten lost first.
    lines = [json.loads(line) for line in (out / "spotcheck.jsonl").read_text().splitlines()]
    summary, rows = lines[0], lines[1:]
    assert summary["status"] == "fail" and [a["adapter"] for a in summary["adapters"]] == ["reply"]
    assert {row["adapter"] for row in rows} == {"reply"} and len(rows) == 50
    assert [row["id"] for row in rows[:10]] == [f"reply-{i:03d}" for i in range(10)]
    assert summary["adapters"][0]["sides"] == ["twin#twin-reply", "cand#cand-reply"]
    page = (out / "spotcheck.html").read_text()
    assert page.index("Verdict: FAIL") < page.index("Adapter reply: FAIL") < page.index("<td>reply-000</td>")
    assert "Adapter triage" not in page and "Spot check of adapter reply" in page


def test_an_adapter_with_no_records_is_unresolved_never_a_pass(tmp_path, monkeypatch, capsys):
    datasets = {adapter: _dataset(tmp_path / "data", adapter) for adapter in ADAPTERS}
    datasets["triage"] = _dataset(tmp_path / "data", "triage", n=0)
    tables = _tables(datasets, loses={})
    out = tmp_path / "out"
    code, stdout, _ = _main(monkeypatch, capsys, tables, _adapter_arguments(datasets, out, datasets["base"]))
    assert code == 3, stdout
    written = json.loads((out / "verdict.json").read_text())
    assert written["status"] == "unresolved" and written["passed"] is False
    assert written["reasons"] == ["adapter triage: no records: cannot resolve 1.0%; at least 100 records are needed"]
    assert written["adapters"]["triage"]["records"] == 0
    assert written["adapters"]["base"]["status"] == written["adapters"]["reply"]["status"] == "pass"
    # --exit-zero-on-verdict (the Processing job's way): exit 0, the verdict file still unresolved.
    code, _, _ = _main(monkeypatch, capsys, tables, [*_adapter_arguments(datasets, out, datasets["base"]),
                                                     "--exit-zero-on-verdict"])  # fmt: skip
    assert code == 0 and json.loads((out / "verdict.json").read_text())["status"] == "unresolved"


def test_every_adapter_within_tolerance_passes_and_shares_the_default_dataset(tmp_path, monkeypatch, capsys):
    shared = _dataset(tmp_path / "data", "base")
    datasets = {"base": shared, "reply": _dataset(tmp_path / "data", "reply")}
    tables = _tables(datasets, loses={})
    tables["twin#twin-triage"], tables["cand#cand-triage"] = tables["twin#twin-base"], tables["cand#cand-base"]
    arguments = [*_adapter_arguments(datasets, tmp_path / "out", shared), "--adapter", "triage", "twin-triage",
                 "cand-triage"]  # fmt: skip
    code, stdout, _ = _main(monkeypatch, capsys, tables, arguments)
    assert code == 0, stdout
    written = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert written["status"] == "pass" and written["reasons"] == [] and written["adapters"]["triage"]["records"] == 200


def test_the_overall_verdict_is_never_a_pass_with_an_adapter_missing_or_none():
    records = [{"id": str(i), "category": "", "prompt_tokens": 1} for i in range(200)]
    scores = [{"qa_exact_match": 1.0}] * 200
    passed = compare(records, scores, scores)
    assert passed.status == "pass"
    missing = overall({"base": passed}, ["base", "reply"])
    assert missing.status == "unresolved" and missing.reasons == [
        "adapter reply: no verdict: the adapter was not evaluated"
    ]
    assert overall({}, []).status == "unresolved"
    failed = compare(records, scores, [{"qa_exact_match": 0.0}] * 200)
    both = overall({"base": passed, "reply": failed}, ["base", "reply", "triage"])
    assert both.status == "fail" and all(r.startswith("adapter reply: ") for r in both.reasons)
    assert both.warnings == ["adapter triage: no verdict: the adapter was not evaluated"]
    assert overall({"base": passed}, ["base"]).status == "pass"


EXPECTED = "NAME BASELINE_COMPONENT CANDIDATE_COMPONENT [DATASET]"
NOT_A_COMPONENT = "BASELINE_COMPONENT 'twin_reply' is not an inference component name"


@pytest.mark.parametrize(
    "adapter, message",
    [
        (
            ["reply", "twin-reply"],
            "--adapter reply twin-reply: expected NAME BASELINE_COMPONENT CANDIDATE_COMPONENT [DATASET], got 2 values",
        ),
        (
            ["reply", "twin_reply", "cand-reply"],
            "--adapter reply twin_reply cand-reply: BASELINE_COMPONENT 'twin_reply' is not an inference component name",
        ),
        (["base", "twin-b", "cand-b"], "--adapter base twin-b cand-b: adapter 'base' is listed twice"),
        (["../up", "twin-b", "cand-b"], "--adapter ../up twin-b cand-b: NAME '../up' is not an adapter name"),
        (["reply", "twin-r", "cand-r", "/nonexistent/reply.jsonl"], "/nonexistent/reply.jsonl: no such file"),
    ],
    ids=["too-few", "bad-component", "twice", "path-as-name", "no-dataset"],
)
def test_a_malformed_adapters_spec_is_one_line_with_exit_2(tmp_path, monkeypatch, capsys, adapter, message):
    base = _dataset(tmp_path / "data", "base")
    arguments = [*_adapter_arguments({"base": base}, tmp_path / "out", base), "--adapter", *adapter]
    code, out, err = _main(monkeypatch, capsys, {}, arguments)
    assert (code, out) == (2, "") and err.startswith(f"error: {message}"), err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_with_adapters_the_sides_name_endpoints_only(tmp_path, monkeypatch, capsys):
    base = _dataset(tmp_path / "data", "base")
    arguments = ["--dataset", str(base), "--baseline", "twin#c", "--candidate", "cand", "--out", str(tmp_path / "o"),
                 "--adapter", "base", "twin-base", "cand-base"]  # fmt: skip
    code, _, err = _main(monkeypatch, capsys, {}, arguments)
    assert code == 2 and err == (
        "error: --baseline twin#c: with --adapter it names the endpoint only; each adapter names its components\n"
    )


def test_without_adapters_verdict_json_has_no_adapters_key(tmp_path):
    datasets = {"base": _dataset(tmp_path / "data", "base")}
    tables = _tables(datasets, loses={})
    records = job.load_dataset(datasets["base"])
    job.evaluate(records, tables["twin#twin-base"], tables["cand#cand-base"], EvaluationGate(), tmp_path / "o",
                 score=score_with_tables)  # fmt: skip
    written = json.loads((tmp_path / "o" / "verdict.json").read_text())
    assert "adapters" not in written and written["status"] == "pass"
    summary = json.loads((tmp_path / "o" / "spotcheck.jsonl").read_text().splitlines()[0])
    assert "adapter" not in summary
