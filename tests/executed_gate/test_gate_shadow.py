"""The gate with a shadow rollout: the candidate is benchmarked and evaluated on a temporary endpoint,
then mirrors live traffic as a shadow variant on the live endpoint, which is returned to the config
CloudFormation created on every path (executed in moto's Step Functions executor)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import REGION, GateHarness, active_harness
from optigate.rehearse.scenario import Outcome, Scenario
from tests.fixtures.once import once

# Every test here executes a gate (tens of seconds each): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

TRAFFIC = {
    "AllTraffic": {
        "Invocations": 1000,
        "Invocation5XXErrors": 0,
        "ModelLatency": [900_000 + 1000 * i for i in range(50)],
    },
    "GateCandidate": {
        "Invocations": 200,
        "Invocation5XXErrors": 0,
        "ModelLatency": [700_000 + 1000 * i for i in range(50)],
    },
}


def _shadow_scenario(**changes):
    changes.setdefault("on_processing_job", evaluation_writer("pass"))
    changes.setdefault("variant_traffic", TRAFFIC)
    return Scenario(**changes)


def _updates(harness_result):
    return [s for s in harness_result["states"] if s in ("PutShadowOnLiveEndpoint", "RestoreLiveEndpoint")]


#: What the live endpoint's production variant runs on during the shared run: autoscaling's scale-out, not the
#: config's InitialInstanceCount (1).
SCALED_OUT = 4


def _slow_restore(request):
    """UpdateEndpoint's outcome: the restore (to the CloudFormation config) stays Updating for three polls."""
    return (
        Outcome("InService", after=3)
        if "-shadow-" not in request["EndpointConfigName"]
        else Outcome("InService", after=1)
    )


def _shadow_approved(emulators, gate_templates, gate_handlers) -> dict[str, Any]:
    """The whole shadow gate on the happy path (approved), with two conditions the approval does not depend on: the
    live endpoint was scaled out to SCALED_OUT instances before the run, and the restore is an update in flight for
    three polls. The run's result, and the live variant's instance count afterwards."""
    scenario = _shadow_scenario(endpoint_update=_slow_restore)
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        run = GateRun(gate_templates["shadow"], harness)
        (variant,) = harness.sagemaker_backend().endpoints["chat-dev"].production_variants
        variant["CurrentInstanceCount"] = variant["DesiredInstanceCount"] = SCALED_OUT
        result = run.execute()
        (variant,) = harness.sagemaker_backend().endpoints["chat-dev"].production_variants
        return {"result": result, "live_instance_count": variant["CurrentInstanceCount"]}


@pytest.fixture(scope="module")
def _approved_once(request, tmp_path_factory) -> dict[str, Any]:
    """One executed run shared by the three tests that read different things of it (once a run, tests.fixtures.once;
    each of them ran its own gate before): the approval's path and report, the restore waiting out an update in
    flight, and the instance count autoscaling gave the live endpoint kept through both updates. None of them depends
    on what the others added to the run: neither the scale-out nor the slow restore changes the benchmark, the
    mirrored metrics or the verdict, and neither the count nor the restore's polling depends on the verdict."""

    def run():
        fixtures = ("emulators", "gate_templates", "gate_handlers")
        return _shadow_approved(*(request.getfixturevalue(name) for name in fixtures))

    return once(tmp_path_factory, "gate_shadow-approved", run)


@pytest.fixture
def approved(_approved_once) -> dict[str, Any]:
    """The shared run, a copy per test: what one test does to it cannot reach another."""
    return copy.deepcopy(_approved_once)


def test_shadow_mirrors_live_traffic_then_restores_the_cloudformation_config(approved, nothing_left):
    result = approved["result"]
    assert result["execution"]["status"] == "SUCCEEDED", result["execution"].get("cause")
    assert _updates(result) == ["PutShadowOnLiveEndpoint", "RestoreLiveEndpoint"]
    states = result["states"]
    # Benchmark and evaluation ran on the temporary endpoint, released before the shadow went live.
    assert (
        states.index("Evaluate")
        < states.index("ReleaseCandidateEndpoint")
        < states.index("PutShadowOnLiveEndpoint")
        < states.index("MirrorLiveTraffic")
        < states.index("ReadVariantMetrics")
        < states.index("RestoreLiveEndpoint")
        < states.index("DecideVerdict")
    )
    shadow = result["report"]["shadow"]
    assert shadow["shadow"]["invocations"] == 200 and shadow["production"]["invocations"] == 1000
    assert shadow["shadow"]["p99_model_latency_ms"] == pytest.approx(748.5, abs=0.6)  # p99 of 700..749 ms
    assert {c["name"]: c["passed"] for c in result["report"]["checks"] if c["name"].startswith("shadow")} == {
        "shadow_traffic": True,
        "shadow_error_rate": True,
    }
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    nothing_left(result)


def test_shadow_errors_reject_and_restore(emulators, run_gate, nothing_left):
    failing = {**TRAFFIC, "GateCandidate": {"Invocations": 200, "Invocation5XXErrors": 12, "ModelLatency": [700_000]}}
    result = run_gate(emulators, optimize="shadow", scenario=_shadow_scenario(variant_traffic=failing), short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "shadow_error_rate" in result["execution"]["cause"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    nothing_left(result)


def test_no_mirrored_traffic_fails_closed(emulators, run_gate, nothing_left):
    result = run_gate(
        emulators,
        optimize="shadow",
        scenario=_shadow_scenario(variant_traffic={"AllTraffic": TRAFFIC["AllTraffic"]}),
        short=True,
    )
    assert result["execution"]["status"] == "FAILED"
    traffic = next(c for c in result["report"]["checks"] if c["name"] == "shadow_traffic")
    assert traffic["passed"] is False and traffic["measured"] == 0
    nothing_left(result)


def test_shadow_update_rolled_back_fails_and_leaves_the_live_config(emulators, run_gate, nothing_left):
    def update(request):
        return (
            Outcome("RolledBack", after=1, failure_reason="shadow variant failed health check")
            if "-shadow-" in request["EndpointConfigName"]
            else Outcome("InService", after=1)
        )

    result = run_gate(emulators, optimize="shadow", scenario=_shadow_scenario(endpoint_update=update), short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "ShadowRolledBack" in result["execution"]["cause"]
    assert result["packages"] == []
    # SageMaker rolled back on its own: nothing to restore.
    assert _updates(result) == ["PutShadowOnLiveEndpoint"]
    nothing_left(result)


def test_a_crash_while_shadowing_still_restores(emulators, run_gate, nothing_left):
    result = run_gate(emulators, optimize="shadow", scenario=_shadow_scenario(), crash_decide=True, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "decide crashed" in result["execution"]["cause"]
    assert _updates(result) == ["PutShadowOnLiveEndpoint", "RestoreLiveEndpoint"]
    nothing_left(result)


def test_the_restore_waits_out_an_update_in_flight(approved, nothing_left):
    """The restore is an update like any other: it polls until the live endpoint is InService on
    its original config, within the poll bound (the shared run's restore is Updating for three polls)."""
    result = approved["result"]
    assert "LiveEndpointNotRestored" not in result["execution"].get("cause", "")
    assert result["states"].count("WaitForRestore") >= 3 and "LiveEndpointRestored" in result["states"]
    nothing_left(result)


def test_a_busy_live_endpoint_is_not_touched(emulators, gate_templates, gate_handlers):
    def busy(harness):
        endpoint = harness.sagemaker_backend().endpoints["chat-dev"]
        endpoint.endpoint_status = "Updating"

    scenario = _shadow_scenario(
        on_processing_job=lambda request: (evaluation_writer("pass")(request), busy(active_harness()))[0]
    )
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        result = GateRun(gate_templates["shadow"], harness, {"requests_per_stream": 4}).execute()
    assert result["execution"]["status"] == "FAILED"
    assert "LiveEndpointBusy" in result["execution"]["cause"]
    assert _updates(result) == []
    assert result["live"]["chat-dev"]["config"] == result["live"]["chat-dev"]["original_config"]


def test_the_shadow_and_the_restore_keep_the_count_autoscaling_gave_the_live_endpoint(approved):
    """A gate run during a scale-out: without RetainAllVariantProperties each UpdateEndpoint applies the
    config's InitialInstanceCount, and chat-dev would drop from 4 instances to 1 twice."""
    result = approved["result"]
    assert _updates(result) == ["PutShadowOnLiveEndpoint", "RestoreLiveEndpoint"]
    assert approved["live_instance_count"] == SCALED_OUT
    assert result["live"]["chat-dev"]["config"] == result["live"]["chat-dev"]["original_config"]
