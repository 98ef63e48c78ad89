"""The planner's expected latency (issue 18): every efficiency cites its source, the fitted ones come from the
training split only, `--compare` selects on the expected TPOT, `--json` carries it beside the bound, and a
team's own gate report calibrates it (and the plan says so)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from optigate.cli import main
from optigate.config.models import Calibration
from optigate.plan import calibration, get_instance, plan
from optigate.plan.expected import DATA, efficiency_for, literature_efficiency
from optigate.plan.instance_comparison import compare
from tests.conftest import CONFIG
from tests.fixtures.benchmark_scripts import benchmark_script
from tests.fixtures.gate_report_mutants import originals


def _benchmark():
    return benchmark_script("planner_latency_vs_published")


def test_every_efficiency_and_overhead_cites_a_source():
    table = yaml.safe_load(DATA.read_text())
    entries = table["efficiencies"] + list(table["allreduce_us"].values())
    assert len(entries) >= 5
    for entry in entries:
        assert len(str(entry["source"]).strip()) > 40, entry  # a sentence a reviewer can check, not "paper"
    fitted = [e for e in table["efficiencies"] if "fitted on the training split" in e["source"]]
    assert fitted, "the fitted figures say they come from the training split"
    urls = {case.row["source_url"] for case in _benchmark().cases() if case.counted and not case.held_out}
    assert all(any(url in e["source"] for url in urls) for e in fitted)  # and cite the rows' page


def test_the_fitted_figures_are_what_the_training_split_gives_and_the_held_out_rows_are_not_used():
    bench = _benchmark()
    found = bench.cases()
    modelled = [c for c in found if c.counted]
    held_out = [c for c in modelled if c.held_out]
    assert len(modelled) >= 15 and len(held_out) >= len(modelled) // 3  # the issue: >= 15 sourced measurements
    table = {(e["generation"], e["format"], e["engine"]): e for e in yaml.safe_load(DATA.read_text())["efficiencies"]}
    fits = bench.derive_all(found)
    assert set(fits) == {"ada", "ampere", "hopper"}
    for generation, (count, fitted) in fits.items():
        formats = [name for name in fitted if name not in ("step_overhead_ms", "allreduce_us")]
        for fmt in formats:
            entry = table[(generation, fmt, "vllm")]
            assert entry["bandwidth"] == pytest.approx(fitted[fmt], abs=0.001), (generation, fmt)
            assert entry["step_overhead_ms"] == pytest.approx(fitted["step_overhead_ms"], abs=0.01), (generation, fmt)
            assert f"training split ({count} rows)" in entry["source"], (generation, fmt)
    assert yaml.safe_load(DATA.read_text())["allreduce_us"]["nvlink"]["value"] == pytest.approx(
        fits["ampere"][1]["allreduce_us"], abs=0.1
    )
    # Fitting on the held-out rows too would give other figures: the split matters, so it is kept.
    ampere = [c for c in modelled if c.generation == "ampere"]
    training = [c for c in ampere if not c.held_out]
    assert bench.derive(ampere)["16bit"] != pytest.approx(bench.derive(training)["16bit"], abs=0.0005)


def test_the_expected_figure_is_above_the_bound_by_what_engines_lose():
    result = plan("qwen2.5-7b", "ml.p4de.24xlarge", tensor_parallel=1, max_model_len=8192, max_batch_size=1)
    efficiency = literature_efficiency(get_instance("ml.p4de.24xlarge"), "bf16", "vllm")
    assert result.expected is not None and result.expected.basis == "literature estimate"
    streaming = result.decode_tpot_ms_batch1 / efficiency.bandwidth
    assert result.expected_tpot_ms_batch1 == pytest.approx(streaming + efficiency.step_overhead_ms, rel=0.01)
    assert result.expected.ttft_ms > result.prefill_ms


def test_plan_json_carries_the_expected_tpot_beside_the_bound(capsys):
    code = main(["plan", "--model", "llama-3.1-8b", "--instance", "ml.g6.2xlarge", "--max-model-len", "8192", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["expected_tpot_ms_batch1"] > data["decode_tpot_ms_batch1"] > 0
    assert data["expected"]["basis"] == "literature estimate"


def test_compare_selects_on_the_expected_tpot_not_the_bound():
    """bf16 Llama-3.1-8B on an A10G: the bound (25 ms) is within a 30 ms target, the expected TPOT (35 ms) is not,
    so it is not chosen at any batch; selecting on the bound would have promised a 35 ms endpoint."""
    from optigate.plan.architecture import load_architecture

    candidates, cheapest = compare(
        load_architecture("llama-3.1-8b"), ["ml.g5.2xlarge"], ["bf16", "awq"], tpot_ms=30, max_model_len=8192
    )
    bf16, awq = candidates
    assert bf16.result.decode_tpot_ms_batch1 < 30 < bf16.result.expected_tpot_ms_batch1
    assert bf16.batch_within_target is None and not bf16.meets_target
    assert awq.meets_target and cheapest is awq
    assert awq.result.expected.decode_curve_ms[awq.batch_within_target] <= 30


def _report(measured: float | None, plan_info: dict | None, bound: float = 27.0) -> dict:
    return {
        "prediction_vs_measurement": {
            "decode_tpot_ms_batch1": {"predicted": bound, "measured": measured},
            "plan": plan_info,
        }
    }


PLAN = {
    "instance_type": "ml.g6.2xlarge",
    "accelerator": "L4",
    "weight_precision": "fp8",
    "engine": "vllm",
    "step_overhead_ms": 4.0,
    "allreduce_ms_per_step": 0.0,
    "basis": "literature estimate",
}


def gate_report_with(prediction: dict) -> dict:
    """A real gate report (tests/fixtures/gate_reports) with `prediction` in place of its own."""
    report = json.loads(originals()["support-approved"])
    decode = {"expected": None, "measured_as": "candidate p50 TPOT at concurrency 1", "ratio": None}
    report["prediction_vs_measurement"] = {
        **prediction,
        "decode_tpot_ms_batch1": {**decode, **prediction["decode_tpot_ms_batch1"]},
    }
    return report


def test_a_gate_report_calibrates_the_expected_figure_and_the_plan_says_so(tmp_path, capsys):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    report = tmp_path / "gate-report.json"
    report.write_text(json.dumps(gate_report_with(_report(34.0, PLAN)["prediction_vs_measurement"])))
    before = json.loads(_plan_json(config, capsys))
    code = main(["plan", str(config / "teams/chat.yaml"), "--calibrate", str(report), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    after = json.loads(out[out.index("{") :])
    assert before["expected"]["basis"] == "literature estimate"
    assert after["expected"]["basis"] == "calibrated by measurement"
    assert str(report) in after["expected"]["source"]
    # bound 27 ms / (34 - 4) = 0.9: the plan's expected TPOT is the bound at that efficiency plus the literature
    # overhead of the L4 (a calibration measures one figure, not its split)
    assert after["expected"]["bandwidth_efficiency"] == pytest.approx(0.9)
    overhead = literature_efficiency(get_instance("ml.g6.2xlarge"), "fp8", "vllm").step_overhead_ms
    assert after["expected_tpot_ms_batch1"] == pytest.approx(after["decode_tpot_ms_batch1"] / 0.9 + overhead, rel=0.01)
    assert after["decode_tpot_ms_batch1"] == before["decode_tpot_ms_batch1"]  # the bound does not move
    saved = yaml.safe_load((config / "calibration.yaml").read_text())["calibrations"]
    assert [entry["accelerator"] for entry in saved] == ["L4"]
    # The summary of the project says which figures are calibrated.
    assert main(["summary", "--config", str(config), "--env", "dev"]) == 0
    assert "calibrated by measurement" in capsys.readouterr().out


def _plan_json(config: Path, capsys) -> str:
    assert main(["plan", str(config / "teams/chat.yaml"), "--json"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("report", "why"),
    [
        (_report(34.0, None), "records no plan"),
        (_report(None, PLAN), "no TPOT measured at concurrency 1"),
        (_report(3.0, PLAN), "not above the assumed per-step overheads"),
        (_report(20.0, PLAN), "faster than the roofline allows"),
        (_report(32.0, {**PLAN, "speculative_decoding": "eagle"}), "the candidate speculates"),
    ],
)
def test_a_report_that_cannot_calibrate_is_refused_with_the_reason(report, why):
    with pytest.raises(calibration.CalibrationError, match=why):
        calibration.from_report(report, "gate-report.json")


def test_calibrate_from_the_cli_fails_in_one_line_with_exit_2(tmp_path, capsys):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    (tmp_path / "broken.json").write_text("{not json")
    assert main(["plan", str(config / "teams/chat.yaml"), "--calibrate", str(tmp_path / "broken.json")]) == 2
    err = capsys.readouterr().err
    assert "expected JSON (a gate report)" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (config / "calibration.yaml").exists()


def test_a_newer_calibration_replaces_an_older_one_of_the_same_accelerator_format_and_engine():
    old = Calibration(
        instance_type="ml.g6.2xlarge",
        accelerator="L4",
        weight_precision="fp8",
        engine="vllm",
        bandwidth_efficiency=0.5,
        measured_tpot_ms=40,
        bound_tpot_ms=27,
        source="old.json",
    )
    other = old.model_copy(update={"weight_precision": "bf16", "source": "bf16.json"})
    new = old.model_copy(update={"bandwidth_efficiency": 0.7, "source": "new.json"})
    assert [c.source for c in calibration.merged([old, other], [new])] == ["bf16.json", "new.json"]
    efficiency = efficiency_for(get_instance("ml.g6.2xlarge"), "fp8", "vllm", [old, other, new])
    assert efficiency.calibrated and efficiency.bandwidth == 0.7 and "new.json" in efficiency.source
    # Another accelerator of the same generation is not calibrated by an L4's measurement.
    assert not efficiency_for(get_instance("ml.g6e.2xlarge"), "fp8", "vllm", [new]).calibrated


def test_the_gate_report_of_a_team_calibrates_its_own_plan(example_config):
    """The gate's prediction (ResolvedServing.prediction) goes through the decision into the report; a report
    measured exactly at the expected TPOT calibrates to the literature efficiency it was predicted with."""
    from optigate.deployment import load_resolved_project
    from optigate.gate.decision.prediction import prediction_vs_measurement

    chat = load_resolved_project(example_config).teams["chat"]
    # chat's candidate speculates (a trained EAGLE head): its report is refused; a plain variant's calibrates.
    speculating = {"prediction_vs_measurement": prediction_vs_measurement(chat.candidate.prediction(), [], [])}
    with pytest.raises(calibration.CalibrationError, match="the candidate speculates"):
        calibration.from_report(speculating, "report.json")
    candidate = chat.baseline
    prediction = candidate.prediction()
    expected = prediction["expected_tpot_ms_batch1"]
    level = {"concurrency": 1, "candidate": {"p50_tpot_ms": expected, "p50_ttft_ms": 100.0}}
    report = {"prediction_vs_measurement": prediction_vs_measurement(prediction, [level], [])}
    entry = calibration.from_report(json.loads(json.dumps(report)), "s3://bucket/reports/run/verdict.json")
    literature = literature_efficiency(candidate.instance, prediction["plan"]["weight_precision"], "vllm")
    assert (entry.accelerator, entry.engine, entry.instance_type) == ("L4", "vllm", "ml.g6.2xlarge")
    assert entry.bandwidth_efficiency == pytest.approx(literature.bandwidth, rel=0.01)
