"""Customer-managed KMS keys of what the roles read (issue 36, finding 7): model.source.kms_key_arn and
adapters[i].kms_key_arn become kms:Decrypt, through S3 only, for exactly the roles that read those objects (the model
role, a shadow model's role, the gate's staging function's role), and nothing changes for a team without them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import edited_config, resources_of

#: A multi-Region key written with `{region}` (filled with prod's us-west-2), another account's adapter key, and a
#: single-Region key of research's bucket.
SUPPORT_MODEL_KEY = "arn:aws:kms:{region}:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab"
REPLY_KEY = "arn:aws:kms:us-west-2:444455556666:key/0f0e0d0c-0b0a-4998-8776-655443322110"
RESEARCH_MODEL_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
REPLY_V3 = "s3://acme-ml-adapters-{region}/support/reply-v3.tar.gz"
VIA_S3 = {"StringEquals": {"kms:ViaService": "s3.us-west-2.amazonaws.com"}}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> dict[str, dict]:
    """support and research in prod with their keys, synthesized with cdk-nag (a finding fails the synth); support's
    candidate also brings reply's v3, so the gate's staging function checks that archive."""
    from optigate.stacks.app import build_app

    tmp_path = tmp_path_factory.mktemp("keyed")
    model = "    s3_uri: s3://acme-ml-models-{region}/qwen2.5-7b/\n"
    edited_config(tmp_path, "teams/support.yaml", model, f"{model}    kms_key_arn: {SUPPORT_MODEL_KEY}\n")
    reply = "    s3_uri: s3://acme-ml-adapters-{region}/support/reply-v2.tar.gz\n"
    edited_config(tmp_path, "teams/support.yaml", reply, f"{reply}    kms_key_arn: {REPLY_KEY}\n")
    candidate = "  candidate:\n    quantization: fp8\n"
    edited_config(tmp_path, "teams/support.yaml", candidate, f"{candidate}    adapters:\n      reply: {REPLY_V3}\n")
    budgets = "    max_new_tokens: 256\n"  # a new adapter version is judged on its own latency (OG455)
    edited_config(
        tmp_path, "teams/support.yaml", budgets, f"{budgets}    p99_ttft_ms_budget: 3000\n    p99_itl_ms_budget: 200\n"
    )
    model = "    s3_uri: s3://acme-ml-models-{region}/llama-3.3-70b-instruct/\n"
    config = edited_config(tmp_path, "teams/research.yaml", model, f"{model}    kms_key_arn: {RESEARCH_MODEL_KEY}\n")
    outdir = tmp_path / "cdk.out"
    build_app(config, environments="prod", teams="support,research", outdir=str(outdir)).synth()
    return {path.name.split(".")[0]: json.loads(path.read_text()) for path in outdir.glob("*.template.json")}


def _role(template: dict, logical_prefix: str) -> str:
    (logical,) = [name for name in resources_of(template, "AWS::IAM::Role") if name.startswith(logical_prefix)]
    return logical


def _statements(template: dict, role: str) -> list[dict[str, Any]]:
    """Every statement of the inline and managed policies attached to `role`."""
    policies = {**resources_of(template, "AWS::IAM::Policy"), **resources_of(template, "AWS::IAM::ManagedPolicy")}
    return [
        statement
        for policy in policies.values()
        if {"Ref": role} in policy["Properties"].get("Roles", [])
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _decrypted(template: dict, role: str) -> set[str]:
    """The key ARNs written into the template that `role` may kms:Decrypt (the gate's own key is a reference)."""
    return {
        resource
        for statement in _statements(template, role)
        if "kms:Decrypt" in _listed(statement["Action"])
        for resource in _listed(statement["Resource"])
        if isinstance(resource, str)
    }


def _source_key_statements(template: dict, role: str) -> list[dict[str, Any]]:
    return [
        s
        for s in _statements(template, role)
        if any(isinstance(r, str) and ":kms:" in r for r in _listed(s["Resource"]))
    ]


def test_the_model_role_decrypts_the_model_prefix_and_the_adapter_archives_with_their_keys(keyed):
    template = keyed["optigate-prod-support"]
    model_role = _role(template, "ModelExecutionRole")
    assert _decrypted(template, model_role) == {SUPPORT_MODEL_KEY.format(region="us-west-2"), REPLY_KEY}


def test_the_staging_function_decrypts_the_new_adapter_versions_key_only(keyed):
    """It reads reply's v3 (the adapter check) and never the model's prefix: no optimization job stages files."""
    template = keyed["optigate-prod-support"]
    assert _decrypted(template, _role(template, "GateStageRole")) == {REPLY_KEY}


def test_research_decrypts_its_model_prefix_in_the_model_shadow_and_staging_roles(keyed):
    """The staging function copies the EAGLE-3 head from the model's prefix into the optimized candidate's."""
    template = keyed["optigate-prod-research"]
    for prefix in ("ModelExecutionRole", "ShadowModelExecutionRole", "GateStageRole"):
        assert _decrypted(template, _role(template, prefix)) == {RESEARCH_MODEL_KEY}, prefix


def test_a_source_key_is_only_decrypted_and_only_through_s3_in_its_region(keyed):
    for stack, template in keyed.items():
        for role in resources_of(template, "AWS::IAM::Role"):
            for statement in _source_key_statements(template, role):
                assert statement["Action"] == "kms:Decrypt", (stack, role, statement)
                assert statement["Condition"] == VIA_S3, (stack, role, statement)


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
@pytest.mark.parametrize("stack", ["optigate-prod-support", "optigate-prod-research"])
def test_the_keyed_templates_pass_cfn_lint(keyed, stack):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(keyed[stack]), config=ManualArgs(regions=["us-west-2"]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


def test_without_keys_no_role_decrypts_a_key_outside_its_stack(example_app):
    """The example teams set no key: every kms:Decrypt grant names a key of the team's own stack."""
    for stack, template in example_app.templates.items():
        for role in resources_of(template, "AWS::IAM::Role"):
            assert _decrypted(template, role) == set(), (stack, role)
