"""The bench result file's model and reader (optigate.bench.result_file): what is wrong, and where (#29)."""

from __future__ import annotations

import json
import math

import pytest

from optigate.bench.core.metrics import RunSamples
from optigate.bench.result_file import FORMAT_VERSION, MAX_RUN_SPAN_S, BenchResultFile, ResultFileError, parse_result
from optigate.cli import main
from tests.fixtures.bench_result_mutants import RESULTS


@pytest.fixture
def result() -> dict:
    return json.loads((RESULTS / "baseline.json").read_text())


def _refusal(data: dict) -> ResultFileError:
    with pytest.raises(ResultFileError) as caught:
        parse_result(json.dumps(data, allow_nan=True), "r.json")
    return caught.value


def test_a_real_result_is_read_as_written(result):
    assert result["format_version"] == FORMAT_VERSION
    assert parse_result(json.dumps(result), "r.json") == result


def test_the_writer_s_runs_follow_the_model():
    """What RunSamples.to_result writes (every field, adapters too) validates against the model."""
    run = RunSamples(2, ttft_ms=[1.0], tpot_ms=[2.0], completions=[(10.0, 3)], intervals=[(9.0, 10.0, True)])
    run.by_adapter = {"a": RunSamples(2, ttft_ms=[1.0])}
    data = {"target": {}, "load": {}, "finished_at": 11.0, "interrupted": False, "runs": [run.to_result()]}
    parsed = BenchResultFile.model_validate_json(json.dumps(data))
    assert parsed.runs[0].adapters is not None and parsed.runs[0].samples.completions == [(10.0, 3)]


def test_an_element_of_the_wrong_shape_is_named_with_its_shape(result):
    result["runs"][0]["samples"]["intervals"][3] = {}
    error = _refusal(result)
    assert str(error) == "r.json: runs[0].samples.intervals[3]: expected [sent_s, ended_s, measured], found {}"
    assert (error.file, error.location) == ("r.json", "runs[0].samples.intervals[3]")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_measured_value_is_refused(result, value):
    result["runs"][1]["samples"]["ttft_ms"][0] = value
    error = _refusal(result)
    assert error.location == "runs[1].samples.ttft_ms[0]" and error.expected == "a finite number"


def test_a_string_for_a_number_and_a_boolean_for_a_count_are_refused(result):
    result["runs"][0]["samples"]["e2e_ms"][2] = "45.1"
    assert str(_refusal(result)).endswith('runs[0].samples.e2e_ms[2]: expected a number, found "45.1"')
    result["runs"][0]["samples"]["e2e_ms"][2] = 45.1
    result["runs"][0]["samples"]["itl_counts"][0] = True
    assert _refusal(result).location == "runs[0].samples.itl_counts[0]"


def test_a_missing_key_and_an_empty_list_of_runs_are_named(result):
    del result["runs"][0]["samples"]["finishes"]
    assert str(_refusal(result)) == (
        "r.json: runs[0].samples.finishes: expected this key, found nothing (the key is missing)"
    )
    result["runs"] = []
    assert _refusal(result).location == "runs"


def test_a_file_cut_short_is_refused_as_not_json(result):
    text = json.dumps(result)
    cut = r"^r\.json: expected JSON, found .* \(line 1 column 101: cut short or edited\?\)$"
    with pytest.raises(ResultFileError, match=cut):
        parse_result(text[:100], "r.json")


def test_a_time_far_from_the_run_s_others_is_refused(result):
    """One-second throughput buckets span a run's times: a time years off would ask for billions of them."""
    result["runs"][0]["samples"]["token_arrivals"][5][0] -= 10 * MAX_RUN_SPAN_S
    assert _refusal(result).location == "runs[0].samples.token_arrivals[5]"


def test_a_level_twice_and_an_adapter_at_another_level_are_refused(result):
    result["runs"][1]["concurrency"] = result["runs"][0]["concurrency"]
    assert _refusal(result).expected == "a level no other run has (runs[0] has it)"
    result["runs"][1]["concurrency"] = 2
    result["runs"][1]["adapters"] = {"a": {**result["runs"][0]}}
    assert _refusal(result).location == "runs[1].adapters.a.concurrency"


def test_a_file_without_a_version_is_read_and_a_newer_one_refused_naming_both(result):
    del result["format_version"]
    assert parse_result(json.dumps(result), "r.json") == result  # written before versioning, same layout
    result["format_version"] = FORMAT_VERSION + 1
    error = _refusal(result)
    assert error.location == "format_version" and f"format version {FORMAT_VERSION + 1}" in error.found
    assert f"reads version {FORMAT_VERSION}" in error.found
    for wrong in ("1", True, 1.0, 0):
        result["format_version"] = wrong
        assert _refusal(result).found == json.dumps(wrong)


def test_bench_compare_refuses_a_broken_file_in_one_line_with_exit_2(result, tmp_path, capsys):
    result["runs"][0]["samples"]["completions"][3] = {}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(result))
    assert main(["bench", "compare", str(broken), str(RESULTS / "candidate.json")]) == 2
    message = capsys.readouterr().err.strip()
    assert message == (
        f"✗ baseline {broken}: runs[0].samples.completions[3]: expected [completed_s, output_tokens], found {{}}; "
        "give a file that `optigate bench --json` wrote (or benchmark again)"
    )


def test_a_run_without_summary_figures_gets_them_from_its_samples(result):
    """No verdict reads the summary figures; a hand-made file without them is read, and they are computed as the
    writer computes them (so a report of it has them)."""
    written = result["runs"][0]
    stripped = {key: written[key] for key in ("concurrency", "errors", "samples")}
    result["runs"][0] = stripped
    read = parse_result(json.dumps(result), "r.json")["runs"][0]
    assert read["ttft_ms"] == written["ttft_ms"] and read["requests"] == written["requests"]
    assert read["output_tokens_per_s"] == pytest.approx(written["output_tokens_per_s"])


def test_the_committed_json_schema_is_the_model_s():
    from optigate.bench.result_file import RESULT_SCHEMA_NAME, render_result_schema
    from tests.conftest import REPO

    committed = (REPO / "docs" / RESULT_SCHEMA_NAME).read_text()
    assert committed == render_result_schema(), "run `optigate schema --docs docs` and commit docs/"
    assert json.loads(committed)["properties"]["format_version"]["anyOf"][0] == {"const": 1, "type": "integer"}
