"""A gate whose benchmark reads the team's data capture, synthesized from the example config with a workload added
(chat: an SSE-S3 capture; research: the environment's KMS capture): the fleet's workers may read that endpoint's
capture prefix and nothing else of its bucket, decrypt with the endpoint's key only through S3, and the template
rules on IAM (IAM-ActionExists, IAM-StateMachineCallPermitted, IAM-LambdaCallPermitted) find nothing; cdk-nag
passes (the synth raises on an unacknowledged finding)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optigate.rehearse.template import resources_of_type
from tests.conftest import edited_config
from tests.template_rules import registry
from tests.template_rules.assembly import Stack, load_stacks
from tests.template_rules.rules import iam_actions_exist, lambda_calls_permitted, state_machine_calls_permitted

SESSIONS = "    workload: {from: data_capture, kind: sessions}\n"
#: The gate's last proof is read with an ARN the checks cannot compute (tests/stacks/test_iam_checks.py).
LAST_PROOF = "DescribeLastProof"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory) -> dict[str, Stack]:
    from optigate.stacks.app import build_app

    tmp = tmp_path_factory.mktemp("workload")
    edited_config(tmp, "teams/chat.yaml", "    p99_itl_ms_budget: 60\n", "    p99_itl_ms_budget: 60\n" + SESSIONS)
    # (without the managed cross-check, which cannot send the captured workload: OG464)
    edited_config(tmp, "teams/research.yaml", "    cross_check: sagemaker\n", "    cross_check: none\n" + SESSIONS)
    # research replays the environment-wide (KMS) capture, which dev then has.
    config = edited_config(
        tmp,
        "environments.yaml",
        "      autoscaling_max_capacity: 1\n",
        "      autoscaling_max_capacity: 1\n      data_capture_percentage: 10\n",
    )
    config = edited_config(
        tmp,
        "environments.yaml",
        "    region: us-east-1\n    teams:\n",
        "    region: us-east-1\n    overrides:\n      data_capture_percentage: 10\n    teams:\n",
    )  # staging: the gate's plan is resolved for every environment
    outdir = tmp / "cdk.out"
    build_app(config, environments="dev", outdir=str(outdir)).synth()
    return {stack.name: stack for stack in load_stacks(outdir)}


def _worker_statements(stack: Stack) -> list[dict[str, Any]]:
    """The statements of the benchmark worker's role (the function whose handler is the benchmark worker)."""
    template = stack.template
    workers = [
        f
        for f in resources_of_type(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Description") == "optigate benchmark benchmark"
    ]
    (worker,) = workers
    role = worker["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _granting(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    def actions(s: dict[str, Any]) -> list[str]:
        return s["Action"] if isinstance(s["Action"], list) else [s["Action"]]

    return [s for s in statements if action in actions(s)]


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_iam_rules_find_nothing(stacks):
    findings = [
        str(f)
        for stack in stacks.values()
        for f in registry.findings(
            stack, iam_actions_exist.ID, state_machine_calls_permitted.ID, lambda_calls_permitted.ID
        )
        if not (f.kind == "unresolved" and f.where.endswith(LAST_PROOF))
    ]
    assert findings == []


@pytest.mark.parametrize(("team", "kms"), [("chat", False), ("research", True)])
def test_the_workers_read_the_endpoints_capture_and_nothing_else(stacks, team, kms):
    statements = _worker_statements(stacks[f"optigate-dev-{team}"])
    (get,) = _granting(statements, "s3:GetObject")
    # One resource: the capture bucket's objects under this endpoint's prefix ("Fn::Join" of its ARN and the key).
    assert isinstance(get["Resource"], dict) and json.dumps(get["Resource"]).endswith(f'"/capture/{team}-dev/*"]]}}')
    (listing,) = _granting(statements, "s3:ListBucket")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"capture/{team}-dev/*"]}}
    assert "Fn::GetAtt" in json.dumps(listing["Resource"])  # the capture bucket's own ARN, no wildcard
    decrypts = [s for s in _granting(statements, "kms:Decrypt") if "Condition" in s]
    if kms:
        (decrypt,) = decrypts
        assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}}
        assert decrypt["Action"] == "kms:Decrypt"
    else:
        assert decrypts == []  # an SSE-S3 capture needs no key


def test_the_gate_checks_the_capture_before_anything_is_created(stacks):
    template = stacks["optigate-dev-chat"].template
    (machine,) = [
        m
        for m in resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
        if "CheckCapturedWorkload" in json.dumps(m["Properties"]["DefinitionString"])
    ]
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert definition.index("CheckCapturedWorkload") >= 0 and '\\"workload_check\\"' in definition


def test_the_workers_of_a_replay_share_one_start(stacks):
    """Every shard gets the fan-out's entry time (the Map's workers start on one clock: lambdas/benchmark)."""
    template = stacks["optigate-dev-chat"].template
    (fleet,) = [
        m
        for m in resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
        if "RunShard" in json.dumps(m["Properties"]["DefinitionString"])
    ]
    definition = json.dumps(fleet["Properties"]["DefinitionString"])
    assert '\\"entered.$\\":\\"$$.State.EnteredTime\\"' in definition
    assert '\\"schedule_entered.$\\":\\"$.fanout.entered\\"' in definition
