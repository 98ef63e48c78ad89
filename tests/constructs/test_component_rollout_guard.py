"""LoraAdapters' guarded roll-out: the base inference component's DeploymentConfig (rolling update, alarm
roll-back) and none on the adapter components, asserted on the template."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from optigate.constructs import AdapterSpec, LmiModel, LoraAdapters, VariantSettings
from optigate.constructs.lora_adapters import ComponentCompute
from optigate.deployment.component_rollout import ComponentRollout
from optigate.deployment.endpoint import EndpointScaling

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"
POOLS = (("ml.g6e.12xlarge", 1), ("ml.g6e.2xlarge", 2))
_DEFAULT = object()

#: A base component's scalable target as an endpoint plan gives it (optigate.deployment.endpoint.EndpointScaling).
COPIES = EndpointScaling("copies", 1, 1, target=4, scale_in_cooldown_seconds=300, scale_out_cooldown_seconds=60)


def _template(rollout=_DEFAULT, pools: tuple[tuple[str, int], ...] = ()) -> dict:
    stack = Stack(App(), "Test", env={"account": "111111111111", "region": "us-east-1"})
    model = LmiModel(
        stack, "Model", image_uri=IMAGE, environment={}, model_data_uri="s3://acme/m/", name_prefix="support-dev"
    )
    LoraAdapters(
        stack,
        "Adapters",
        model=model,
        variant=VariantSettings(instance_type="ml.g6e.12xlarge", instance_pools=pools),
        endpoint_name="support-dev",
        adapters=[AdapterSpec(name, f"s3://acme-adapters/{name}.tar.gz") for name in ("triage", "reply")],
        compute=ComponentCompute(accelerators=1, min_memory_mb=16384),
        scaling=replace(COPIES, min_capacity=0, max_capacity=4, scale_to_zero=True),
        **({} if rollout is _DEFAULT else {"rollout": rollout}),
    )
    return Template.from_stack(stack).to_json()


def _components(template: dict) -> dict[str, dict]:
    return {
        r["Properties"]["InferenceComponentName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    }


def _rollback_alarms(template: dict) -> dict[str, dict]:
    """Alarms by logical id, without the scale-from-zero alarm (which acts, and rolls nothing back)."""
    return {
        logical: r["Properties"]
        for logical, r in template["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "AlarmActions" not in r["Properties"]
    }


@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_base_rolls_out_in_capacity_batches_and_rolls_back_on_the_endpoints_alarms():
    rollout = ComponentRollout(batch_percent=20, wait_seconds=300, rollback_batch_percent=20, timeout_seconds=9000)
    template = _template(rollout)
    components = _components(template)
    config = components["support-dev-base"]["DeploymentConfig"]
    assert config["RollingUpdatePolicy"] == {
        "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 20},
        "WaitIntervalInSeconds": 300,
        "MaximumExecutionTimeoutInSeconds": 9000,
        "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 20},
    }
    alarms = _rollback_alarms(template)
    assert config["AutoRollbackConfiguration"]["Alarms"] == [{"AlarmName": {"Ref": logical}} for logical in alarms]
    # The blue/green roll-outs' alarms, 5XX errors and p99 ModelLatency, over every dimension set the user guide
    # lists for an endpoint's invocation metrics: the variant's and each inference component's (an endpoint hosting
    # components was seen publishing its invocations per component only), whichever is higher.
    variant = {"EndpointName": "support-dev", "VariantName": "AllTraffic"}
    per_component = [{"InferenceComponentName": f"support-dev-{name}"} for name in ("base", "triage", "reply")]
    for metric, statistic, combine in (("Invocation5XXErrors", "Sum", "SUM"), ("ModelLatency", "p99", "MAX")):
        (alarm,) = [a for a in alarms.values() if a["Metrics"][1]["MetricStat"]["Metric"]["MetricName"] == metric]
        read = {m["Id"]: m for m in alarm["Metrics"]}
        expression = next(m["Expression"] for m in alarm["Metrics"] if "Expression" in m)
        assert expression == f"IF(FILL(variant, 0) > {combine}(FILL([c0, c1, c2], 0)), FILL(variant, 0), " \
            f"{combine}(FILL([c0, c1, c2], 0)))"  # fmt: skip
        dimensions = {key: {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"]["Dimensions"]}
                      for key, m in read.items() if "MetricStat" in m}  # fmt: skip
        assert dimensions == {"variant": variant, **{f"c{i}": d for i, d in enumerate(per_component)}}
        assert {m["MetricStat"]["Stat"] for m in read.values() if "MetricStat" in m} == {statistic}
    # Adapters share the base's copies: nothing to batch, so no DeploymentConfig.
    assert all("DeploymentConfig" not in components[f"support-dev-{name}"] for name in ("triage", "reply"))


def test_components_past_what_one_alarm_may_read_get_another_pair_of_alarms():
    """An alarm reads at most 10 metrics: the variant and 9 components; the base and 11 adapters need two pairs."""
    from aws_cdk import aws_cloudwatch as cloudwatch

    from optigate.constructs.rollback_alarms import rollback_alarms, variant_metric

    stack = Stack(App(), "Test")
    names = [f"support-dev-a{i}" for i in range(12)]
    alarms = rollback_alarms(
        stack,
        "support-dev",
        VariantSettings(instance_type="ml.g6e.12xlarge"),
        lambda name, statistic: variant_metric("support-dev", "AllTraffic", name, statistic),
        max_5xx_per_minute=5,
        p99_model_latency_ms=2000,
        update="a rolling update",
        components=names,
    )
    assert len(alarms) == 4 and all(isinstance(a, cloudwatch.Alarm) for a in alarms)
    template = Template.from_stack(stack).to_json()
    read = [len(r["Properties"]["Metrics"]) for r in template["Resources"].values()]
    assert sorted(read) == [5, 5, 11, 11]  # the expression, the variant and 9 components; then the other 3


def test_the_default_is_a_guarded_roll_out_and_none_leaves_updates_unguarded():
    guarded = _components(_template())["support-dev-base"]["DeploymentConfig"]
    assert guarded["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 10}
    assert len(guarded["AutoRollbackConfiguration"]["Alarms"]) == 2
    unguarded = _template(None)
    assert "DeploymentConfig" not in _components(unguarded)["support-dev-base"]
    assert _rollback_alarms(unguarded) == {}


def test_without_auto_rollback_the_policy_stays_and_the_alarms_roll_nothing_back():
    template = _template(ComponentRollout(auto_rollback=False))
    config = _components(template)["support-dev-base"]["DeploymentConfig"]
    assert "RollingUpdatePolicy" in config and "AutoRollbackConfiguration" not in config


def test_an_adapter_endpoint_on_pools_is_refused_by_the_construct():
    """Adapter components need the singular Specification, "for an endpoint with a single instance type" (OG530)."""
    with pytest.raises(ValueError, match="OG530"):
        _template(pools=POOLS)


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_guarded_adapter_endpoint_passes_cfn_lint():
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(_template()), config=ManualArgs(regions=["us-east-1"]))
    assert [str(m) for m in matches if m.rule.id.startswith("E")] == []
