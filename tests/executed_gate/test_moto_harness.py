"""The GateHarness runs real ASL on moto: Lambda in-process, SageMaker scripted, SNS and S3 from moto."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from optigate.rehearse.harness import ACCOUNT_ID, GateHarness
from optigate.rehearse.scenario import DEFAULT_IMAGE, Outcome, Scenario
from optigate.rehearse.validation import validate_request

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/sagemaker"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-lmi12.0.0-cu124"
SDK = "arn:aws:states:::aws-sdk:sagemaker:"
FN = f"arn:aws:lambda:us-east-1:{ACCOUNT_ID}:function:"


def lambda_task(function: str, next_state: str | None = None, **extra) -> dict:
    """What CDK's LambdaInvoke renders (payloadResponseOnly false), retries left out."""
    state = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": FN + function, "Payload.$": "$"},
        "ResultSelector": {"result.$": "$.Payload"},
        **extra,
    }
    return state | ({"Next": next_state} if next_state else {"End": True})


def sdk(action: str, params: dict, next_state: str | None = None, **extra) -> dict:
    state = {"Type": "Task", "Resource": SDK + action, "Parameters": params, **extra}
    return state | ({"Next": next_state} if next_state else {"End": True})


def poll(describe: str, params: dict, status_path: str, done: dict[str, str]) -> dict:
    """Describe -> Choice on status -> Wait 0 -> Describe ..., the shape of a CDK polling loop."""
    return {
        f"Describe{describe}": sdk(f"describe{describe}", params, f"Check{describe}", ResultPath=f"$.{describe}"),
        f"Check{describe}": {
            "Type": "Choice",
            "Choices": [
                {"Variable": f"$.{describe}.{status_path}", "StringEquals": status, "Next": target}
                for status, target in done.items()
            ],
            "Default": f"Wait{describe}",
        },
        f"Wait{describe}": {"Type": "Wait", "Seconds": 0, "Next": f"Describe{describe}"},
    }


def create_model_and_config(
    h: GateHarness, model: str = "m1", config: str = "c1", shadow_model: str | None = None
) -> None:
    sm = h.client("sagemaker")
    for name in filter(None, (model, shadow_model)):
        sm.create_model(
            ModelName=name,
            ExecutionRoleArn=ROLE,
            PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://models/{name}/"},
        )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": model,
        "InitialInstanceCount": 1,
        "InstanceType": "ml.g5.2xlarge",
    }
    kwargs = (
        {"ShadowProductionVariants": [{**variant, "VariantName": "Shadow", "ModelName": shadow_model}]}
        if shadow_model
        else {}
    )
    sm.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[variant], **kwargs)


# ------------------------------------------------------------------------------------------------ Lambda


def test_lambda_result_flows_to_next_state_in_both_resource_forms():
    calls = []

    def score(event, context):
        calls.append(context.function_name)
        return {"score": event["x"] * 2}

    definition = {
        "StartAt": "Score",
        "States": {
            "Score": lambda_task("score", "Direct", ResultPath="$.scored"),
            # payloadResponseOnly: the function ARN is the Resource and the payload is the output.
            "Direct": {
                "Type": "Task",
                "Resource": FN + "score",
                "Parameters": {"x.$": "$.scored.result.score"},
                "ResultPath": "$.again",
                "Next": "Pick",
            },
            "Pick": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.again.score", "NumericGreaterThan": 10, "Next": "High"}],
                "Default": "Low",
            },
            "High": {"Type": "Succeed"},
            "Low": {"Type": "Fail", "Error": "Low"},
        },
    }
    with GateHarness(lambda_handlers={"score": score}) as h:
        result = h.run(definition, {"x": 3})
        assert result["status"] == "SUCCEEDED", result
        assert result["output"] == {"x": 3, "scored": {"result": {"score": 6}}, "again": {"score": 12}}
        assert calls == ["score", "score"]
        assert h.states_entered(result["executionArn"]) == ["Score", "Direct", "Pick", "High"]


def test_handler_found_by_the_functions_configured_handler():
    with GateHarness(lambda_handlers={"app.handler": lambda event, context: {"seen": event}}) as h:
        iam = h.client("iam")
        role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        h.client("lambda").create_function(
            FunctionName="deployed-name-abc123",
            Runtime="python3.12",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": b"zip"},
        )
        result = h.run({"StartAt": "T", "States": {"T": lambda_task("deployed-name-abc123")}}, {"a": 1})
        assert result["output"] == {"result": {"seen": {"a": 1}}}


def test_lambda_exception_is_caught_then_cleanup_then_fail_with_error_and_cause():
    cleaned = []

    def evaluate(event, context):
        raise ValueError("candidate endpoint returned 500")

    def cleanup(event, context):
        cleaned.append(event)
        return {"cleaned": True}

    definition = {
        "StartAt": "Evaluate",
        "States": {
            "Evaluate": lambda_task(
                "evaluate",
                "Unreachable",
                Catch=[
                    {"ErrorEquals": ["Lambda.Unknown", "States.TaskFailed"], "ResultPath": "$.error", "Next": "Cleanup"}
                ],
            ),
            "Unreachable": {"Type": "Succeed"},
            "Cleanup": lambda_task("cleanup", "Failed", ResultPath="$.cleanup"),
            "Failed": {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
        },
    }
    with GateHarness(lambda_handlers={"evaluate": evaluate, "cleanup": cleanup}) as h:
        result = h.run(definition, {"candidate": "c1"})
        assert result["status"] == "FAILED"
        assert result["error"] == "ValueError"
        cause = json.loads(result["cause"])
        assert cause["errorType"] == "ValueError" and cause["errorMessage"] == "candidate endpoint returned 500"
        assert cleaned[0]["error"]["Error"] == "ValueError"
        assert h.states_entered(result["executionArn"]) == ["Evaluate", "Cleanup", "Failed"]


def test_unregistered_function_fails_like_a_missing_function():
    with GateHarness(lambda_handlers={}) as h:
        result = h.run({"StartAt": "T", "States": {"T": lambda_task("typo")}})
        assert result["status"] == "FAILED"
        assert result["error"] == "Lambda.ResourceNotFoundException"
        assert "no in-process handler" in result["cause"]


def test_unserializable_result_is_a_marshal_error():
    with GateHarness(lambda_handlers={"f": lambda event, context: {"s": {1, 2}}}) as h:
        result = h.run({"StartAt": "T", "States": {"T": lambda_task("f")}})
        assert (result["status"], result["error"]) == ("FAILED", "Runtime.MarshalError")


# --------------------------------------------------------------------------------------- optimization jobs

OPTIMIZATION_REQUEST = {
    "OptimizationJobName.$": "$.job",
    "RoleArn": ROLE,
    "ModelSource": {"S3": {"S3Uri": "s3://models/llama/", "ModelAccessConfig": {"AcceptEula": True}}},
    "DeploymentInstanceType": "ml.g5.2xlarge",
    "OptimizationConfigs": [
        {"ModelQuantizationConfig": {"Image": IMAGE, "OverrideEnvironment": {"OPTION_QUANTIZE": "awq"}}}
    ],
    "OutputConfig": {"S3OutputLocation": "s3://models/llama-awq/"},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


def optimization_machine() -> dict:
    return {
        "StartAt": "CreateOptimizationJob",
        "States": {
            "CreateOptimizationJob": sdk(
                "createOptimizationJob", OPTIMIZATION_REQUEST, "DescribeOptimizationJob", ResultPath="$.created"
            ),
            **poll(
                "OptimizationJob",
                {"OptimizationJobName.$": "$.job"},
                "OptimizationJobStatus",
                {"COMPLETED": "Optimized", "FAILED": "OptimizationFailed", "STOPPED": "OptimizationFailed"},
            ),
            "Optimized": {
                "Type": "Pass",
                "Parameters": {
                    "image.$": "$.OptimizationJob.OptimizationOutput.RecommendedInferenceImage",
                    "artifacts.$": "$.OptimizationJob.OutputConfig.S3OutputLocation",
                },
                "End": True,
            },
            "OptimizationFailed": {
                "Type": "Fail",
                "Error": "OptimizationFailed",
                "CausePath": "$.OptimizationJob.FailureReason",
            },
        },
    }


def test_optimization_job_polled_until_completed():
    with GateHarness(scenario=Scenario(optimization_job=Outcome("COMPLETED", after=3))) as h:
        result = h.run(optimization_machine(), {"job": "opt-1"})
        assert result["status"] == "SUCCEEDED", result
        assert result["output"] == {"image": DEFAULT_IMAGE, "artifacts": "s3://models/llama-awq/"}
        statuses = [
            h.client("sagemaker").describe_optimization_job(OptimizationJobName="opt-1")["OptimizationJobStatus"]
        ]
        assert statuses == ["COMPLETED"]
        describes = [a for a, _ in h.sagemaker.calls if a == "DescribeOptimizationJob"]
        assert len(describes) == 5  # 4 from the machine (3 in progress + 1 terminal), 1 from this test


def test_optimization_job_failure_and_status_sequence():
    with GateHarness(
        scenario=Scenario(optimization_job=Outcome("FAILED", after=2, failure_reason="ClientError: AWQ needs a GPU"))
    ) as h:
        sm = h.client("sagemaker")
        sm.create_optimization_job(
            **{k.removesuffix(".$"): ("direct" if k.endswith(".$") else v) for k, v in OPTIMIZATION_REQUEST.items()}
        )
        seen = [sm.describe_optimization_job(OptimizationJobName="direct")["OptimizationJobStatus"] for _ in range(4)]
        assert seen == ["STARTING", "INPROGRESS", "FAILED", "FAILED"]
        result = h.run(optimization_machine(), {"job": "opt-2"})
        assert (result["status"], result["error"], result["cause"]) == (
            "FAILED",
            "OptimizationFailed",
            "ClientError: AWQ needs a GPU",
        )


def test_optimization_job_that_never_finishes_times_out_and_can_be_stopped():
    with GateHarness(scenario=Scenario(optimization_job=Outcome.never())) as h:
        with pytest.raises(TimeoutError):
            h.run(optimization_machine(), {"job": "opt-3"}, timeout=0.5)
        sm = h.client("sagemaker")
        assert sm.describe_optimization_job(OptimizationJobName="opt-3")["OptimizationJobStatus"] == "INPROGRESS"
        assert h.live_sagemaker_resources()["optimization_jobs"] == ["opt-3"]
        sm.stop_optimization_job(OptimizationJobName="opt-3")
        assert [
            sm.describe_optimization_job(OptimizationJobName="opt-3")["OptimizationJobStatus"] for _ in range(2)
        ] == ["STOPPED", "STOPPED"]
        sm.delete_optimization_job(OptimizationJobName="opt-3")
        with pytest.raises(ClientError) as missing:
            sm.describe_optimization_job(OptimizationJobName="opt-3")
        assert missing.value.response["Error"]["Code"] == "ResourceNotFound"


# --------------------------------------------------------------------------------------- processing jobs


def processing_machine() -> dict:
    request = {
        "ProcessingJobName.$": "$.job",
        "RoleArn": ROLE,
        "AppSpecification": {
            "ImageUri": IMAGE,
            "ContainerEntrypoint": ["python3", "/opt/ml/processing/code/evaluate.py"],
        },
        "ProcessingInputs": [
            {
                "InputName": "code",
                "S3Input": {
                    "S3Uri": "s3://results/code/",
                    "LocalPath": "/opt/ml/processing/code",
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                },
            }
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "evaluation",
                    "S3Output": {
                        "S3Uri.$": "$.output",
                        "LocalPath": "/opt/ml/processing/output",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "Environment": {"PARALLELIZATION_FACTOR": "4"},
    }
    return {
        "StartAt": "Evaluate",
        "States": {
            "Evaluate": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sagemaker:createProcessingJob.sync",
                "Parameters": request,
                "ResultPath": "$.evaluation",
                "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.error", "Next": "EvaluationFailed"}],
                "Next": "ReadVerdict",
            },
            "ReadVerdict": lambda_task("read_verdict", None, ResultPath="$.verdict"),
            # moto refuses an ErrorPath that yields "States.*", so the error is named here.
            "EvaluationFailed": {"Type": "Fail", "Error": "EvaluationFailed", "CausePath": "$.error.Cause"},
        },
    }


def test_processing_job_sync_completes_and_the_hook_writes_the_verdict():
    def run_job(request):
        bucket, key = (
            request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"].removeprefix("s3://").split("/", 1)
        )
        h.client("s3").put_object(Bucket=bucket, Key=f"{key}/verdict.json", Body=json.dumps({"pass": True}))

    def read_verdict(event, context):
        bucket, key = event["output"].removeprefix("s3://").split("/", 1)
        return json.loads(h.client("s3").get_object(Bucket=bucket, Key=f"{key}/verdict.json")["Body"].read())

    scenario = Scenario(processing_job=Outcome("Completed", after=2), on_processing_job=run_job)
    with GateHarness(lambda_handlers={"read_verdict": read_verdict}, scenario=scenario) as h:
        h.client("s3").create_bucket(Bucket="results")
        result = h.run(processing_machine(), {"job": "eval-1", "output": "s3://results/eval-1"})
        assert result["status"] == "SUCCEEDED", result
        evaluation = result["output"]["evaluation"]
        assert evaluation["ProcessingJobStatus"] == "Completed"
        assert (
            evaluation["ProcessingResources"]["ClusterConfig"]["InstanceType"] == "ml.m5.xlarge"
        )  # moto drops it; the harness keeps it
        assert evaluation["Environment"] == {"PARALLELIZATION_FACTOR": "4"}
        assert result["output"]["verdict"] == {"result": {"pass": True}}
        assert list(h.s3_objects("results")) == ["eval-1/verdict.json"]


def test_processing_job_sync_failure_is_states_task_failed_with_the_describe_as_cause():
    with GateHarness(
        scenario=Scenario(processing_job=Outcome("Failed", after=1, failure_reason="AlgorithmError: OOM"))
    ) as h:
        result = h.run(processing_machine(), {"job": "eval-2", "output": "s3://results/eval-2"})
        assert (result["status"], result["error"]) == ("FAILED", "EvaluationFailed")
        failed = [
            e["taskFailedEventDetails"] for e in h.history(result["executionArn"]) if "taskFailedEventDetails" in e
        ]
        assert [(f["error"], f["resourceType"], f["resource"]) for f in failed] == [
            ("States.TaskFailed", "sagemaker", "createProcessingJob.sync")
        ]
        cause = json.loads(result["cause"])
        assert (cause["ProcessingJobStatus"], cause["FailureReason"]) == ("Failed", "AlgorithmError: OOM")


def test_processing_job_hook_raising_fails_the_job():
    def broken(request):
        raise RuntimeError("fmeval crashed")

    with GateHarness(scenario=Scenario(on_processing_job=broken)) as h:
        result = h.run(processing_machine(), {"job": "eval-3", "output": "s3://results/eval-3"})
        assert result["error"] == "EvaluationFailed"
        assert "fmeval crashed" in json.loads(result["cause"])["FailureReason"]
        assert len(h.hook_errors) == 1


# ------------------------------------------------------------------------------------------------- endpoints


def endpoint_machine() -> dict:
    return {
        "StartAt": "CreateEndpoint",
        "States": {
            "CreateEndpoint": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sagemaker:createEndpoint",
                "Parameters": {"EndpointName.$": "$.endpoint", "EndpointConfigName.$": "$.config"},
                "ResultPath": "$.created",
                "Next": "DescribeEndpoint",
            },
            **poll(
                "Endpoint",
                {"EndpointName.$": "$.endpoint"},
                "EndpointStatus",
                {"InService": "Ready", "Failed": "EndpointFailed"},
            ),
            "Ready": {
                "Type": "Pass",
                "Parameters": {"status.$": "$.Endpoint.EndpointStatus", "config.$": "$.Endpoint.EndpointConfigName"},
                "End": True,
            },
            "EndpointFailed": {"Type": "Fail", "Error": "EndpointFailed", "CausePath": "$.Endpoint.FailureReason"},
        },
    }


def test_create_endpoint_polls_to_in_service():
    with GateHarness(scenario=Scenario(endpoint=Outcome("InService", after=2))) as h:
        create_model_and_config(h)
        result = h.run(endpoint_machine(), {"endpoint": "e1", "config": "c1"})
        assert result["status"] == "SUCCEEDED", result
        assert result["output"] == {"status": "InService", "config": "c1"}
        assert result["output"] and h.states_entered(result["executionArn"]).count("WaitEndpoint") == 2
        assert h.sagemaker_resources()["endpoints"]["e1"] == {
            "status": "InService",
            "config": "c1",
            "failure_reason": None,
        }


def test_create_endpoint_polls_to_failed_and_the_endpoint_remains():
    scenario = Scenario(
        endpoint=lambda request: Outcome(
            "Failed", after=1, failure_reason=f"{request['EndpointName']}: health check failed"
        )
    )
    with GateHarness(scenario=scenario) as h:
        create_model_and_config(h)
        result = h.run(endpoint_machine(), {"endpoint": "e2", "config": "c1"})
        assert (result["status"], result["error"], result["cause"]) == (
            "FAILED",
            "EndpointFailed",
            "e2: health check failed",
        )
        assert h.live_sagemaker_resources()["endpoints"] == ["e2"]  # a Failed endpoint must still be deleted


def test_update_endpoint_switches_config_and_shadow_variants_are_kept():
    with GateHarness(
        scenario=Scenario(endpoint=Outcome("InService", after=0), endpoint_update=Outcome("InService", after=2))
    ) as h:
        create_model_and_config(h)
        create_model_and_config(h, model="candidate", config="c2", shadow_model="shadow")
        sm = h.client("sagemaker")
        assert [
            v["ModelName"] for v in sm.describe_endpoint_config(EndpointConfigName="c2")["ShadowProductionVariants"]
        ] == ["shadow"]
        sm.create_endpoint(EndpointName="e3", EndpointConfigName="c1")
        definition = {
            "StartAt": "UpdateEndpoint",
            "States": {
                "UpdateEndpoint": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sagemaker:updateEndpoint",
                    "Parameters": {"EndpointName": "e3", "EndpointConfigName": "c2"},
                    "ResultPath": "$.updated",
                    "Next": "DescribeEndpoint",
                },
                **poll("Endpoint", {"EndpointName": "e3"}, "EndpointStatus", {"InService": "Ready"}),
                "Ready": {
                    "Type": "Pass",
                    "Parameters": {
                        "config.$": "$.Endpoint.EndpointConfigName",
                        "shadow.$": "$.Endpoint.ShadowProductionVariants",
                    },
                    "End": True,
                },
            },
        }
        result = h.run(definition)
        assert result["status"] == "SUCCEEDED", result
        assert result["output"] == {
            "config": "c2",
            "shadow": [{"VariantName": "Shadow", "CurrentInstanceCount": 1, "DesiredInstanceCount": 1}],
        }
        assert h.sagemaker_resources()["endpoints"]["e3"]["config"] == "c2"
        # An endpoint that is not InService cannot be updated.
        h.scenario.endpoint_update = Outcome("InService", after=None)
        sm.update_endpoint(EndpointName="e3", EndpointConfigName="c1")
        described = sm.describe_endpoint(EndpointName="e3")
        assert (
            described["EndpointStatus"],
            described["EndpointConfigName"],
            described["PendingDeploymentSummary"]["EndpointConfigName"],
        ) == ("Updating", "c2", "c1")
        with pytest.raises(ClientError, match="Cannot update in-progress endpoint"):
            sm.update_endpoint(EndpointName="e3", EndpointConfigName="c1")


def test_inference_components_via_sdk():
    with GateHarness(
        scenario=Scenario(endpoint=Outcome("InService", after=0), inference_component=Outcome("InService", after=1))
    ) as h:
        sm = h.client("sagemaker")
        sm.create_model(ModelName="m1", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE})
        sm.create_endpoint_config(
            EndpointConfigName="ic",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[
                {"VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", "InitialInstanceCount": 1}
            ],
        )
        sm.create_endpoint(EndpointName="e4", EndpointConfigName="ic")
        definition = {
            "StartAt": "CreateInferenceComponent",
            "States": {
                "CreateInferenceComponent": sdk(
                    "createInferenceComponent",
                    {
                        "InferenceComponentName": "ic1",
                        "EndpointName": "e4",
                        "VariantName": "AllTraffic",
                        "Specification": {
                            "ModelName": "m1",
                            "ComputeResourceRequirements": {
                                "NumberOfAcceleratorDevicesRequired": 1,
                                "MinMemoryRequiredInMb": 1024,
                            },
                        },
                        "RuntimeConfig": {"CopyCount": 1},
                    },
                    "DescribeInferenceComponent",
                    ResultPath="$.created",
                ),
                **poll(
                    "InferenceComponent",
                    {"InferenceComponentName": "ic1"},
                    "InferenceComponentStatus",
                    {"InService": "Delete"},
                ),
                "Delete": sdk("deleteInferenceComponent", {"InferenceComponentName": "ic1"}),
            },
        }
        result = h.run(definition)
        assert result["status"] == "SUCCEEDED", result
        assert h.sagemaker_resources()["inference_components"] == {}


# ------------------------------------------------------------------------------ model packages, SNS, cleanup


def test_create_model_package_with_approval_status():
    definition = {
        "StartAt": "Register",
        "States": {
            "Register": sdk(
                "createModelPackage",
                {
                    "ModelPackageGroupName": "llama-gate",
                    "ModelPackageDescription": "awq candidate",
                    "ModelApprovalStatus.$": "$.approval",
                    "InferenceSpecification": {
                        "Containers": [{"Image": IMAGE, "ModelDataUrl": "s3://models/llama-awq/"}],
                        "SupportedContentTypes": ["application/json"],
                        "SupportedResponseMIMETypes": ["application/json"],
                    },
                },
                ResultSelector={"arn.$": "$.ModelPackageArn"},
            ),
        },
    }
    with GateHarness() as h:
        h.client("sagemaker").create_model_package_group(ModelPackageGroupName="llama-gate")
        approved = h.run(definition, {"approval": "Approved"})
        rejected = h.run(definition, {"approval": "Rejected"})
        assert approved["status"] == rejected["status"] == "SUCCEEDED"
        packages = h.model_packages("llama-gate")
        assert [(p["ModelPackageArn"], p["ModelApprovalStatus"]) for p in packages] == [
            (approved["output"]["arn"], "Approved"),
            (rejected["output"]["arn"], "Rejected"),
        ]
        bad = h.run(definition, {"approval": "Maybe"})  # not in the ModelApprovalStatus enum
        assert (bad["status"], bad["error"]) == ("FAILED", "SageMaker.SageMakerException")
        assert "Maybe" in bad["cause"] and h.rejected_requests[-1][1] == "CreateModelPackage"


def test_approving_a_pending_package_keeps_its_metadata():
    """A person approves an inconclusive verdict's package in the registry: its report and fingerprint
    stay (AWS adds and removes named keys; moto alone would drop the whole map)."""
    with GateHarness() as h:
        sagemaker = h.client("sagemaker")
        sagemaker.create_model_package_group(ModelPackageGroupName="llama-gate")
        arn = sagemaker.create_model_package(
            ModelPackageGroupName="llama-gate",
            ModelApprovalStatus="PendingManualApproval",
            CustomerMetadataProperties={"fingerprint": "f1", "report": "s3://r/report.json"},
            InferenceSpecification={
                "Containers": [{"Image": IMAGE}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json"],
            },
        )["ModelPackageArn"]
        sagemaker.update_model_package(ModelPackageArn=arn, ModelApprovalStatus="Approved")
        described = sagemaker.describe_model_package(ModelPackageName=arn)
        assert described["ModelApprovalStatus"] == "Approved"
        assert described["CustomerMetadataProperties"] == {"fingerprint": "f1", "report": "s3://r/report.json"}
        sagemaker.update_model_package(
            ModelPackageArn=arn,
            CustomerMetadataProperties={"fingerprint": "f2"},
            CustomerMetadataPropertiesToRemove=["report"],
        )
        assert sagemaker.describe_model_package(ModelPackageName=arn)["CustomerMetadataProperties"] == {
            "fingerprint": "f2"
        }


def test_sns_publish_is_recorded():
    with GateHarness() as h:
        topic = h.client("sns").create_topic(Name="gate-verdicts")["TopicArn"]
        definition = {
            "StartAt": "Notify",
            "States": {
                "Notify": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sns:publish",
                    "Parameters": {"TopicArn": topic, "Subject": "gate", "Message.$": "$"},
                    "End": True,
                }
            },
        }
        result = h.run(definition, {"verdict": "promote"})
        assert result["status"] == "SUCCEEDED", result
        assert [(m["Subject"], json.loads(m["Message"])) for m in h.sns_messages(topic)] == [
            ("gate", {"verdict": "promote"})
        ]


def cleanup_machine(delete_endpoint_resource: str) -> dict:
    return {
        "StartAt": "DeleteEndpoint",
        "States": {
            "DeleteEndpoint": {
                "Type": "Task",
                "Resource": delete_endpoint_resource,
                "Parameters": {"EndpointName.$": "$.endpoint"},
                "ResultPath": None,
                "Next": "DeleteEndpointConfig",
            },
            "DeleteEndpointConfig": sdk(
                "deleteEndpointConfig", {"EndpointConfigName.$": "$.config"}, "DeleteModel", ResultPath=None
            ),
            "DeleteModel": sdk("deleteModel", {"ModelName.$": "$.model"}, None, ResultPath=None),
        },
    }


def test_delete_cleanup_leaves_nothing_behind():
    with GateHarness(scenario=Scenario(endpoint=Outcome("Failed", after=0))) as h:
        create_model_and_config(h)
        h.client("sagemaker").create_endpoint(EndpointName="e5", EndpointConfigName="c1")
        assert h.live_sagemaker_resources()["endpoints"] == ["e5"]
        result = h.run(cleanup_machine(SDK + "deleteEndpoint"), {"endpoint": "e5", "config": "c1", "model": "m1"})
        assert result["status"] == "SUCCEEDED", result
        assert h.live_sagemaker_resources() == {
            "endpoints": [],
            "endpoint_configs": [],
            "models": [],
            "inference_components": [],
            "optimization_jobs": [],
        }
        # Deleting again: the SDK integration's error names match Step Functions'.
        again = h.run(cleanup_machine(SDK + "deleteEndpoint"), {"endpoint": "e5", "config": "c1", "model": "m1"})
        assert again["error"] == "SageMaker.SageMakerException" and "Could not find endpoint" in again["cause"]


def test_non_optimized_sagemaker_resource_is_refused_unless_lenient():
    definition = cleanup_machine("arn:aws:states:::sagemaker:deleteEndpoint")
    with GateHarness() as h:
        with pytest.raises(ClientError, match="aws-sdk:sagemaker:deleteEndpoint"):
            h.create_state_machine(definition)
        with pytest.raises(ClientError, match="waitForTaskToken"):
            h.create_state_machine(
                {
                    "StartAt": "T",
                    "States": {
                        "T": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::sagemaker:createEndpoint.waitForTaskToken",
                            "Parameters": {},
                            "End": True,
                        }
                    },
                }
            )
    with GateHarness(strict_integrations=False) as h:
        create_model_and_config(h)
        h.client("sagemaker").create_endpoint(EndpointName="e6", EndpointConfigName="c1")
        result = h.run(definition, {"endpoint": "e6", "config": "c1", "model": "m1"})
        assert result["status"] == "SUCCEEDED", result
        assert h.live_sagemaker_resources()["endpoints"] == []


def test_malformed_requests_fail_loudly():
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "m1",
        "InitialInstanceCount": "1",
        "InstanceType": "ml.g5.2xlarg",
    }
    definition = {
        "StartAt": "CreateEndpointConfig",
        "States": {
            "CreateEndpointConfig": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sagemaker:createEndpointConfig",
                "Parameters": {"EndpointConfigName": "c9", "ProductionVariants.$": "$.variants"},
                "End": True,
            }
        },
    }
    with GateHarness() as h:
        # Values only known at run time: the request is validated when it is made.
        result = h.run(definition, {"variants": [variant]})
        assert (result["status"], result["error"]) == ("FAILED", "SageMaker.AmazonSageMakerException")
        assert "ValidationException" in result["cause"]
        problem = h.rejected_requests[-1][2]
        assert "InitialInstanceCount" in problem and "ml.g5.2xlarg" in problem
        result = h.run(
            definition,
            {"variants": [{**variant, "InitialInstanceCount": 1, "InstanceType": "ml.g5.2xlarge", "Weight": 1}]},
        )
        assert result["status"] == "FAILED" and "Weight" in result["cause"]
        # Literal keys are checked when the state machine is created, as Step Functions does.
        definition["States"]["CreateEndpointConfig"]["Parameters"]["Tagz"] = []
        with pytest.raises(ValueError, match="'Tagz' is not supported"):
            h.create_state_machine(definition)
    assert validate_request("sagemaker", "DescribeEndpoint", {"EndpointName": "x"}) is None


def test_a_field_the_optimized_integration_does_not_take_is_refused_as_step_functions_refuses_it():
    """The optimized integration's own list of parameters (optigate/rehearse/data/sfn_optimized_sagemaker.json), not
    the API's: a literal field off it fails CreateStateMachine (InvalidDefinition, nested members too), one a path
    fills fails the Task (States.Runtime); the SDK integration takes the API's shape."""
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "m1",
        "InitialInstanceCount": 1,
        "InstanceType": "ml.g5.2xlarge",
    }

    def config(resource: str, parameters: dict) -> dict:
        task = {"Type": "Task", "Resource": resource, "Parameters": parameters, "End": True}
        return {"StartAt": "CreateCandidateConfig", "States": {"CreateCandidateConfig": task}}

    newer = {**variant, "ModelDataDownloadTimeoutInSeconds": 900}
    optimized = "arn:aws:states:::sagemaker:createEndpointConfig"
    with GateHarness() as h:
        create_model_and_config(h)
        for parameters, field in (
            ({"EndpointConfigName": "c2", "ProductionVariants": [variant], "MetricsConfig": {}}, "MetricsConfig"),
            ({"EndpointConfigName": "c2", "ProductionVariants": [newer]}, "ModelDataDownloadTimeoutInSeconds"),
        ):
            with pytest.raises(ClientError, match="InvalidDefinition") as refused:
                h.create_state_machine(config(optimized, parameters))
            said = str(refused.value)
            assert f'The field "{field}" is not supported by Step Functions at /States/CreateCandidateConfig' in said
            assert "use arn:aws:states:::aws-sdk:sagemaker:createEndpointConfig" in said
        filled = h.run(
            config(optimized, {"EndpointConfigName": "c3", "ProductionVariants.$": "$.variants"}), {"variants": [newer]}
        )
        assert (filled["status"], filled["error"]) == ("FAILED", "States.Runtime"), filled
        assert "ProductionVariants[0].ModelDataDownloadTimeoutInSeconds" in filled["cause"]
        assert [c["EndpointConfigName"] for c in h.client("sagemaker").list_endpoint_configs()["EndpointConfigs"]] == [
            "c1"
        ]
        sdk = h.run(config(SDK + "createEndpointConfig", {"EndpointConfigName": "c4", "ProductionVariants": [newer]}))
        assert sdk["status"] == "SUCCEEDED", sdk


# ------------------------------------------------------------------------------------------------ instance pools


@pytest.mark.parametrize(
    ("no_capacity", "landed"), [(frozenset(), "ml.g6e.2xlarge"), (frozenset({"ml.g6e.2xlarge"}), "ml.g6.2xlarge")]
)
def test_describe_endpoint_says_which_pool_the_instances_landed_on(no_capacity, landed):
    pools = [{"InstanceType": "ml.g6e.2xlarge", "Priority": 1}, {"InstanceType": "ml.g6.2xlarge", "Priority": 2}]
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "m1",
        "InitialInstanceCount": 2,
        "InstancePools": pools,
        "VariantInstanceProvisionTimeoutInSeconds": 900,
    }
    assert (
        validate_request(
            "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c1", "ProductionVariants": [variant]}
        )
        is None
    )
    with GateHarness(scenario=Scenario(no_capacity=no_capacity)) as h:
        sm = h.client("sagemaker")
        sm.create_model(
            ModelName="m1", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE, "ModelDataUrl": "s3://models/m1/"}
        )
        sm.create_endpoint_config(EndpointConfigName="c1", ProductionVariants=[variant])
        stored = sm.describe_endpoint_config(EndpointConfigName="c1")["ProductionVariants"][0]
        assert stored["InstancePools"] == pools and stored["VariantInstanceProvisionTimeoutInSeconds"] == 900
        sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
        summary = sm.describe_endpoint(EndpointName="e1")["ProductionVariants"][0]
    # botocore parsed it by ProductionVariantSummary.InstancePools (InstancePoolSummary: InstanceType,
    # CurrentInstanceCount, both required): members outside the shape would have been dropped.
    assert summary["InstancePools"] == [
        {"InstanceType": p["InstanceType"], "CurrentInstanceCount": 2 if p["InstanceType"] == landed else 0}
        for p in pools
    ]
    assert summary["CurrentInstanceCount"] == 2
