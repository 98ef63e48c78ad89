"""`optigate advise` (issue 17, part 3): each step of the sequence fires on a team built for it and stays quiet on
its twin; every offered block passes the rules `optigate validate` applies, and its effect is the re-plan of the
merged serving block; `--from-report` reads the verdict the gate's decision wrote."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from optigate.advise import admit, advise
from optigate.advise.admission import GATE, with_candidate
from optigate.advise.findings import DONE, NOT_NOW, PROVING, RECOMMENDED, TRIED
from optigate.cli import main
from optigate.config.models import serving_with
from optigate.deployment import load_resolved_team, resolve_serving, resolve_team
from optigate.plan.catalog import get_instance
from tests.fixtures.config_files import minimal_team

DATASET = "s3://acme-eval/demo/"


def gate_tail(concurrency=(1, 16, 64), prompt=1024, output=256, dataset=True, extra: str = "") -> str:
    evaluation = f"  evaluation:\n    dataset_s3_uri: {DATASET}\n" if dataset else ""
    return (
        "gate:\n  benchmark:\n"
        f"    concurrency: {list(concurrency)}\n    prompt_tokens: {prompt}\n    max_new_tokens: {output}\n"
        + textwrap.indent(textwrap.dedent(extra), "    ")
        + evaluation
    )


def team(tmp_path: Path, arch="llama-3.1-8b", instance="ml.g6.2xlarge", serving="", **tail):
    return load_resolved_team(minimal_team(tmp_path, arch, instance, serving, gate_tail(**tail)))


def finding(resolved, step: int, **kwargs):
    return advise(resolved, **kwargs).findings[step - 1]


def assert_pastes(resolved, found) -> None:
    """The block, pasted where the finding says, passes every rule and resolves."""
    pasted = yaml.safe_load(found.candidate_yaml)
    block = pasted["gate"]["candidate"] if found.target == GATE else pasted["serving"]
    assert block == found.candidate
    admission = admit(resolved.team, block)
    assert admission.admitted and admission.refusals == (), admission.refusals


# --------------------------------------------------------------------------- 1. container settings


def test_a_max_model_len_far_above_the_benchmarked_request_is_lowered_first(tmp_path):
    resolved = team(tmp_path, serving="quantization: fp8\nmax_model_len: 32768\nmax_batch_size: 64\n")
    advice = advise(resolved)
    found = advice.findings[0]
    assert found.status == RECOMMENDED and advice.next is found
    # The evaluation's long-context prompts (4,096 by default) + 256 output, to a power of two.
    assert found.candidate == {"max_model_len": 8192}
    assert "max_model_len 32,768 is 8x the 4,352 tokens of the long-context evaluation's prompts" in found.why
    # Lowered because the cache cannot hold the 64 sequences run at once at 32,768 tokens, not for the ratio alone.
    assert re.search(r"the cache holds only \d+ sequences of that length for the 64 you run at once", found.why)
    figures = {f.key: f for f in found.effect}
    # vLLM pages the cache: the capacity stays, the sequences of max length it holds grow 4x.
    assert figures["kv_capacity_tokens"].before == figures["kv_capacity_tokens"].after
    assert figures["sequences_at_max_model_len"].after >= 3 * figures["sequences_at_max_model_len"].before
    assert_pastes(resolved, found)


def test_a_length_the_long_context_evaluation_needs_is_kept(tmp_path):
    team_file = minimal_team(
        tmp_path,
        "llama-3.1-8b",
        "ml.g6.2xlarge",
        "quantization: fp8\nmax_model_len: 32768\nmax_batch_size: 64\n",
        gate_tail() + "    long_context_prompt_tokens: 16384\n",
    )
    resolved = load_resolved_team(team_file)
    found = finding(resolved, 1)
    assert found.status == DONE and found.candidate is None
    assert "covers the 16,640 tokens of the long-context evaluation's prompts (over 16,384 tokens)" in found.why


def test_a_batch_below_the_benchmarked_concurrency_is_raised_when_the_cache_holds_it(tmp_path):
    serving = "quantization: fp8\nmax_model_len: 4096\nmax_batch_size: 4\n"
    resolved = team(tmp_path, serving=serving, concurrency=(1, 16))
    found = finding(resolved, 1)
    assert found.status == RECOMMENDED and found.candidate == {"max_batch_size": 16}
    assert "max_batch_size 4 queues requests at the concurrency 16" in found.why
    assert_pastes(resolved, found)
    # Its twin: the batch covers the concurrency, nothing to change.
    twin = team(tmp_path, serving="quantization: fp8\nmax_model_len: 4096\nmax_batch_size: 16\n", concurrency=(1, 16))
    assert finding(twin, 1).status == DONE


# --------------------------------------------------------------------------- 2. quantize


def test_fp8_where_the_gpu_has_fp8_tensor_cores(tmp_path):
    resolved = team(tmp_path, serving="max_model_len: 4096\n")
    found = finding(resolved, 2)
    assert found.status == RECOMMENDED and found.candidate == {"quantization": "fp8"}
    assert "L4 (compute capability 8.9) has FP8 tensor cores" in found.why
    assert_pastes(resolved, found)


def test_a10g_has_no_fp8_so_awq_and_the_naive_fp8_block_is_refused(tmp_path):
    resolved = team(tmp_path, instance="ml.g5.2xlarge", serving="max_model_len: 4096\n")
    naive = admit(resolved.team, {"quantization": "fp8"})
    assert not naive.admitted and "FP8 W8A8 needs compute capability >= 8.9" in naive.refusals[0]
    found = finding(resolved, 2)
    assert found.status == RECOMMENDED and found.candidate == {"quantization": "awq"}
    assert "A10G has no FP8" in found.why
    assert_pastes(resolved, found)


def test_quantized_weights_are_done(tmp_path):
    found = finding(team(tmp_path, serving="quantization: fp8\nmax_model_len: 4096\n"), 2)
    assert found.status == DONE and found.candidate is None


def test_the_predicted_effect_is_the_re_plan_of_the_merged_serving_block(tmp_path):
    resolved = team(tmp_path, serving="max_model_len: 4096\n")
    found = finding(resolved, 2)
    candidate = serving_with(resolved.team.serving, found.candidate)
    replanned = resolve_serving(resolved.team, candidate, instance=get_instance(candidate.instance_type)).plan
    before = resolved.baseline.plan
    figures = {f.key: (f.before, f.after) for f in found.effect}
    assert figures["kv_capacity_tokens"] == (before.kv_capacity_tokens, replanned.kv_capacity_tokens)
    assert figures["expected_tpot_ms_batch1"] == (before.expected_tpot_ms_batch1, replanned.expected_tpot_ms_batch1)
    assert figures["decode_tpot_ms_batch1"] == (before.decode_tpot_ms_batch1, replanned.decode_tpot_ms_batch1)
    assert figures["expected_cost_per_million_output_tokens"] == (
        before.expected.cost_per_million_output_tokens,
        replanned.expected.cost_per_million_output_tokens,
    )
    assert replanned.kv_capacity_tokens > before.kv_capacity_tokens  # FP8 weights leave more for the cache


def test_without_an_evaluation_dataset_the_block_says_what_the_gate_needs_first(tmp_path):
    resolved = team(tmp_path, serving="max_model_len: 4096\n", dataset=False)
    advice = advise(resolved)
    found = advice.findings[1]
    assert found.status == RECOMMENDED and any("dataset_s3_uri" in p for p in found.prerequisites)
    # Said once for the advice, however many steps it recommends.
    assert len(advice.recommendations) >= 2 and all(f.prerequisites for f in advice.recommendations)
    assert len(advice.prerequisites) == 1 and "dataset_s3_uri" in advice.prerequisites[0]


# --------------------------------------------------------------------------- 3. speculative decoding

SMALL_ON_H100 = "quantization: fp8\ntensor_parallel_degree: 1\nmax_batch_size: 256\nmax_model_len: 4096\n"


def test_speculation_where_a_decode_step_at_the_real_concurrency_is_memory_bound(tmp_path):
    resolved = team(
        tmp_path, instance="ml.p5.48xlarge", serving=SMALL_ON_H100, concurrency=(1, 8), prompt=512, output=128
    )
    found = finding(resolved, 3)
    assert found.status == RECOMMENDED
    assert found.candidate == {"speculative_decoding": {"method": "ngram", "num_speculative_tokens": 4}}
    assert "at concurrency 8 a decode step is memory-bound" in found.why
    assert_pastes(resolved, found)


def test_concurrency_256_is_high_for_speculation(tmp_path):
    resolved = team(
        tmp_path, instance="ml.p5.48xlarge", serving=SMALL_ON_H100, concurrency=(1, 256), prompt=512, output=128
    )
    found = finding(resolved, 3)
    assert found.status == NOT_NOW and found.candidate is None
    assert "concurrency 256 is high for speculation" in found.why and "expect little" in found.why


def test_a_gate_candidate_that_already_proves_the_step_is_said(tmp_path):
    resolved = load_resolved_team(
        minimal_team(
            tmp_path,
            "llama-3.1-8b",
            "ml.g6.2xlarge",
            "quantization: fp8\nmax_model_len: 4096\n",
            gate_tail(concurrency=(1, 8)) + "  candidate:\n    speculative_decoding: {method: ngram}\n",
        )
    )
    advice = advise(resolved)
    found = advice.findings[2]
    # Said, never offered as a block to paste: it is in the team file already (issue 37).
    assert found.status == PROVING and advice.proving == (found,) and advice.next is not found
    assert "your gate proves this (gate.candidate holds it: nothing to paste)" in found.why
    assert found.candidate_yaml is None and found.to_dict()["candidate_yaml"] is None
    assert (
        found.promotion is not None and "then set gate.candidate to the next step's block" in found.promotion.steps[-1]
    )
    # Compiling would drop the speculation being proven: not now.
    assert advice.findings[3].status == NOT_NOW and "speculation your gate.candidate proves" in advice.findings[3].why


# --------------------------------------------------------------------------- 4. compile


def test_compile_once_the_family_is_frozen(tmp_path):
    resolved = team(tmp_path, serving="quantization: fp8\nmax_model_len: 4096\n")
    found = finding(resolved, 4)
    # The block the gate proves: the family switch and the engine its optimization job compiles.
    assert found.status == RECOMMENDED and found.candidate == {"container": {"family": "lmi-trtllm"}, "compile": True}
    assert "the three an engine is pinned to, so an engine built now stays valid" in found.why
    assert_pastes(resolved, found)
    pasted = resolve_team(with_candidate(resolved.team, found.candidate))
    assert [next(iter(c)) for c in pasted.optimization_configs] == ["ModelCompilationConfig"]


def test_a_naive_compile_block_is_refused_and_a_compile_that_costs_more_is_not_offered(tmp_path):
    serving = "quantization: fp8\nmax_model_len: 4096\nkv_cache_dtype: fp8\ngpu_memory_utilization: 0.9\n"
    resolved = team(tmp_path, serving=serving)
    naive = admit(resolved.team, {"container": {"family": "lmi-trtllm"}})
    assert not naive.admitted and any("lmi-trtllm has no gpu_memory_utilization" in r for r in naive.refusals)
    admissible = {
        "container": {"family": "lmi-trtllm"},
        "compile": True,
        "gpu_memory_utilization": None,
        "kv_cache_dtype": "auto",
    }
    assert admit(resolved.team, admissible).admitted
    # TensorRT-LLM in LMI has no FP8 KV cache: the re-plan holds fewer tokens and costs more per token, so the step
    # is said, with the figure, and not offered.
    found = finding(resolved, 4)
    assert found.status == NOT_NOW and found.candidate is None
    assert "FP8 KV cache" in " ".join(found.notes) or "no fp8 KV cache" in " ".join(found.notes)
    assert re.search(
        r"the re-plan predicts \$ per 1M output tokens, expected \$[\d.]+ -> \$[\d.]+: not offered", found.why
    )


def test_compile_is_not_offered_over_served_speculation(tmp_path):
    serving = "quantization: fp8\nmax_model_len: 4096\nspeculative_decoding: {method: ngram}\n"
    found = finding(team(tmp_path, serving=serving), 4)
    assert found.status == NOT_NOW and "compiling would drop the ngram speculation" in found.why


# --------------------------------------------------------------------------- 5. instance


def test_a_bigger_instance_only_when_the_budget_cannot_be_met(tmp_path):
    fp8 = "quantization: fp8\nmax_model_len: 4096\n"
    resolved = team(tmp_path, serving=fp8, concurrency=(1, 16), extra="p99_itl_ms_budget: 20\n")
    found = finding(resolved, 5)
    assert found.status == RECOMMENDED and set(found.candidate) == {"instance_type"}
    assert "over the p99 ITL budget 20 ms on ml.g6.2xlarge" in found.why
    assert_pastes(resolved, found)
    at = {f.key: f for f in found.effect}["expected_tpot_ms_at_concurrency"]
    assert at.before > 20 >= at.after
    # Its twin: a budget the instance meets.
    twin = team(tmp_path, serving=fp8, concurrency=(1, 16), extra="p99_itl_ms_budget: 200\n")
    assert finding(twin, 5).candidate is None and "no bigger instance" in finding(twin, 5).why


def test_scale_to_zero_is_priced_only_with_the_utilisation_the_config_cannot_know(tmp_path):
    resolved = team(tmp_path, serving="quantization: fp8\nmax_model_len: 4096\n")
    without = finding(resolved, 5)
    assert "give --utilization-pct" in without.notes[0]
    with_it = finding(resolved, 5, utilization_pct=3)
    price = resolved.baseline.price_per_hour_usd
    assert (
        f"at 3 % utilisation a scale-to-zero inference component costs ${price * 730 * 0.97:,.0f}/month less"
        in (with_it.notes[0])
    )


# --------------------------------------------------------------------------- adapters, example teams


def test_an_adapter_team_gets_gate_candidate_blocks_that_validate(example_config):
    from optigate.deployment import load_resolved_project

    support = load_resolved_project(example_config).teams["support"]
    advice = advise(support)
    assert [found.step for found in advice.proving] == [2]
    assert advice.next is not None and advice.next.step == 3 and advice.next.status == RECOMMENDED
    for found in [found for found in advice.recommendations if found.status == RECOMMENDED]:
        # The gate stages adapter teams now (issue 26): every block is a gate.candidate, and passes the rules.
        assert found.target == GATE and yaml.safe_load(found.candidate_yaml) == {"gate": {"candidate": found.candidate}}
        assert_pastes(support, found)
        assert not [note for note in found.notes if "model-backed endpoint" in note]


def test_the_example_teams_get_the_advice_the_note_describes(example_config):
    from optigate.deployment import load_resolved_project

    teams = load_resolved_project(example_config).teams
    advised = {name: advise(resolved) for name, resolved in teams.items()}
    # the first step each example team is shown is what its gate proves: said, not a no-op to paste (issue 37)
    assert [f.step for f in advised["chat"].proving] == [3] and advised["chat"].recommendations[0].status == PROVING
    assert [f.step for f in advised["research"].proving] == [2]
    assert advised["research"].recommendations[0].candidate == {"quantization": "fp8"}
    for advice in advised.values():
        first = advice.recommendations[0]
        assert first.status == PROVING and first.candidate_yaml is None and first.promotion is not None
    assert advised["research"].findings[3].status == NOT_NOW  # compiling would drop EAGLE-3
    # support's 16,384 tokens hold 28 full-length sequences for its 16 at once: lowering them would change nothing.
    assert advised["support"].findings[0].status == DONE and "enough for the 16 you run at once" in (
        advised["support"].findings[0].why
    )
    assert [f.step for f in advised["support"].proving] == [2]


# --------------------------------------------------------------------------- --from-report and the CLI


def project(tmp_path: Path, serving: str = "max_model_len: 4096\n", candidate: str = "quantization: fp8") -> Path:
    config = tmp_path / "config"
    (config / "teams").mkdir(parents=True)
    (config / "environments.yaml").write_text(
        'environments:\n  - name: dev\n    account: "111111111111"\n    region: us-east-1\n'
    )
    folder = config / "teams"
    minimal_team(folder, "llama-3.1-8b", "ml.g6.2xlarge", serving, gate_tail() + f"  candidate: {{{candidate}}}\n")
    return config


def gate_report(config: Path, gain: float, team_name: str = "demo") -> Path:
    """The verdict the gate's decision writes for the team's candidate (the decision's own functions)."""
    from optigate.gate import GateInputs, decide, render_json
    from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, synthetic_run

    resolved = load_resolved_team(config / "teams" / "team.yaml")
    thresholds = {**THRESHOLDS, "concurrency": [1, 4]}
    verdict = decide(
        GateInputs(
            team=team_name,
            environment="dev",
            change=resolved.change,
            thresholds=thresholds,
            baseline_benchmark=bench(synthetic_run(1, seed=1), synthetic_run(4, seed=2)),
            candidate_benchmark=bench(
                synthetic_run(1, itl_ms=itl_for_gain(gain), seed=3), synthetic_run(4, itl_ms=itl_for_gain(gain), seed=4)
            ),
            evaluation=PASS,
            price_per_hour_usd=resolved.candidate.price_per_hour_usd,
            prediction=resolved.candidate.prediction(),
        )
    )
    path = config.parent / f"report-{gain}.json"
    path.write_text(render_json(verdict))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["advise", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_approved_step_paid_off_and_the_advice_moves_on(tmp_path, capsys):
    config = project(tmp_path)
    report = gate_report(config, 0.30)
    code, out, _ = run(capsys, "--team", "demo", "--config", str(config), "--from-report", str(report), "--json")
    data = json.loads(out)
    assert code == 0 and data["report"]["outcome"] == "APPROVED" and data["report"]["paid_off"] is True
    assert data["report"]["step"] == 2
    level_1 = data["report"]["levels"][0]
    assert level_1["concurrency"] == 1 and level_1["p50_tpot_ms"][1] < level_1["p50_tpot_ms"][0]
    assert data["report"]["tpot_expected_ratio"] is not None
    # The advice is for the team with FP8 promoted: step 2 is done, the next step comes after it.
    steps = {f["step"]: f for f in data["findings"]}
    assert steps[2]["status"] == DONE and data["next_step"] > 2
    # and how to promote it into the team file: the change into serving, the lock's package, the next candidate
    promotion = data["report"]["promotion"]
    assert promotion["block"] == {"serving": {"quantization": "fp8"}}
    assert "optigate resolve --env <env>" in promotion["steps"][0] and "gate.candidate" in promotion["steps"][-1]


def test_a_rejected_step_did_not_pay_off_and_is_not_offered_again(tmp_path, capsys):
    config = project(tmp_path)
    report = gate_report(config, -0.30)
    code, out, _ = run(capsys, "--team", "demo", "--config", str(config), "--from-report", str(report), "--json")
    data = json.loads(out)
    assert code == 1 and data["report"]["outcome"] == "REJECTED" and data["report"]["paid_off"] is False
    steps = {f["step"]: f for f in data["findings"]}
    assert steps[2]["status"] == TRIED and "REJECTED demo/dev" in steps[2]["why"]
    assert data["next_step"] != 2


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "expected JSON (a gate report), found expecting property name"),
        ("[1, 2]", "expected an object with `outcome` and `checks` (the gate's report), found [1, 2]"),
        (
            '{"team": "demo"}',
            'expected an object with `outcome` and `checks` (the gate\'s report), found an object with keys ["team"]',
        ),
        (
            '{"team": "demo", "outcome": "APPROVED"}',
            "environment: expected this key, found nothing (the key is missing)",
        ),
    ],
)
def test_a_malformed_report_is_one_line_and_exit_2(tmp_path, capsys, content, why):
    config = project(tmp_path)
    report = tmp_path / "report.json"
    report.write_text(content)
    code, out, err = run(capsys, "--team", "demo", "--config", str(config), "--from-report", str(report))
    assert code == 2 and out == "" and why in err and len(err.strip().splitlines()) == 1


def test_a_foreign_report_is_one_line_and_exit_2(tmp_path, capsys):
    config = project(tmp_path)
    report = gate_report(config, 0.30, team_name="chat")
    code, _, err = run(capsys, "--team", "demo", "--config", str(config), "--from-report", str(report))
    assert code == 2 and "a gate report of team 'chat', not of 'demo'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--team", "nobody"], "--team nobody: no file in"),
        (["--team", "demo", "--env", "moon"], "--env moon: no such environment"),
        (["--team", "demo", "--utilization-pct", "150"], "give a share of hours from 0 to 100"),
        (["--team", "demo", "--from-report", "missing.json"], "missing.json: no such file"),
    ],
)
def test_cli_failures_are_one_line_and_exit_2(tmp_path, capsys, argv, why):
    config = project(tmp_path)
    code, _, err = run(capsys, "--config", str(config), *argv)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1


def test_the_summary_fits_100_columns_and_shows_the_block_to_paste(monkeypatch, example_config):
    from rich.console import Console

    from optigate.cli import advise_command

    recorded = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(advise_command, "console", recorded)
    assert main(["advise", "--team", "research", "--config", str(example_config)]) == 0
    text = recorded.export_text()
    assert not [line for line in text.splitlines() if len(line) > 100]
    assert "step 2: quantize (your gate proves this)" in text and "$ per 1M output tokens" in text
    # nothing to paste for the step the gate proves; how to promote it once approved, the serving block to move
    proving = text[text.index("step 2: quantize") : text.index("step 3:") if "step 3:" in text else None]
    assert "paste into your team file" not in proving
    assert "once your gate approves it, promote it into the team file:" in proving
    assert "move quantization from gate.candidate into serving" in " ".join(proving.split())
    lines = [line.rstrip() for line in proving.splitlines()]
    assert lines[lines.index("      serving:") + 1] == "        quantization: fp8"


# --------------------------------------------------------------------------- the checkpoint as stored (issue 25)

ADAPTERS = "adapters:\n  - name: triage\n    s3_uri: s3://acme-adapters/triage.tar.gz\n"


def test_an_adapter_team_on_a10g_gets_awq_from_the_gates_optimization_job(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g5.2xlarge", "max_model_len: 4096\n", ADAPTERS + gate_tail())
    resolved = load_resolved_team(path)
    found = finding(resolved, 2)
    # Its gate runs the optimization job that makes AWQ weights (LMI's vLLM cannot at start-up, OG112).
    assert found.status == RECOMMENDED and found.target == GATE and found.candidate == {"quantization": "awq"}
    assert_pastes(resolved, found)


def test_fp8_for_an_adapter_team_is_a_gate_candidate(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\n", ADAPTERS + gate_tail())
    resolved = load_resolved_team(path)
    found = finding(resolved, 2)
    assert found.status == RECOMMENDED and found.target == GATE and found.candidate == {"quantization": "fp8"}
    assert_pastes(resolved, found)


def test_a_team_quantized_at_start_up_is_told_what_it_costs(tmp_path):
    found = finding(team(tmp_path, serving="quantization: fp8\nmax_model_len: 4096\n"), 2)
    assert found.status == DONE
    assert re.search(r"quantized at start-up from the bf16 checkpoint \(\+\d+ s per cold start", found.why)


# --------------------------------------------------------------------------- the gate of an adapter team (issue 26)


def _pasted(team_file: Path, block: dict, folder: Path) -> Path:
    """`team_file` with advise's block pasted as its text says (adapters replaced, adapter_mix under gate.benchmark),
    written to `folder`."""
    data = yaml.safe_load(team_file.read_text())
    if "gate" in block:
        data["gate"]["benchmark"].update(block["gate"]["benchmark"])
    if "adapters" in block:
        data["adapters"] = block["adapters"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / team_file.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_an_adapter_team_is_offered_a_dataset_per_adapter_that_validates(example_config, tmp_path):
    from optigate.deployment import load_resolved_project

    support = load_resolved_project(example_config).teams["support"]
    gate = advise(support).adapter_gate
    assert gate is not None and gate.block is not None and set(gate.block) == {"adapters"}
    shared = support.team.gate.evaluation.dataset_s3_uri.rstrip("/")
    offered = {a["name"]: a["evaluation"]["dataset_s3_uri"] for a in gate.block["adapters"]}
    assert offered == {a.name: f"{shared}/{a.name}/" for a in support.team.adapters}
    assert yaml.safe_load(gate.block_yaml) == gate.block
    # Pasted into the team file, it loads through every rule of `optigate validate`, each adapter judged on its own.
    pasted = load_resolved_team(_pasted(example_config / "teams" / "support.yaml", gate.block, tmp_path))
    assert {a.name: a.evaluation.dataset_s3_uri for a in pasted.team.adapters} == offered
    assert advise(pasted).adapter_gate.block is None  # nothing more to offer
    mix = support.team.gate.benchmark.adapter_mix
    assert any(note.startswith("the gate spreads its benchmark") and f"triage {mix['triage'] / sum(mix.values()):.0%}"
               in note for note in gate.notes)  # fmt: skip


def test_without_a_mix_the_gate_reads_cloudwatch_and_advise_offers_one_that_validates(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\n", ADAPTERS + gate_tail())
    gate = advise(load_resolved_team(path)).adapter_gate
    assert gate is not None and gate.block is not None
    assert gate.block["gate"] == {"benchmark": {"adapter_mix": {"base": 1, "triage": 1}}}
    assert gate.keys == ("gate.benchmark.adapter_mix", "adapters")
    assert any("from CloudWatch at run time" in note and "refuses to run" in note for note in gate.notes)
    # Pasted with the next step's candidate in place, the whole file validates.
    pasted = _pasted(path, gate.block, tmp_path / "pasted")
    data = yaml.safe_load(pasted.read_text())
    data["gate"]["candidate"] = advise(load_resolved_team(path)).next.candidate
    pasted.write_text(yaml.safe_dump(data, sort_keys=False))
    resolved = load_resolved_team(pasted)
    assert resolved.team.gate.benchmark.adapter_mix == {"base": 1, "triage": 1}
    assert resolved.team.adapters[0].evaluation.dataset_s3_uri == f"{DATASET}triage/"


def test_the_adapter_gate_says_what_og401_refuses_and_a_team_without_adapters_gets_none(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\n", ADAPTERS + gate_tail())
    gate = advise(load_resolved_team(path)).adapter_gate
    refused = [note for note in gate.notes if note.startswith("refused for adapter teams (OG401")]
    assert refused and "method eagle" in refused[0] and "cross_check: sagemaker" in refused[0]
    assert any("gate.candidate.adapters" in note for note in gate.notes)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert advise(team(plain)).adapter_gate is None


def test_a_refused_block_is_not_offered(tmp_path, monkeypatch):
    from optigate.advise import adapter_gate as module
    from optigate.config.rules import Problem

    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\n", ADAPTERS + gate_tail())
    monkeypatch.setattr(module, "check_team", lambda team: [Problem(("adapters", 0), "no such thing")])
    gate = advise(load_resolved_team(path)).adapter_gate
    assert gate.block is None and any("the rules refuse it (adapters[0]: no such thing)" in n for n in gate.notes)


def test_advise_on_an_adapter_team_fits_100_columns_and_shows_its_gate(monkeypatch, example_config, capsys):
    from rich.console import Console

    from optigate.cli import advise_command

    recorded = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(advise_command, "console", recorded)
    assert main(["advise", "--team", "support", "--config", str(example_config)]) == 0
    text = recorded.export_text()
    assert not [line for line in text.splitlines() if len(line) > 100]
    assert "the gate of a team serving adapters" in text and "paste into your team file (adapters):" in text
    assert "paste into your team file (serving)" not in text and "cannot stage" not in text
    assert main(["advise", "--team", "support", "--config", str(example_config), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["adapter_gate"]["block"]["adapters"][0]["evaluation"]["dataset_s3_uri"].endswith("/triage/")
    assert {f["target"] for f in data["recommendations"]} == {GATE}
