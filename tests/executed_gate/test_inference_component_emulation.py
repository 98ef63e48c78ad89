"""The emulated inference components: each operation's answer checked against botocore's output shape, the
refusals AWS documents, rolling updates that apply or roll back, invocation refusals and per-component CloudWatch."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.exceptions import ClientError

from optigate.rehearse.harness import ACCOUNT_ID, GateHarness
from optigate.rehearse.scenario import Outcome, Scenario
from optigate.rehearse.validation import response_errors

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/sagemaker"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-lmi12.0.0-cu124"
NEW_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"
DEPLOYMENT = {
    "RollingUpdatePolicy": {
        "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
        "WaitIntervalInSeconds": 60,
        "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
    },
    "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "support-p99-latency"}]},
}


_HARNESS: list[GateHarness] = []  # the test's harness, for _describe


def _harness(**scenario) -> GateHarness:
    harness = GateHarness(scenario=Scenario(endpoint=Outcome("InService", after=0), **scenario))
    _HARNESS[:] = [harness]
    return harness


def _component_endpoint(sm, name: str = "support", instance_type: str = "ml.g5.12xlarge") -> None:
    """An endpoint whose variant has no model (inference components only), and the base's model."""
    sm.create_model(ModelName=f"{name}-base", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE})
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ExecutionRoleArn=ROLE,
        ProductionVariants=[{"VariantName": "AllTraffic", "InstanceType": instance_type, "InitialInstanceCount": 1}],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def _base(sm, name: str = "support-base", endpoint: str = "support", accelerators: int = 4, **spec) -> None:
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={
            "ModelName": f"{endpoint}-base",
            "Container": {"Image": IMAGE, "Environment": {"OPTION_MAX_LORAS": "2"}},
            "StartupParameters": {"ModelDataDownloadTimeoutInSeconds": 600},
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": accelerators,
                "MinMemoryRequiredInMb": 4096,
            },
            **spec,
        },
        RuntimeConfig={"CopyCount": 1},
    )


def _adapter(sm, name: str, base: str = "support-base", endpoint: str = "support", **spec) -> None:
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        Specification={
            "BaseInferenceComponentName": base,
            "Container": {"ArtifactUrl": f"s3://acme-adapters/{name}.tar.gz"},
            **spec,
        },
    )


def _describe(sm, name: str) -> dict:
    """DescribeInferenceComponent through boto3, and the emulator's own answer checked against botocore's output
    shape (boto3's parser drops members the API does not have, so only the raw answer shows them)."""
    described = sm.describe_inference_component(InferenceComponentName=name)
    described.pop("ResponseMetadata")
    emulator = _HARNESS[0].sagemaker
    raw = emulator.described(emulator.region_state(_HARNESS[0].sagemaker_backend()).inference_components[name])
    assert response_errors("sagemaker", "DescribeInferenceComponent", raw) == []
    assert response_errors("sagemaker", "DescribeInferenceComponent", described) == []
    return described


# --------------------------------------------------------------------------- create and describe


def test_describe_reports_the_summary_shapes_the_api_has():
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm, DataCacheConfig={"EnableCaching": True})
        _adapter(sm, "support-reply")
        base, adapter = _describe(sm, "support-base"), _describe(sm, "support-reply")
    spec = base["Specification"]
    # The image as deployed (DeployedImage), not the request's Container.Image; the rest echoed as sent.
    assert spec["Container"]["DeployedImage"]["SpecifiedImage"] == IMAGE
    assert spec["Container"]["DeployedImage"]["ResolvedImage"].startswith(IMAGE.split(":")[0] + "@sha256:")
    assert "Image" not in spec["Container"] and spec["Container"]["Environment"] == {"OPTION_MAX_LORAS": "2"}
    assert spec["ModelName"] == "support-base" and spec["DataCacheConfig"] == {"EnableCaching": True}
    assert spec["StartupParameters"] == {"ModelDataDownloadTimeoutInSeconds": 600}
    assert spec["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 4
    assert base["RuntimeConfig"] == {"DesiredCopyCount": 1, "CurrentCopyCount": 1}
    assert base["InferenceComponentStatus"] == "InService" and "Specifications" not in base
    assert adapter["Specification"] == {
        "BaseInferenceComponentName": "support-base",
        "Container": {"ArtifactUrl": "s3://acme-adapters/support-reply.tar.gz"},
    }
    assert adapter["VariantName"] == "AllTraffic" and "RuntimeConfig" not in adapter


def test_specifications_are_described_as_a_list_of_summaries():
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        sm.create_inference_component(
            InferenceComponentName="pooled",
            EndpointName="support",
            VariantName="AllTraffic",
            Specifications=[
                {
                    "InstanceType": "ml.g5.12xlarge",
                    "ModelName": "support-base",
                    "ComputeResourceRequirements": {
                        "NumberOfAcceleratorDevicesRequired": 1,
                        "MinMemoryRequiredInMb": 1024,
                    },
                }
            ],
            RuntimeConfig={"CopyCount": 2},
        )
        described = _describe(sm, "pooled")
    assert "Specification" not in described
    assert [s["InstanceType"] for s in described["Specifications"]] == ["ml.g5.12xlarge"]
    assert described["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}


def test_a_component_is_creating_until_the_scenario_says_and_lists_with_its_variant():
    # Two looks in progress: a Describe and a List both see it Creating (status moves on whoever looks, as the
    # gate's waits list components), the next look sees it InService.
    with _harness(inference_component=Outcome("InService", after=2)) as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        creating = _describe(sm, "support-base")
        listed = sm.list_inference_components(EndpointNameEquals="support", StatusEquals="Creating")
        in_service = _describe(sm, "support-base")
        listed.pop("ResponseMetadata")
        raw_listed = h.sagemaker.handle(h.sagemaker_backend(), "ListInferenceComponents", {})
    assert (creating["InferenceComponentStatus"], creating["RuntimeConfig"]["CurrentCopyCount"]) == ("Creating", 0)
    assert (in_service["InferenceComponentStatus"], in_service["RuntimeConfig"]["CurrentCopyCount"]) == ("InService", 1)
    assert response_errors("sagemaker", "ListInferenceComponents", raw_listed) == []
    assert response_errors("sagemaker", "ListInferenceComponents", listed) == []
    assert [(c["InferenceComponentName"], c["VariantName"]) for c in listed["InferenceComponents"]] == [
        ("support-base", "AllTraffic")
    ]


@pytest.mark.parametrize(
    ("create", "message"),
    [
        # A variant that serves a model takes no components (pulumi/pulumi-aws#4940).
        (lambda sm: _base(sm, "plain-ic", endpoint="plain"), "Inference Components are not supported"),
        # The base must exist before its adapter (API reference, BaseInferenceComponentName).
        (lambda sm: _adapter(sm, "support-reply", base="nope"), "Could not find inference component"),
        (lambda sm: _base(sm), "Cannot create already existing inference component"),
        # An adapter uses its base's compute: ComputeResourceRequirements is omitted (API reference).
        (
            lambda sm: _adapter(
                sm,
                "support-reply",
                ComputeResourceRequirements={"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
            ),
            "must be omitted for an adapter",
        ),
        # Specification or Specifications, not both (API reference).
        (
            lambda sm: sm.create_inference_component(
                InferenceComponentName="both",
                EndpointName="support",
                Specification={"ModelName": "support-base"},
                Specifications=[{"ModelName": "support-base"}],
            ),
            "not both",
        ),
        (lambda sm: _adapter(sm, "other-reply", base="other-base", endpoint="support"), 'not "support"'),
    ],
)
def test_documented_refusals(create, message):
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        _component_endpoint(sm, "other")
        _base(sm, "other-base", endpoint="other")
        sm.create_model(ModelName="plain-base", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE})
        variant = {"VariantName": "AllTraffic", "ModelName": "plain-base", "InstanceType": "ml.g5.2xlarge"}
        sm.create_endpoint_config(
            EndpointConfigName="plain", ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
        )
        sm.create_endpoint(EndpointName="plain", EndpointConfigName="plain")
        before = sorted(h.sagemaker_resources()["inference_components"])
        with pytest.raises(ClientError, match=message) as refused:
            create(sm)
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert sorted(h.sagemaker_resources()["inference_components"]) == before


def test_a_copy_needing_more_accelerators_than_the_instance_has_fails():
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm, instance_type="ml.g5.2xlarge")  # one A10G
        _base(sm, accelerators=4)
        described = _describe(sm, "support-base")
    assert described["InferenceComponentStatus"] == "Failed"
    assert "requires 4 accelerator devices" in described["FailureReason"]
    assert described["RuntimeConfig"]["CurrentCopyCount"] == 0


# --------------------------------------------------------------------------- update, roll-back, delete


def _update_image(sm, image: str = NEW_IMAGE) -> None:
    sm.update_inference_component(
        InferenceComponentName="support-base",
        Specification={
            "ModelName": "support-base",
            "Container": {"Image": image},
            "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 4, "MinMemoryRequiredInMb": 4096},
        },
        RuntimeConfig={"CopyCount": 2},
        DeploymentConfig=DEPLOYMENT,
    )


def _image(described: dict) -> str:
    return described["Specification"]["Container"]["DeployedImage"]["SpecifiedImage"]


def test_a_rolling_update_is_updating_then_serves_the_new_specification():
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        _update_image(sm)
        updating = _describe(sm, "support-base")
        with pytest.raises(ClientError, match="while it is Updating"):
            _update_image(sm)
        done = _describe(sm, "support-base")
    assert (updating["InferenceComponentStatus"], _image(updating)) == ("Updating", IMAGE)
    assert (done["InferenceComponentStatus"], _image(done)) == ("InService", NEW_IMAGE)
    assert done["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}
    assert done["LastDeploymentConfig"] == DEPLOYMENT and "FailureReason" not in done


@pytest.mark.parametrize("cause", ["scenario", "alarm"])
def test_a_rolled_back_update_serves_the_previous_specification(cause):
    scenario = {"inference_component_update": Outcome("RolledBack", after=1)} if cause == "scenario" else {}
    with _harness(**scenario) as h:
        sm, cloudwatch = h.client("sagemaker"), h.client("cloudwatch")
        _component_endpoint(sm)
        _base(sm)
        cloudwatch.put_metric_alarm(
            AlarmName="support-p99-latency",
            Namespace="AWS/SageMaker",
            MetricName="ModelLatency",
            Statistic="Average",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1.0,
            ComparisonOperator="GreaterThanThreshold",
        )
        if cause == "alarm":
            cloudwatch.set_alarm_state(AlarmName="support-p99-latency", StateValue="ALARM", StateReason="p99 high")
        _update_image(sm)
        _describe(sm, "support-base")  # Updating
        rolled_back = _describe(sm, "support-base")
    assert (rolled_back["InferenceComponentStatus"], _image(rolled_back)) == ("InService", IMAGE)
    assert rolled_back["RuntimeConfig"] == {"DesiredCopyCount": 1, "CurrentCopyCount": 1}
    assert rolled_back["LastDeploymentConfig"] == DEPLOYMENT
    assert "rolled back" in rolled_back["FailureReason"]
    if cause == "alarm":
        assert "support-p99-latency" in rolled_back["FailureReason"]


def test_a_failed_update_reports_its_reason_and_keeps_the_deployed_specification():
    with _harness(inference_component_update=Outcome("Failed", after=0, failure_reason="image pull failed")) as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        _update_image(sm)
        failed = _describe(sm, "support-base")
    assert (failed["InferenceComponentStatus"], failed["FailureReason"]) == ("Failed", "image pull failed")
    assert _image(failed) == IMAGE


def test_runtime_config_update_and_delete():
    with _harness() as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        _adapter(sm, "support-reply")
        sm.update_inference_component_runtime_config(
            InferenceComponentName="support-base", DesiredRuntimeConfig={"CopyCount": 3}
        )
        scaled = _describe(sm, "support-base")["RuntimeConfig"]
        # AWS documents no refusal for deleting a base that still has adapters: the emulator deletes it.
        sm.delete_inference_component(InferenceComponentName="support-base")
        left = sorted(h.sagemaker_resources()["inference_components"])
        with pytest.raises(ClientError, match="Could not find inference component"):
            sm.delete_inference_component(InferenceComponentName="support-base")
    assert scaled == {"DesiredCopyCount": 3, "CurrentCopyCount": 3}
    assert left == ["support-reply"]


# --------------------------------------------------------------------------- invocation and CloudWatch


def test_invocation_refusals_follow_the_components_state():
    with _harness(inference_component=Outcome("InService", after=1)) as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        refuse = h.sagemaker.refuse_invocation
        creating = refuse("support", "support-base")
        _describe(sm, "support-base")  # Creating -> InService on the next Describe
        _describe(sm, "support-base")
        served = refuse("support", "support-base")
        no_header, unknown, no_endpoint = refuse("support", None), refuse("support", "nope"), refuse("gone", None)
    assert creating is not None and "not in service (Creating)" in creating.message
    assert served is None
    assert no_header is not None and no_header.message.startswith("Inference Component Name header is required")
    assert unknown is not None and unknown.code == "ValidationError"
    assert no_endpoint is not None and "Endpoint gone of account" in no_endpoint.message


def test_component_invocations_are_read_per_inference_component():
    traffic = {"support-base": {"Invocations": 30}, "support-reply": {"Invocations": 10}, "idle": {"Invocations": 5}}
    with _harness(component_traffic=traffic) as h:
        sm = h.client("sagemaker")
        _component_endpoint(sm)
        _base(sm)
        _adapter(sm, "support-reply")
        end = dt.datetime.now(dt.UTC)
        queries = [
            {
                "Id": f"m{index}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SageMaker",
                        "MetricName": "Invocations",
                        "Dimensions": [{"Name": "InferenceComponentName", "Value": name}],
                    },
                    "Period": 7 * 24 * 3600,
                    "Stat": "Sum",
                },
            }
            for index, name in enumerate(("support-base", "support-reply", "idle"))
        ]
        # The SDK client a state machine's Task uses (the harness publishes the scenario's traffic before its read).
        from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

        from optigate.rehearse.patches import validating_client_for

        client = validating_client_for(boto_client_for)(region=h.region, service="cloudwatch")
        result = client.get_metric_data(
            MetricDataQueries=queries, StartTime=end - dt.timedelta(days=7), EndTime=end, ScanBy="TimestampAscending"
        )
    sums = {r["Id"]: sum(r["Values"]) for r in result["MetricDataResults"]}
    # Components that exist and serve publish their traffic; "idle" is in the scenario but not on an endpoint.
    assert sums == {"m0": 30.0, "m1": 10.0, "m2": 0.0}
