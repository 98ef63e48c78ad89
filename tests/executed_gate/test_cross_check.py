"""Reading SageMaker's managed benchmark (AIPerf's profile export) and setting it beside optigate's figures
(optigate.gate.cross_check), on a sample in AIPerf's documented export format."""

from __future__ import annotations

import copy
import io
import json
import tarfile

import pytest

from optigate.config.models import CrossCheckTolerance
from optigate.gate.cross_check import ExportError, compare, parse_profile, read_archive
from optigate.gate.decision.checks import check_dict

#: A `profile_export_aiperf.json` as AIPerf documents it: docs/tutorials/working-with-profile-exports.md
#: ("Aggregated Statistics (JSON)", "Complete File Structure") in https://github.com/ai-dynamo/aiperf: metric
#: entries keyed by tag with unit, avg, p1..p99, min, max, std; single-value metrics with avg only; the
#: benchmark status, error tracking and input_config members beside them. Figures are a 64-stream run.
SAMPLE = {
    "request_throughput": {"unit": "requests/sec", "avg": 13.16084556379392},
    "request_latency": {
        "unit": "ms",
        "avg": 6550.356151749999,
        "p1": 5523.63769363,
        "p5": 5641.17552705,
        "p10": 5649.248782399999,
        "p25": 5678.539702,
        "p50": 5799.897624499999,
        "p75": 7314.955492249999,
        "p90": 8594.209632299999,
        "p95": 8980.84214965,
        "p99": 9381.628943169999,
        "min": 4996.247445999999,
        "max": 9383.367922,
        "std": 1171.13614778278,
    },
    "time_to_first_token": {
        "unit": "ms",
        "avg": 1588.797775365,
        "p50": 787.5439584999999,
        "p90": 3695.10,
        "p95": 4051.42644575,
        "p99": 4119.33,
        "min": 382.242961,
        "max": 4121.087335,
        "std": 1189.99,
    },
    "inter_token_latency": {
        "unit": "ms",
        "avg": 51.76,
        "p50": 51.98,
        "p90": 53.18,
        "p95": 54.32,
        "p99": 55.87,
        "min": 46.81,
        "max": 56.30,
        "std": 1.23,
    },
    "output_token_throughput": {"unit": "tokens/sec", "avg": 1274.6},
    "output_token_throughput_per_user": {"unit": "tokens/sec/user", "avg": 19.3, "p50": 19.2, "p99": 21.4},
    "output_sequence_length": {"unit": "tokens", "avg": 96.85, "p50": 97.0, "min": 91.0, "max": 97.0},
    "benchmark_duration": {"unit": "sec", "avg": 15.196591969000002},
    "request_count": {"unit": "requests", "avg": 200.0},
    "total_isl": {"unit": "tokens", "avg": 110000.0},
    "total_osl": {"unit": "tokens", "avg": 19370.0},
    "was_cancelled": False,
    "start_time": "2025-10-17T20:22:08.939332",
    "end_time": "2025-10-17T20:22:24.967633",
    "error_summary": [
        {"error_details": {"code": 500, "type": "InternalServerError", "message": "Server error"}, "count": 3}
    ],
    "goodput": None,
    "good_request_count": None,
    "error_request_count": {"unit": "requests", "avg": 3.0},
    "error_isl": None,
    "input_config": {
        "endpoint": {"model_names": ["llama"], "type": "chat", "streaming": True},
        "loadgen": {"concurrency": 64, "request_count": 200},
    },
}
TOLERANCE = CrossCheckTolerance().model_dump()


def _archive(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _ours(ttft: float, itl: float, rate: float) -> dict:
    return {"p99_ttft_ms": ttft, "p99_tpot_ms": itl, "output_tokens_per_s": rate}


def test_the_documented_export_reads_as_ttft_itl_and_throughput():
    figures = parse_profile(SAMPLE)
    assert figures.ttft_p99_ms == pytest.approx(4119.33)
    assert figures.itl_p99_ms == pytest.approx(55.87)
    assert figures.output_tokens_per_s == pytest.approx(1274.6)
    assert figures.request_count == 200.0
    assert figures.error_count == 3.0


def test_latencies_in_seconds_are_read_as_milliseconds():
    profile = copy.deepcopy(SAMPLE)
    profile["time_to_first_token"] = {"unit": "sec", "p99": 4.11933}
    assert parse_profile(profile).ttft_p99_ms == pytest.approx(4119.33)


def test_an_unknown_latency_unit_is_refused_not_guessed():
    profile = copy.deepcopy(SAMPLE)
    profile["inter_token_latency"]["unit"] = "tokens"
    with pytest.raises(ExportError, match="inter_token_latency is in tokens"):
        parse_profile(profile)


def test_a_missing_metric_is_none_not_zero():
    profile = {k: v for k, v in SAMPLE.items() if k != "inter_token_latency"}
    assert parse_profile(profile).itl_p99_ms is None


def test_the_export_is_read_out_of_the_jobs_output_archive():
    archive = _archive(
        {
            "artifacts/run/profile_export.jsonl": b"{}\n",
            "artifacts/run/profile_export_aiperf.json": json.dumps(SAMPLE).encode(),
        }
    )
    assert read_archive(archive)["time_to_first_token"]["p99"] == 4119.33


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"x/search_history.json": b"{}", "x/c1/profile_export_aiperf.json": b"{}"}, "concurrency sweep"),
        ({"x/profile_export_aiperf.csv": b"a,b"}, "holds no profile_export_aiperf.json"),
        ({"profile_export_aiperf.json": b"not json"}, "is not JSON"),
    ],
)
def test_an_archive_without_one_export_is_refused_with_the_reason(members, message):
    with pytest.raises(ExportError, match=message):
        read_archive(_archive(members))


def test_bytes_that_are_no_archive_are_refused():
    with pytest.raises(ExportError, match="not a gzip tar"):
        read_archive(b"PK\x03\x04 not a tarball")


def _levels(ttft: float = 3900.0, itl: float = 54.0, rate: float = 1300.0) -> list[dict]:
    return [{"concurrency": 64, "baseline": _ours(ttft, itl, rate), "candidate": _ours(ttft, itl, rate)}]


def _job(side: str, **extra) -> dict:
    return {"concurrency": 64, "side": side, "job": f"chat-dev-xc-1234abcd-{side[0]}64", "status": "Completed", **extra}


def test_figures_within_tolerance_agree():
    result = compare(_levels(), [_job("baseline", profile=SAMPLE), _job("candidate", profile=SAMPLE)], TOLERANCE)
    assert [run["outcome"] for run in result["runs"]] == ["agrees", "agrees"]
    assert result["disagreements"] == [] and "agrees within tolerance at all 2 runs" in result["headline"]
    ttft = next(row for row in result["runs"][0]["metrics"] if row["metric"] == "ttft_p99_ms")
    assert ttft["difference"] == pytest.approx(4119.33 - 3900.0) and ttft["disagrees"] is False


def test_a_ttft_beyond_both_allowances_is_flagged_with_both_values():
    # optigate 1,000 ms, AIPerf 4,119 ms: beyond 500 ms and beyond 50 % of 1,000 ms.
    result = compare(_levels(ttft=1000.0), [_job("candidate", profile=SAMPLE)], TOLERANCE)
    assert result["runs"][0]["outcome"] == "disagrees"
    assert "DISAGREES beyond tolerance at 1 of 1 runs" in result["headline"]
    assert result["disagreements"] == [
        "concurrency 64 candidate: ttft_p99_ms optigate 1,000.0, AIPerf 4,119.3 (allowed ±500.0)"
    ]


def test_the_relative_allowance_covers_a_large_ttft():
    # 3,000 ms vs 4,119 ms: 1,119 ms apart, more than 500 ms but within 50 % of 3,000 ms.
    result = compare(_levels(ttft=3000.0), [_job("baseline", profile=SAMPLE)], TOLERANCE)
    assert result["runs"][0]["outcome"] == "agrees"


def test_a_throughput_far_off_is_flagged():
    result = compare(_levels(rate=2000.0), [_job("baseline", profile=SAMPLE)], TOLERANCE)
    flagged = [row["metric"] for row in result["runs"][0]["metrics"] if row["disagrees"]]
    assert flagged == ["output_tokens_per_s"]


def test_a_failed_job_is_unavailable_with_its_reason():
    failed = _job("candidate", status="Failed", reason="ClientError: endpoint returned 424")
    result = compare(_levels(), [_job("baseline", profile=SAMPLE), failed], TOLERANCE)
    assert [run["outcome"] for run in result["runs"]] == ["agrees", "unavailable"]
    assert result["runs"][1]["reason"] == "ClientError: endpoint returned 424"
    assert "1 of 2 runs unavailable" in result["headline"]


def test_a_stopped_job_without_a_reason_says_how_it_ended():
    result = compare(_levels(), [_job("baseline", status="Stopped")], TOLERANCE)
    assert result["runs"][0]["reason"] == "the managed job ended Stopped"
    assert result["headline"].startswith("SageMaker cross-check: unavailable (")


def test_an_unreadable_export_is_unavailable_not_an_agreement():
    broken = copy.deepcopy(SAMPLE)
    broken["time_to_first_token"]["unit"] = "furlongs"
    result = compare(_levels(), [_job("baseline", profile=broken)], TOLERANCE)
    assert result["runs"][0]["outcome"] == "unavailable" and "furlongs" in result["runs"][0]["reason"]


# --------------------------------------------------------------------------- in the verdict and the report


def _gate_inputs(candidate_ttft: float, cross_check: dict | None):
    from optigate.gate import GateInputs
    from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, synthetic_run

    return GateInputs(
        team="chat",
        environment="dev",
        change={"quantization": "fp8"},
        thresholds=THRESHOLDS,
        baseline_benchmark=bench(synthetic_run(4, seed=1)),
        candidate_benchmark=bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), ttft_ms=candidate_ttft, seed=2)),
        evaluation=PASS,
        cross_check=cross_check,
    )


def _managed(offset_ms: float = 0.0, status: str = "Completed") -> dict:
    profile = copy.deepcopy(SAMPLE)
    profile["time_to_first_token"]["p99"] += offset_ms
    jobs = [
        {"concurrency": 4, "side": side, "job": f"j-{side}", "status": status, "profile": profile}
        for side in ("baseline", "candidate")
    ]
    return {"tolerance": TOLERANCE, "jobs": jobs}


@pytest.mark.parametrize("candidate_ttft", [120.0, 900.0], ids=["approved", "rejected"])
@pytest.mark.parametrize(
    "managed",
    [_managed(), _managed(offset_ms=50_000.0), _managed(status="Failed")],
    ids=["agree", "disagree", "failed"],
)
def test_the_cross_check_never_changes_the_verdict(candidate_ttft, managed):
    """Whatever the managed benchmark says (agrees, disagrees, failed), the outcome and every check are optigate's:
    it cannot turn a failing gate into a pass, nor a passing one into a failure."""
    from optigate.gate import decide

    without = decide(_gate_inputs(candidate_ttft, None))
    assert without.outcome == ("APPROVED" if candidate_ttft < 500 else "REJECTED")
    with_it = decide(_gate_inputs(candidate_ttft, managed))
    assert with_it.outcome == without.outcome and with_it.summary == without.summary
    assert [check_dict(c) for c in with_it.checks] == [check_dict(c) for c in without.checks]
    assert with_it.cross_check is not None and without.cross_check is None


def test_the_report_shows_both_engines_side_by_side_and_flags_a_disagreement_at_the_top():
    from optigate.gate import decide, render_html, render_json

    verdict = decide(_gate_inputs(120.0, _managed(offset_ms=50_000.0)))
    page = render_html(verdict)
    headline = verdict.cross_check["headline"]
    assert "DISAGREES beyond tolerance at 2 of 2 runs" in headline
    # The headline sits right under the verdict's banner, before any section.
    assert page.index("DISAGREES beyond tolerance") < page.index("<h2>")
    section = page[page.index("Cross-check: SageMaker") :]
    assert "time_to_first_token.p99" in section and "beyond tolerance" in section
    assert json.loads(render_json(verdict))["cross_check"]["runs"][0]["outcome"] == "disagrees"
