"""The example `research` team's gate runs SageMaker's managed benchmark as a cross-check: one
AWS::SageMaker::AIWorkloadConfig per benchmarked level in its stack, a job role that reaches only the gate's own
endpoints and output prefix, and teams without the cross-check get none of it."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase

from hypothesis import given, settings
from hypothesis import strategies as st

from optigate import naming
from optigate.config.models import ResourceName
from tests.conftest import resources_of


def _statements(template: dict, role_logical: str) -> list[dict]:
    policies = resources_of(template, "AWS::IAM::Policy").values()
    return [
        statement
        for policy in policies
        if {"Ref": role_logical} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_research_has_one_workload_config_per_level_with_its_gate_workload(example_app):
    template = example_app.templates["optigate-prod-research"]
    configs = [c["Properties"] for c in resources_of(template, "AWS::SageMaker::AIWorkloadConfig").values()]
    workloads = {
        json.loads(c["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])["parameters"]["concurrency"]: c for c in configs
    }
    assert sorted(workloads) == [1, 16, 64]  # research's gate.benchmark.concurrency
    for concurrency, config in workloads.items():
        name = config["AIWorkloadConfigName"]
        assert name == name.lower() and name.startswith(f"research-prod-aiperf-c{concurrency}-")
        parameters = json.loads(config["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])["parameters"]
        assert parameters["tokenizer"] == "unsloth/Llama-3.3-70B-Instruct"
        assert (parameters["prompt_input_tokens_mean"], parameters["output_tokens_mean"]) == (4096, 512)


def test_the_job_role_reaches_only_the_gates_endpoints_and_output_prefix(example_app):
    template = example_app.templates["optigate-prod-research"]
    roles = {
        logical: role
        for logical, role in resources_of(template, "AWS::IAM::Role").items()
        if "CrossCheckRole" in logical
    }
    (logical,) = roles
    trust = roles[logical]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "sagemaker.amazonaws.com"}]
    statements = _statements(template, logical)
    invoke = next(s for s in statements if "sagemaker:InvokeEndpoint" in s["Action"])
    endpoints = json.dumps(invoke["Resource"])
    assert "endpoint/research-prod-twin-*" in endpoints and "endpoint/research-prod-cand-*" in endpoints
    assert 'endpoint/research-prod"' not in endpoints  # never the live endpoint
    writes = [s for s in statements if "s3:PutObject" in json.dumps(s["Action"])]
    assert len(writes) == 1 and "/crosscheck/*" in json.dumps(writes[0]["Resource"])


def test_teams_without_the_cross_check_have_no_workload_config(example_app):
    for name in ("optigate-prod-chat", "optigate-prod-support"):
        assert resources_of(example_app.templates[name], "AWS::SageMaker::AIWorkloadConfig") == {}


NAME = ResourceName.__metadata__[0].pattern


@settings(max_examples=200, deadline=None)
@given(
    team=st.from_regex(NAME, fullmatch=True),
    environment=st.from_regex(NAME, fullmatch=True),
    level=st.integers(min_value=1, max_value=4096 + 64),
    side=st.sampled_from(["baseline", "candidate"]),
    workload=st.text(max_size=50),
)
def test_cross_check_names_fit_sagemaker_and_the_iam_pattern(team, environment, level, side, workload):
    job = naming.cross_check_job_template(team, environment, side, level).format("1a2b3c4d")
    assert len(job) <= naming.SAGEMAKER_NAME_MAX and naming.SAGEMAKER_NAME_PATTERN.match(job)
    assert fnmatchcase(job, naming.cross_check_job_pattern(team, environment))
    config = naming.workload_config_name(team, environment, level, workload)
    assert len(config) <= naming.SAGEMAKER_NAME_MAX and re.fullmatch(r"[a-z0-9](-*[a-z0-9]){0,62}", config)
