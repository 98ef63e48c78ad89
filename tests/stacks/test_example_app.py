"""The example teams synthesized for every environment: lint-clean, nag-clean, and as configured."""

from __future__ import annotations

import json

import pytest

from optigate.config.loader import load_project
from tests.conftest import CONFIG, resources_of, statelint

PROJECT = load_project(CONFIG)


EXPECTED_STACKS = {
    f"optigate-{env}-{team}" for env in ("dev", "staging", "prod") for team in ("chat", "research", "support")
}


def test_one_stack_per_team_and_environment(example_app):
    assert example_app.error is None, f"synth failed:\n{example_app.error}"
    assert set(example_app.templates) == EXPECTED_STACKS


def test_cdk_nag_found_nothing_unacknowledged(example_app):
    assert example_app.error is None, f"cdk-nag or synth failed:\n{example_app.error}"
    report = json.loads((example_app.outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []  # a finding would be listed here and would have failed the synth


def test_cdk_nag_plugin_of_the_app_rejects_a_non_compliant_resource(tmp_path):
    """The same registration the app uses catches a finding, so the clean report above means something."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_s3 as s3

    from optigate.stacks.app import enable_nag

    app = App(outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Bad"), "PlainBucket")  # no SSL-only policy, no access logs
    enable_nag(app)
    with pytest.raises(Exception, match="AwsSolutions-S10"):
        app.synth()


def _acknowledged(example_app, stack: str) -> dict[str, dict[str, str]]:
    metadata = json.loads((example_app.outdir / f"{stack}.metadata.json").read_text())
    found: dict[str, dict[str, str]] = {}
    for path, entries in metadata.items():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules":
                found.setdefault(path, {}).update(entry["data"])
    return found


def test_every_acknowledgement_carries_a_reason(example_app):
    from optigate.constructs.nag import MIN_REASON_LENGTH

    total = 0
    for stack in example_app.templates:
        for path, rules in _acknowledged(example_app, stack).items():
            for rule, reason in rules.items():
                total += 1
                assert len(reason) >= MIN_REASON_LENGTH, f"{stack}{path} {rule}: {reason!r}"
                # Wildcards are acknowledged one finding at a time, never as a blanket rule.
                assert not rule.endswith("AwsSolutions-IAM5"), f"{path}: blanket IAM5 acknowledgement"
    assert total > 0


def test_a_too_short_reason_is_refused():
    from aws_cdk import App, Stack

    from optigate.constructs.nag import MIN_REASON_LENGTH, acknowledge

    with pytest.raises(ValueError, match="needs a real reason"):
        acknowledge(Stack(App(), "S"), "AwsSolutions-IAM5", "x" * (MIN_REASON_LENGTH - 1))


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
@pytest.mark.parametrize("stack", sorted(EXPECTED_STACKS))
def test_template_passes_cfn_lint_with_zero_errors(example_app, stack):
    from cfnlint.api import ManualArgs, lint

    template = example_app.templates[stack]
    region = "us-west-2" if "-prod-" in stack else "us-east-1"
    matches = lint(json.dumps(template), config=ManualArgs(regions=[region]))
    errors = [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches if m.rule.id.startswith("E")]
    assert errors == []


def test_no_role_anywhere_has_a_managed_full_access_policy(example_app):
    for stack, template in example_app.templates.items():
        text = json.dumps(template)
        assert "AmazonSageMakerFullAccess" not in text, stack
        for role in resources_of(template, "AWS::IAM::Role").values():
            assert not role["Properties"].get("ManagedPolicyArns"), f"{stack}: managed policies on a role"


def test_every_streaming_invoke_grant_also_allows_invoke_endpoint(example_app):
    """InvokeEndpointWithResponseStream's API reference: "your IAM permissions must allow the
    sagemaker:InvokeEndpoint action". Every statement of every stack that grants the first grants both."""
    streaming = 0
    for stack, template in example_app.templates.items():
        for policy in resources_of(template, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if "sagemaker:InvokeEndpointWithResponseStream" in actions:
                    streaming += 1
                    assert "sagemaker:InvokeEndpoint" in actions, f"{stack}: {statement}"
    assert streaming  # the benchmark workers and the evaluation stream


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_every_state_machine_of_every_stack_passes_statelint(example_app, tmp_path):
    """Every definition (gate, benchmark fleet, evaluation), not only the gate's."""
    from optigate.rehearse.template import placeholder_definition, state_machines

    checked = []
    for stack, template in example_app.templates.items():
        for logical in state_machines(template):
            path = tmp_path / f"{stack}-{logical}.json"
            path.write_text(json.dumps(placeholder_definition(template, logical)))
            result = statelint(path)
            assert result.returncode == 0, f"{stack} {logical}: {result.stdout}{result.stderr}"
            checked.append(logical)
    assert len(checked) > len(example_app.templates)  # gates and fleets, at least


def test_every_task_of_every_state_machine_retries_what_its_integration_raises(example_app):
    """The retry names come from one table (optigate.constructs.retries), per kind of integration."""
    from optigate.constructs.retries import TRANSIENT, integration_kind
    from optigate.rehearse.asl import iter_states, retry_problems
    from optigate.rehearse.template import placeholder_definition, state_machines

    kinds = set()
    for stack, template in example_app.templates.items():
        for logical in state_machines(template):
            definition = placeholder_definition(template, logical)
            assert retry_problems(definition) == [], f"{stack} {logical}"
            kinds |= {integration_kind(s["Resource"]) for _, s in iter_states(definition) if s["Type"] == "Task"}
    assert kinds == set(TRANSIENT)  # and every entry of the table is used


def test_a_retry_of_another_integrations_error_name_is_reported():
    """The seeded mistake of issue 13: throttling of an optimized SageMaker call listed as
    SageMaker.ThrottlingException, a name only the SDK integration could raise."""
    from optigate.constructs import retries
    from optigate.rehearse.asl import retry_problems

    def task(resource: str, errors: list[str]) -> dict:
        retry = {"ErrorEquals": errors, "IntervalSeconds": 2, "MaxAttempts": 5, "BackoffRate": 1.5}
        return {"Type": "Task", "Resource": resource, "Retry": [retry], "End": True}

    optimized = "arn:aws:states:::sagemaker:createEndpoint"
    sdk = "arn:aws:states:::aws-sdk:sagemaker:describeEndpoint"
    seeded = {"States": {"A": task(optimized, ["SageMaker.ThrottlingException"]), "B": task(sdk, ["States.ALL"])}}
    problems = retry_problems(seeded)
    assert len([p for p in problems if p.startswith("A:")]) == 2  # the right names missing, a wrong one present
    assert any(p.startswith("B:") and "SageMakerException" in p for p in problems)  # States.ALL alone is no table
    fixed = {"States": {"A": {**task(optimized, []), "Retry": [retries.retry_for(optimized)]}}}
    assert retry_problems(fixed) == []


def _only(template: dict, resource_type: str) -> dict:
    (resource,) = resources_of(template, resource_type).values()
    return resource["Properties"]


def test_chat_serves_fp8_weights_and_kv_on_l4_with_sized_timeouts(example_app):
    template = example_app.templates["optigate-dev-chat"]
    environment = _only(template, "AWS::SageMaker::Model")["PrimaryContainer"]["Environment"]
    assert environment["OPTION_QUANTIZE"] == "fp8" and environment["OPTION_KV_CACHE_DTYPE"] == "fp8"
    assert environment["OPTION_MAX_MODEL_LEN"] == "8192"
    (variant,) = _only(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6.2xlarge"
    assert (
        600
        < variant["ModelDataDownloadTimeoutInSeconds"]
        < variant["ContainerStartupHealthCheckTimeoutInSeconds"]
        <= 3600
    )
    # Sized for the bf16 checkpoint it downloads (~16 GB at 10 s per GB over the 600 s base), not the ~9 GB it
    # serves as fp8 after quantizing at start-up.
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 600 + 10 * 16


def test_the_70b_gets_far_more_than_600_seconds_and_eagle3(example_app):
    template = example_app.templates["optigate-prod-research"]
    (variant,) = _only(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 2000
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 2700
    models = resources_of(template, "AWS::SageMaker::Model")
    environments = [m["Properties"]["PrimaryContainer"]["Environment"] for m in models.values()]
    assert all(json.loads(e["OPTION_SPECULATIVE_CONFIG"])["method"] == "eagle3" for e in environments)
    assert all(e["OPTION_TENSOR_PARALLEL_DEGREE"] == "8" for e in environments)


def test_research_shadows_20_percent_of_traffic_to_its_fp8_candidate(example_app):
    template = example_app.templates["optigate-prod-research"]
    config = _only(template, "AWS::SageMaker::EndpointConfig")
    (shadow,) = config["ShadowProductionVariants"]
    assert shadow["VariantName"] == "Shadow" and shadow["InitialVariantWeight"] == 0.2
    models = resources_of(template, "AWS::SageMaker::Model")
    shadow_model_id = shadow["ModelName"]["Fn::GetAtt"][0]
    assert models[shadow_model_id]["Properties"]["PrimaryContainer"]["Environment"]["OPTION_QUANTIZE"] == "fp8"
    (production,) = config["ProductionVariants"]
    assert (
        "OPTION_QUANTIZE"
        not in models[production["ModelName"]["Fn::GetAtt"][0]]["Properties"]["PrimaryContainer"]["Environment"]
    )


def test_support_serves_three_adapters_on_a_base_component_that_scales_to_zero(example_app):
    template = example_app.templates["optigate-staging-support"]
    components = [r["Properties"] for r in resources_of(template, "AWS::SageMaker::InferenceComponent").values()]
    base = [c for c in components if "ModelName" in c["Specification"]]
    adapters = [c for c in components if "BaseInferenceComponentName" in c["Specification"]]
    assert [b["InferenceComponentName"] for b in base] == ["support-staging-base"]
    assert sorted(a["InferenceComponentName"] for a in adapters) == [
        "support-staging-reply",
        "support-staging-summarise",
        "support-staging-triage",
    ]
    assert {a["Specification"]["BaseInferenceComponentName"] for a in adapters} == {"support-staging-base"}
    assert all("ComputeResourceRequirements" not in a["Specification"] for a in adapters)
    assert base[0]["Specification"]["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 1
    target = _only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 4)
    config = _only(template, "AWS::SageMaker::EndpointConfig")
    assert "ExecutionRoleArn" in config and "ModelName" not in config["ProductionVariants"][0]


def test_every_endpoint_has_a_rotating_customer_managed_key(example_app):
    for stack, template in example_app.templates.items():
        keys = resources_of(template, "AWS::KMS::Key")
        assert keys and all(k["Properties"]["EnableKeyRotation"] for k in keys.values()), stack


def test_no_template_traces_payloads_since_tracing_cannot_go_with_data_capture(example_app):
    """botocore 1.44.18 CreateEndpointConfig.TracingConfig: "You can't enable tracing together with data capture
    (EnableCapture set to True in DataCaptureConfig)". optigate offers no tracing; one that adds it needs a validate
    rule refusing it beside data capture first, and this test says so."""
    from optigate.rehearse.template import every_state

    for stack, template in example_app.templates.items():
        configs = [r["Properties"] for r in resources_of(template, "AWS::SageMaker::EndpointConfig").values()]
        configs += [
            state.get("Parameters") or {}
            for _, _, state in every_state(template)
            if "createEndpointConfig" in str(state.get("Resource", ""))
        ]
        assert configs or "chat" not in stack, stack  # every team's stack has an endpoint config
        assert all("TracingConfig" not in config for config in configs), f"{stack}: refuse tracing with capture"


def test_prod_overrides_apply_only_where_configured(example_app):
    prod_chat = _only(example_app.templates["optigate-prod-chat"], "AWS::SageMaker::EndpointConfig")
    dev_chat = _only(example_app.templates["optigate-dev-chat"], "AWS::SageMaker::EndpointConfig")
    assert prod_chat["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert dev_chat["ProductionVariants"][0]["InitialInstanceCount"] == 1
    # chat's own capture in each environment (its gate trains an EAGLE head from it): 5 % in prod, 100 % in dev.
    assert prod_chat["DataCaptureConfig"]["InitialSamplingPercentage"] == 5
    assert dev_chat["DataCaptureConfig"]["InitialSamplingPercentage"] == 100
    # prod's environment-wide data_capture_percentage (KMS) reaches the other teams in prod only.
    prod_research = _only(example_app.templates["optigate-prod-research"], "AWS::SageMaker::EndpointConfig")
    dev_research = _only(example_app.templates["optigate-dev-research"], "AWS::SageMaker::EndpointConfig")
    assert prod_research["DataCaptureConfig"]["InitialSamplingPercentage"] == 5
    assert "KmsKeyId" in prod_research["DataCaptureConfig"]
    assert "DataCaptureConfig" not in dev_research
    dev_target = _only(example_app.templates["optigate-dev-chat"], "AWS::ApplicationAutoScaling::ScalableTarget")
    assert dev_target["MaxCapacity"] == 1  # dev caps autoscaling


def test_chat_captures_unencrypted_json_the_eagle_job_can_read_and_research_keeps_kms(example_app):
    """s3_managed: a separate SSE-S3, SSL-only bucket, no capture KmsKeyId, JSON payloads (not base64)."""
    for environment in ("dev", "staging", "prod"):
        template = example_app.templates[f"optigate-{environment}-chat"]
        capture = _only(template, "AWS::SageMaker::EndpointConfig")["DataCaptureConfig"]
        assert "KmsKeyId" not in capture and capture["CaptureContentTypeHeader"] == {
            "JsonContentTypes": ["application/json"]
        }
        bucket_logical = capture["DestinationS3Uri"]["Fn::Join"][1][1]["Ref"]
        bucket = template["Resources"][bucket_logical]["Properties"]
        (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}, environment
        policies = [r["Properties"] for r in resources_of(template, "AWS::S3::BucketPolicy").values()]
        ssl_only = [
            s
            for p in policies
            if p["Bucket"] == {"Ref": bucket_logical}
            for s in p["PolicyDocument"]["Statement"]
            if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert ssl_only, environment
    research = _only(example_app.templates["optigate-prod-research"], "AWS::SageMaker::EndpointConfig")
    assert "CaptureContentTypeHeader" not in research["DataCaptureConfig"]


def test_prod_chat_blue_green_uses_a_one_instance_canary_and_rolls_back_on_alarms(example_app):
    endpoint = _only(example_app.templates["optigate-prod-chat"], "AWS::SageMaker::Endpoint")
    policy = endpoint["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"]["Type"] == "CANARY"
    assert policy["TrafficRoutingConfiguration"]["CanarySize"] == {"Type": "INSTANCE_COUNT", "Value": 1}
    assert len(endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]) == 2


def test_teams_with_a_candidate_get_a_gate_and_the_others_do_not(example_app):
    for stack, template in example_app.templates.items():
        machines = [
            r["Properties"].get("StateMachineName", "")
            for r in resources_of(template, "AWS::StepFunctions::StateMachine").values()
        ]
        gates = [name for name in machines if name.endswith("-gate")]
        team, env = stack.split("-")[2], stack.split("-")[1]
        if not PROJECT.teams[team].gate.candidate:
            assert gates == [], stack
        else:
            assert gates == [f"optigate-{team}-{env}-gate"], stack
            found = resources_of(template, "AWS::SageMaker::ModelPackageGroup").values()
            assert [r["Properties"]["ModelPackageGroupName"] for r in found] == [f"optigate-{team}-{env}"]
            # The verdicts outlive the stack (and a group with versions cannot be deleted anyway).
            assert all(r.get("DeletionPolicy") == r.get("UpdateReplacePolicy") == "Retain" for r in found), stack


def test_research_gate_quantizes_and_chat_gate_trains_an_eagle_head_from_its_capture(example_app):
    def definition(stack):
        (machine,) = [
            r
            for r in resources_of(example_app.templates[stack], "AWS::StepFunctions::StateMachine").values()
            if r["Properties"].get("StateMachineName", "").endswith("-gate")
        ]
        separator, parts = machine["Properties"]["DefinitionString"]["Fn::Join"]
        return separator.join(p if isinstance(p, str) else "TOKEN" for p in parts)

    research, chat = definition("optigate-prod-research"), definition("optigate-prod-chat")
    assert "createOptimizationJob" in research and '"OPTION_QUANTIZE":"fp8"' in research
    assert "ModelSpeculativeDecodingConfig" not in research and "DescribeOptimizedModel" not in research
    # chat serves fp8 already: its job only trains the head, from prod's capture of chat-prod, and registers the
    # model that says where the head is; the head is staged before the candidate model is created.
    assert '"ModelSpeculativeDecodingConfig":{"Technique":"EAGLE","TrainingDataSource":{"S3Uri":"s3://TOKEN' in chat
    assert '/capture/chat-prod/","S3DataType":"S3Prefix"}' in chat and "ModelQuantizationConfig" not in chat
    assert '"SageMakerModel":{"ModelName.$":"States.Format(\'chat-prod-optm-{}\', $.run.id)"}' in chat
    assert '"DescribeOptimizedModel":' in chat and '"StageTrainedHead":' in chat


# The pipeline's assembly takes half a minute to synthesize: its variant runs in the full suite only.
@pytest.mark.parametrize("which", ["example_app", pytest.param("stage_templates", marks=pytest.mark.slow)])
def test_every_optimization_job_sends_the_stopping_condition_keys_the_sdk_sends(which, request):
    """The template rule SFN-OptimizationStoppingCondition over every template of the example app and of the
    pipeline's stages: each CreateOptimizationJob's StoppingCondition has the keys the SageMaker SDK's optimize()
    sends (MaxRuntimeInSeconds only), not MaxPendingTimeInSeconds, which no reference documents for the job."""
    from tests.template_rules import registry
    from tests.template_rules.assembly import Stack
    from tests.template_rules.rules import optimization_stopping_condition

    found = request.getfixturevalue(which)
    templates = found.templates if which == "example_app" else found
    jobs = sum(json.dumps(t).count("createOptimizationJob") for t in templates.values())
    assert jobs  # research optimizes
    problems = [
        str(finding)
        for name, template in templates.items()
        for finding in registry.findings(Stack(name, template), optimization_stopping_condition.ID)
    ]
    assert problems == []


def test_every_optimization_job_ends_before_the_gate_stops_polling(example_app):
    """The job's own bound (MaxRuntimeInSeconds) plus the time the gate allows it to wait for capacity fits inside
    the gate's polling (polls x wait); the gate stops a job still queued or running when its polls run out
    (StopOptimizationJob), which is what bounds pending time now that the job is sent no pending bound."""
    from optigate.deployment.optimization import OPTIMIZATION_MAX_PENDING_SECONDS
    from optigate.rehearse.template import placeholder_definition, state_machines

    jobs = 0
    for stack, template in example_app.templates.items():
        for logical in state_machines(template):
            states = placeholder_definition(template, logical)["States"]
            if "CreateOptimizationJob" not in states:
                continue
            jobs += 1
            bounds = states["CreateOptimizationJob"]["Parameters"]["StoppingCondition"]
            wait = states["WaitForOptimization"]["Seconds"]
            (limit,) = [
                rule["NumericGreaterThanEquals"]
                for rule in states["OptimizationDone?"]["Choices"]
                if "NumericGreaterThanEquals" in rule
            ]
            assert wait * limit > bounds["MaxRuntimeInSeconds"] + OPTIMIZATION_MAX_PENDING_SECONDS, stack
    assert jobs  # research optimizes


def test_the_role_an_optimization_job_runs_as_may_write_the_jobs_log_streams(example_app):
    """The job runs as the model role and logs like every SageMaker job; without the grant it cannot
    report why it failed. The stream is named after the job, as the gate formats the name."""
    from fnmatch import fnmatchcase

    from optigate import naming
    from optigate.rehearse.template import render_definition, render_value, state_machines

    def names(logical, attribute):
        return f"role:{logical}" if attribute == "Arn" else logical

    jobs = 0
    for stack, template in example_app.templates.items():
        for logical in state_machines(template):
            states = render_definition(template, logical, {"*": names})["States"]
            if "CreateOptimizationJob" not in states:
                continue
            jobs += 1
            role = states["CreateOptimizationJob"]["Parameters"]["RoleArn"].removeprefix("role:")
            _, environment, team = stack.split("-", 2)
            stream = (
                f"/aws/sagemaker/OptimizationJobs:log-stream:{naming.run_name(team, environment, 'opt', '3f9a0c7e')}"
            )
            writable = [
                render_value(resource, {"*": names})
                for policy in resources_of(template, "AWS::IAM::Policy").values()
                if {"Ref": role} in policy["Properties"]["Roles"]
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]
                if "logs:PutLogEvents" in statement["Action"]
                for resource in statement["Resource"]
            ]
            patterns = [r.split(":log-group:", 1)[1] for r in writable if ":log-group:" in r]
            assert any(fnmatchcase(f"{stream}/algo-1", pattern) for pattern in patterns), (stack, patterns)
    assert jobs


def test_the_gate_benchmarks_every_configured_concurrency_level_in_turn(example_app):
    from optigate.rehearse.template import render_definition as render
    from optigate.rehearse.template import state_machines

    template = example_app.templates["optigate-prod-chat"]
    gate_id = next(
        k for k, r in state_machines(template).items() if r["Properties"].get("StateMachineName", "").endswith("-gate")
    )
    definition = render(template, gate_id, {"*": lambda logical, attribute: logical})
    levels = definition["States"]["BenchmarkLevels"]["Result"]
    # chat's gate.benchmark.concurrency, one round of every level; 3 rounds (gate.benchmark.blocks' default)
    assert [item["per_shard"] for item in levels] == [1, 8, 32]
    each = definition["States"]["BenchmarkEachLevel"]
    assert each["MaxConcurrency"] == 1  # one level at a time
    assert each["ItemSelector"]["block.$"] == "$.rounds.done"  # the round is the block
    assert list(each["ItemProcessor"]["States"]) == ["BenchmarkBaseline", "BenchmarkCandidate"]
    more = definition["States"]["MoreRounds?"]["Choices"][0]
    assert (more["Variable"], more["NumericGreaterThanEquals"]) == ("$.rounds.done", 3)
    assert "JudgeRound" not in definition["States"]  # a fixed size is judged once, after its last round
    payload = definition["States"]["DecideVerdict"]["Parameters"]["Payload"]
    assert payload["thresholds"]["concurrency"] == [1, 8, 32]
    rounds = payload["rounds"]
    assert (rounds["per_shard"], rounds["done.$"], rounds["min_rounds"], rounds["max_rounds"]) == (
        [1, 8, 32],
        "$.rounds.done",
        3,
        3,
    )
    assert "baseline_keys.$" not in payload and "reason.$" not in rounds


def test_the_model_role_may_write_and_read_optimized_artifacts_only_where_a_job_runs(example_app):
    def statements(stack):
        template = example_app.templates[stack]
        return json.dumps(
            [
                s
                for r in resources_of(template, "AWS::IAM::Policy").values()
                for s in r["Properties"]["PolicyDocument"]["Statement"]
            ]
        )

    assert "/optimized/*" in statements("optigate-prod-research")
    assert "/optimized/*" in statements("optigate-prod-chat")  # its job trains the EAGLE head
    assert "/optimized/*" in statements("optigate-prod-support")  # its job quantizes the base to FP8


def test_the_model_role_reads_the_training_capture_and_no_other_capture(example_app):
    """The EAGLE job runs as the model role: it may read chat-prod's capture prefix (SSE-S3, no KMS grant for it)."""
    template = example_app.templates["optigate-prod-chat"]
    model = _only(template, "AWS::SageMaker::Model")
    role = model["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in statements if s["Action"] == "s3:GetObject" and "capture/chat-prod/*" in json.dumps(s)]
    assert len(reads) == 1
    lists = [s for s in statements if s["Action"] == "s3:ListBucket" and "capture/chat-prod/*" in json.dumps(s)]
    assert lists and lists[0]["Condition"] == {"StringLike": {"s3:prefix": ["capture/chat-prod/*"]}}


def test_chats_gate_counts_its_training_capture_before_anything_is_created(example_app):
    """Right after the proof check, a benchmark worker counts the readable chat records under the prefix the job
    gets (7,473 needed); the worker may read that prefix and nothing else of the capture bucket, with no KMS grant
    (chat's capture is SSE-S3)."""
    template = example_app.templates["optigate-prod-chat"]
    (machine,) = [
        r
        for r in resources_of(template, "AWS::StepFunctions::StateMachine").values()
        if r["Properties"].get("StateMachineName", "").endswith("-gate")
    ]
    separator, parts = machine["Properties"]["DefinitionString"]["Fn::Join"]
    states = json.loads(separator.join(p if isinstance(p, str) else "TOKEN" for p in parts))["States"]
    check = states["CheckTrainingData"]
    assert check["Parameters"]["Payload"] == {
        "training_data_check": {"source": "s3://TOKEN/capture/chat-prod/", "min_records": 7473}
    }
    assert states["ProvenBefore?"]["Default"] == "CheckTrainingData" and check["Next"] == "CreateOptimizationJob"
    (worker,) = [
        f
        for f in resources_of(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Description") == "optigate benchmark benchmark"
    ]
    assert json.dumps(check["Parameters"]["FunctionName"]) == '"TOKEN"'  # the worker's ARN (a token)
    role = worker["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    captures = [s for s in statements if "capture/" in json.dumps(s)]
    assert sorted(s["Action"] for s in captures) == ["s3:GetObject", "s3:ListBucket"]
    get, listing = sorted(captures, key=lambda s: s["Action"])
    assert json.dumps(get["Resource"]).endswith('"/capture/chat-prod/*"]]}')
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["capture/chat-prod/*"]}}
    assert not [s for s in statements if "kms:ViaService" in json.dumps(s)]


def test_gate_images_are_staged_with_everything_their_dockerfiles_copy(example_app):
    """No Docker at synth: the image contexts are only staged, from the installed package. Each holds
    every COPY source of its Dockerfile (so `cdk deploy` can build it) and nothing of the developer's
    machine or the offline rehearsal (optigate.rehearse)."""
    import re

    stack = "optigate-dev-chat"
    assets = json.loads((example_app.outdir / f"{stack}.assets.json").read_text())
    staged = [example_app.outdir / image["source"]["directory"] for image in assets["dockerImages"].values()]
    assert {image["source"]["dockerFile"] for image in assets["dockerImages"].values()} == {"Dockerfile"}
    images = {(folder / "Dockerfile").read_text().splitlines()[0]: folder for folder in staged}
    assert len(images) == 2  # the evaluation container and the decision Lambda, told apart by their first line
    for first_line, folder in images.items():
        sources = [
            line.split()[1] for line in (folder / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")
        ]
        assert sources and all((folder / source).exists() for source in sources), (first_line, sources)
        assert (folder / "optigate" / "__init__.py").exists() and not (folder / "optigate" / "rehearse").exists()
        assert (
            not (folder / ".venv").exists()
            and not (folder / "node_modules").exists()
            and not (folder / "tests").exists()
        )
        assert not list(folder.rglob("__pycache__"))
    decide_context = next(folder for line, folder in images.items() if "decision Lambda" in line)
    pins = (decide_context / "requirements.txt").read_text().splitlines()
    assert all(
        re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][^\s]*", line) for line in pins if line and not line.startswith("#")
    )
    decide = [
        r
        for r in resources_of(example_app.templates[stack], "AWS::Lambda::Function").values()
        if "decision" in r["Properties"].get("Description", "")
    ]
    assert [r["Properties"]["PackageType"] for r in decide] == ["Image"]


def test_traffic_to_any_component_wakes_an_endpoint_scaled_to_zero(example_app):
    """The scale-from-zero alarms watch NoCapacityInvocationFailures of every inference component of the
    stack (base and adapters), not only the base's."""
    woken = 0
    for stack, template in example_app.templates.items():
        components = {
            r["Properties"]["InferenceComponentName"]
            for r in resources_of(template, "AWS::SageMaker::InferenceComponent").values()
        }
        watched = {
            dimension["Value"]
            for alarm in resources_of(template, "AWS::CloudWatch::Alarm").values()
            for query in alarm["Properties"].get("Metrics", [])
            if query.get("MetricStat", {}).get("Metric", {}).get("MetricName") == "NoCapacityInvocationFailures"
            for dimension in query["MetricStat"]["Metric"]["Dimensions"]
        }
        scales_to_zero = any(
            r["Properties"].get("MinCapacity") == 0
            for r in resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        )
        if scales_to_zero:
            woken += 1
            assert watched == components, stack
    assert woken  # support scales to zero


def test_support_serves_its_adapters_on_one_instance_type_with_cached_spread_copies(example_app):
    """Adapter components are accepted only on an endpoint with one instance type (OG530): no InstancePools; the
    base component caches the model and image on each instance and spreads its copies over the zones."""
    template = example_app.templates["optigate-staging-support"]
    (variant,) = _only(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6e.12xlarge"
    assert "InstancePools" not in variant and "VariantInstanceProvisionTimeoutInSeconds" not in variant
    components = [r["Properties"] for r in resources_of(template, "AWS::SageMaker::InferenceComponent").values()]
    (base,) = [c["Specification"] for c in components if "ModelName" in c["Specification"]]
    assert base["DataCacheConfig"] == {"EnableCaching": True}
    assert base["SchedulingConfig"] == {
        "PlacementStrategy": "SPREAD",
        "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 1},
    }


def test_support_captures_its_traffic_where_the_environment_says(example_app):
    """prod's data_capture_percentage (5, KMS) reaches the adapter team's endpoint as the model-backed teams';
    dev and staging capture nothing for support."""
    prod = _only(example_app.templates["optigate-prod-support"], "AWS::SageMaker::EndpointConfig")
    assert prod["DataCaptureConfig"]["InitialSamplingPercentage"] == 5
    assert "KmsKeyId" in prod["DataCaptureConfig"]
    staging = _only(example_app.templates["optigate-staging-support"], "AWS::SageMaker::EndpointConfig")
    assert "DataCaptureConfig" not in staging
