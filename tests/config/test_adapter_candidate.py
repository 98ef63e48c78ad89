"""`gate.candidate.adapters`: new adapter versions as the gate's candidate, alone or beside a serving change. The key
is no serving override; the resolved team exposes it (and the limits the stager checks archives against)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from optigate.cli import main, validate_command
from optigate.config.loader import load_project
from optigate.config.models import TeamConfig, serving_with
from optigate.config.rules import check_team
from optigate.deployment import resolve_team
from optigate.deployment.adapter_archive import (
    ATTENTION_MODULES,
    DENSE_DECODER_MODULES,
    AdapterLimits,
    BaseArchitecture,
)
from tests.conftest import CONFIG

SUPPORT = load_project(CONFIG).teams["support"]
REPLY_V3 = "s3://acme-ml-adapters-{region}/support/reply-v3.tar.gz"
DATASET = {"dataset_s3_uri": "s3://acme-eval/support/eval.jsonl"}


def _support(candidate: dict[str, Any], **changes: Any) -> TeamConfig:
    data = SUPPORT.model_dump(exclude_unset=True)
    data["gate"] = {**data.get("gate", {}), "candidate": candidate, "evaluation": DATASET}
    # A new adapter version is judged on its own latency against the p99 budgets (OG455).
    data["gate"]["benchmark"] = {
        **data["gate"].get("benchmark", {}),
        "p99_ttft_ms_budget": 800,
        "p99_itl_ms_budget": 60,
    }
    data.update(changes)
    return TeamConfig.model_validate(data)


def _rules(team: TeamConfig) -> list[str | None]:
    return [problem.rule_id for problem in check_team(team)]


def test_an_adapters_only_candidate_serves_the_baseline_with_the_new_version():
    team = _support({"adapters": {"reply": REPLY_V3}})
    assert _rules(team) == []  # no "unknown key 'adapters'" under gate.candidate
    resolved = resolve_team(team)
    assert resolved.candidate_adapters == {"reply": REPLY_V3}
    assert resolved.candidate is not None and resolved.candidate.serving == resolved.baseline.serving
    assert serving_with(team.serving, team.gate.candidate) == team.serving


def test_a_candidate_may_change_serving_and_adapters_together_or_serving_alone():
    both = resolve_team(_support({"adapters": {"reply": REPLY_V3}, "max_batch_size": 32}))
    assert both.candidate_adapters == {"reply": REPLY_V3} and both.candidate.serving.max_batch_size == 32
    serving_only = resolve_team(_support({"max_batch_size": 32}))
    assert serving_only.candidate_adapters == {} and serving_only.candidate.serving.max_batch_size == 32


def test_an_unknown_adapter_name_is_refused_with_a_suggestion():
    (problem,) = check_team(_support({"adapters": {"replyy": REPLY_V3}}))
    assert problem.rule_id == "OG452" and problem.path == ("gate", "candidate", "adapters", "replyy")
    assert "did you mean 'reply'" in problem.message.lower()


def test_an_adapter_team_check_limits_come_from_the_candidate():
    limits = resolve_team(_support({"adapters": {"reply": REPLY_V3}})).adapter_limits
    # support: serving.lora.max_lora_rank 32, an S3 source whose catalog architecture is Qwen/Qwen2.5-7B-Instruct
    assert (limits.max_lora_rank, limits.base_models, limits.modules) == (
        32,
        ("Qwen/Qwen2.5-7B-Instruct",),
        DENSE_DECODER_MODULES,
    )
    lora = {**SUPPORT.serving.model_dump(exclude_unset=True)["lora"], "max_lora_rank": 64}
    wider = resolve_team(_support({"adapters": {"reply": REPLY_V3}, "lora": lora}))
    assert wider.adapter_limits.max_lora_rank == 64  # the candidate's own serving.lora
    assert ATTENTION_MODULES < DENSE_DECODER_MODULES
    # The base's architecture travels in the event as data (qwen2.5-7b's config.json in the catalog).
    assert limits.architecture == BaseArchitecture(3584, 28, 18944, "qwen2")
    assert AdapterLimits.from_event(limits.event()) == limits


def test_architecture_fields_give_the_widths_they_state_and_no_model_type():
    fields = {"num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4}
    fields |= {"vocab_size": 152064, "max_position_embeddings": 32768}
    model = SUPPORT.model.model_dump(exclude_unset=True)
    model["architecture"] = {**fields, "num_parameters": 7_615_616_512}
    derived = resolve_team(_support({"adapters": {"reply": REPLY_V3}}, model=model)).adapter_limits
    # intermediate_size derived from num_parameters is an estimate: not compared.
    assert derived.architecture == BaseArchitecture(3584, 28, None, None) and derived.base_models == ()
    model["architecture"] = {**fields, "intermediate_size": 18944}
    stated = resolve_team(_support({"adapters": {"reply": REPLY_V3}}, model=model)).adapter_limits
    assert stated.architecture == BaseArchitecture(3584, 28, 18944, None)


@pytest.mark.parametrize("value", [["reply"], {"reply": 3}, {"reply": "s3://acme/reply.zip"}])
def test_a_malformed_value_is_refused_not_ignored(value):
    assert "OG453" in _rules(_support({"adapters": value}))


NO_ID_TEAM = """\
team: inhouse
model:
  source:
    s3_uri: s3://acme-models/inhouse-7b/
  architecture:
    num_hidden_layers: 28
    hidden_size: 3584
    num_attention_heads: 28
    num_key_value_heads: 4
    intermediate_size: 18944
    vocab_size: 152064
    max_position_embeddings: 32768
serving:
  instance_type: ml.g6e.2xlarge
  max_model_len: 8192
  lora: {max_loras: 2, max_lora_rank: 16}
adapters:
  - name: triage
    s3_uri: s3://acme-models/adapters/triage.tar.gz
"""


def test_validate_notes_an_adapter_team_whose_model_names_no_hugging_face_id(tmp_path, monkeypatch):
    path = tmp_path / "inhouse.yaml"
    path.write_text(NO_ID_TEAM)
    recorded = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(validate_command, "console", recorded)
    assert main(["validate", str(path)]) == 0
    text = recorded.export_text()
    assert "model.source [OG456]" in text and "1 config file(s) valid" in text
    assert (
        "adapters' base_model_name_or_path cannot be compared; the gate checks their architecture only; set "
        "model.source.hugging_face to have the id compared" in " ".join(text.split())
    )
    # With its Hugging Face id the note goes.
    hub = "    hugging_face: {model_id: acme/inhouse-7b, s3_uri: s3://acme-models/inhouse-7b/}\n"
    path.write_text(NO_ID_TEAM.replace("    s3_uri: s3://acme-models/inhouse-7b/\n", hub))
    recorded = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(validate_command, "console", recorded)
    assert main(["validate", str(path)]) == 0
    assert "OG456" not in recorded.export_text()
