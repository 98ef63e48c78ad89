"""The server's own metrics in the gate, only where the candidate's container publishes any (GatePlan.server_series,
from optigate.serving.surfaces): no LMI container does, so an LMI gate neither asks for detailed observability nor
reads anything; a plan whose container publishes them gets MetricsConfig on both temporary endpoint configs (valid
for botocore), a function of its own that reads them for the benchmark's window after the evaluation (least
privilege: the CloudWatch read actions QueryMetrics needs, which take no resource scope), and the decision's event
carries them; executed, the read reaches both sides and a missing series is missing, not a failed run."""

from __future__ import annotations

import json

import pytest

from optigate.rehearse.asl import iter_states
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_layout import DECIDE, gate_layout
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import ACCOUNT_ID, REGION, GateHarness
from optigate.rehearse.scenario import Scenario
from optigate.rehearse.template import render_definition
from optigate.serving import surfaces

#: What a container exporting vLLM's counters publishes (SageMaker's vLLM DLC's rows; no LMI family's).
SERIES = tuple(sorted(surfaces.server_series(surfaces.Container(surfaces.VLLM_DLC, (0, 11, 0)))))
SERVER_STATES = ("BenchmarkWindowStarts", "BenchmarkWindowEnds", "ReadServerMetrics")


@pytest.fixture(scope="module")
def reading(gate_synth, tmp_path_factory) -> dict:
    """The gate of a plan whose candidate's container publishes server series."""
    return gate_synth(False, tmp_path_factory.mktemp("gate-server-series"), server_series=SERIES)


def _definition(template):
    def generic(logical, attribute):
        return f"arn:aws:iam::{ACCOUNT_ID}:role/{logical}" if attribute else logical

    substitutions = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT_ID, "*": generic}
    return render_definition(template, gate_layout(template).gate, substitutions)


def _states(template) -> dict:
    return dict(iter_states(_definition(template)))


@pytest.mark.parametrize("variant", [True, False, "shadow"])
def test_an_lmi_gate_asks_for_no_server_metrics_and_reads_none(gate_templates, variant):
    """djl-serving serves no /metrics (optigate.serving.surfaces): detailed observability would scrape nothing of
    vLLM's, so the gate neither enables it on its endpoints nor runs a reader, and its decision gets no figures."""
    states = _states(gate_templates[variant])
    for name in ("CreateCandidateConfig", "CreateTwinConfig"):
        assert "MetricsConfig" not in states[name]["Parameters"], name
    assert not set(SERVER_STATES) & set(states)
    assert "server_metrics.$" not in states["DecideVerdict"]["Parameters"]["Payload"]
    resources = gate_templates[variant]["Resources"]
    assert not [k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function" and "ServerMetrics" in k]


def test_both_temporary_endpoint_configs_publish_the_servers_metrics(reading):
    states = _states(reading)
    for name in ("CreateCandidateConfig", "CreateTwinConfig"):
        assert states[name]["Parameters"]["MetricsConfig"] == {
            "EnableDetailedObservability": True,
            "MetricPublishFrequencyInSeconds": 10,
        }, name


def test_the_read_follows_the_evaluation_over_the_benchmarks_window_and_feeds_the_decision(reading):
    states = _states(reading)
    assert states["BenchmarkWindowStarts"]["Parameters"] == {"start.$": "$$.State.EnteredTime"}
    assert states["BenchmarkWindowStarts"]["Next"] == "BenchmarkLevels"
    assert states["BenchmarkWindowEnds"]["Parameters"] == {
        "start.$": "$.server_window.start",
        "end.$": "$$.State.EnteredTime",
    }
    assert states["Evaluate"]["Next"] == "ReadServerMetrics"
    read = states["ReadServerMetrics"]
    event = read["Parameters"]["Payload"]["server_metrics"]
    assert event["start.$"] == "$.server_window.start" and event["end.$"] == "$.server_window.end"
    assert set(event["sides"]) == {"baseline.$", "candidate.$"}
    assert "-twin-" in event["sides"]["baseline.$"] and "-cand-" in event["sides"]["candidate.$"]
    assert read["ResultPath"] == "$.server_metrics" and read.get("Catch")
    assert states["DecideVerdict"]["Parameters"]["Payload"]["server_metrics.$"] == "$.server_metrics"


def test_the_reader_may_read_metrics_and_nothing_more(reading):
    """Least privilege: the reading function's own role may read CloudWatch's metrics (on "*": no such action has a
    resource scope) and write its logs; no other role of the gate gains ListMetrics."""
    template = reading
    resources = template["Resources"]
    (function,) = [k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function" and "ServerMetrics" in k]
    role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    actions_of_role: dict[str, set[str]] = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for ref in resource["Properties"]["Roles"]:
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                actions_of_role.setdefault(ref["Ref"], set()).update(_listed(statement["Action"]))
                if "cloudwatch:ListMetrics" in _listed(statement["Action"]):
                    assert ref == {"Ref": role} and statement["Resource"] == "*"
    from optigate.bench.server_metrics import QUERY_ACTIONS

    assert actions_of_role[role] == {*QUERY_ACTIONS, "logs:CreateLogStream", "logs:PutLogEvents"}


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


@pytest.mark.slow
def test_executed_the_decision_receives_both_sides_each_figure_a_number_or_missing_with_why(reading, emulators):
    from optigate.bench.server_metrics import FIGURES
    from optigate.rehearse.gate_handlers import lambda_handlers

    received: list[dict] = []
    handlers = lambda_handlers(*emulators)
    real_decide = handlers[DECIDE]

    def recording(event, context):
        received.append(event)
        return real_decide(event, context)

    handlers[DECIDE] = recording
    scenario = Scenario(on_processing_job=evaluation_writer("pass"))
    with GateHarness(lambda_handlers=handlers, scenario=scenario, region=REGION) as harness:
        result = GateRun(reading, harness).execute()
    assert result["execution"]["status"] == "SUCCEEDED", json.dumps(result["report"], default=str)[:2000]
    (event,) = received
    figures = event["server_metrics"]
    assert "-twin-" in figures["baseline"]["endpoint"] and "-cand-" in figures["candidate"]["endpoint"]
    assert figures["candidate"]["end"] > figures["candidate"]["start"]
    for side in ("baseline", "candidate"):
        for figure in FIGURES:  # the emulated LMI containers publish none: CloudWatch's empty answer, with why
            value, why = figures[side][figure], figures[side]["missing"].get(figure)
            assert value is None and why, (side, figure, value, why)
