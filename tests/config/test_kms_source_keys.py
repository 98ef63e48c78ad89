"""model.source.kms_key_arn and adapters[i].kms_key_arn resolved once per environment, without CDK: `{region}` filled
(a multi-Region key only), the model role's keys, the gate plan's baseline key and each gate adapter's key."""

from __future__ import annotations

from typing import Any

from optigate.config.loader import load_project
from optigate.config.models import TeamConfig
from optigate.deployment import deploy, resolve_team
from optigate.deployment.source_keys import SourceKeys
from tests.conftest import CONFIG

PROJECT = load_project(CONFIG)
(PROD,) = [e for e in PROJECT.environments.environments if e.name == "prod"]  # us-west-2
MODEL_KEY = "arn:aws:kms:{region}:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab"
REPLY_KEY = "arn:aws:kms:us-west-2:444455556666:key/0f0e0d0c-0b0a-4998-8776-655443322110"


def _support(model_key: str | None, adapter_keys: dict[str, str], candidate: dict[str, Any]) -> TeamConfig:
    data = PROJECT.teams["support"].model_dump(exclude_unset=True)
    if model_key:
        data["model"]["source"]["kms_key_arn"] = model_key
    for adapter in data["adapters"]:
        if adapter["name"] in adapter_keys:
            adapter["kms_key_arn"] = adapter_keys[adapter["name"]]
    data["gate"]["candidate"] = candidate
    data["gate"]["benchmark"].update(p99_ttft_ms_budget=3000, p99_itl_ms_budget=200)  # OG455
    return TeamConfig.model_validate(data)


def test_the_keys_are_resolved_in_the_environments_region():
    team = _support(MODEL_KEY, {"reply": REPLY_KEY}, {"quantization": "fp8"})
    keys = deploy(resolve_team(team), PROD).source_keys
    model = MODEL_KEY.format(region="us-west-2")
    assert keys == SourceKeys(model=model, adapters=(("reply", REPLY_KEY),))
    assert keys.model_role == tuple(sorted((model, REPLY_KEY)))
    assert keys.of_adapters(["triage", "reply"]) == (REPLY_KEY,)


def test_the_gate_plan_carries_the_baseline_key_and_each_adapters_key():
    team = _support(
        MODEL_KEY, {"reply": REPLY_KEY}, {"adapters": {"reply": "s3://acme-ml-adapters-{region}/v3.tar.gz"}}
    )
    plan = deploy(resolve_team(team), PROD).gate
    assert plan is not None and plan.components is not None
    assert plan.baseline_model_key_arn == MODEL_KEY.format(region="us-west-2")
    assert {a.name: a.key_arn for a in plan.components.adapters} == {
        "triage": None,
        "summarise": None,
        "reply": REPLY_KEY,
    }


def test_without_keys_nothing_is_resolved_and_the_proof_is_the_same():
    """A key changes who may read the weights, not what is proven: the fingerprint stays."""
    plain = deploy(resolve_team(_support(None, {}, {"quantization": "fp8"})), PROD)
    keyed = deploy(resolve_team(_support(MODEL_KEY, {"reply": REPLY_KEY}, {"quantization": "fp8"})), PROD)
    assert plain.source_keys == SourceKeys() and plain.source_keys.model_role == ()
    assert plain.gate is not None and plain.gate.baseline_model_key_arn is None
    assert keyed.gate is not None and keyed.gate.fingerprint == plain.gate.fingerprint
