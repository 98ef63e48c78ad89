"""No unguarded optional reads (issue 13): a JSONPath that reads a member an AWS API may leave out of its
answer fails the state with States.Runtime, which no Catch handles. The template rule SFN-OptionalReadGuarded
(tests/template_rules/rules/sfn_optional_reads_guarded.py) walks each definition with botocore's output shapes;
these tests seed the mistakes it must report and the guards it must accept."""

from __future__ import annotations

from typing import Any

import pytest

from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.rules import sfn_optional_reads_guarded
from tests.template_rules.rules.sfn_optional_reads_guarded import Finding, unguarded_optional_reads

DESCRIBE_JOB = "arn:aws:states:::aws-sdk:sagemaker:describeOptimizationJob"


def _describe(next_state: str, **extra: Any) -> dict[str, Any]:
    state = {
        "Type": "Task",
        "Resource": DESCRIBE_JOB,
        "Parameters": {"OptimizationJobName": "job"},
        "ResultPath": "$.optimization",
        "Next": next_state,
    }
    return {**state, **extra}


def _report(*paths: str) -> dict[str, Any]:
    """A Pass that formats `paths` into a message, as OptimizationFailed does."""
    template = "States.Format('" + " ".join("{}" for _ in paths) + "', " + ", ".join(paths) + ")"
    return {"Type": "Pass", "ResultPath": "$.failure", "Parameters": {"Cause.$": template}, "End": True}


def _machine(states: dict[str, Any], start: str = "Describe") -> dict[str, Any]:
    return {"StartAt": start, "States": states}


def _reads(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.state, f.path) for f in findings]


def test_an_unguarded_read_of_an_optional_member_is_reported():
    """The seeded mistake: OptimizationFailed formats FailureReason, absent when the job was STOPPED."""
    findings = unguarded_optional_reads(
        _machine({"Describe": _describe("Report"), "Report": _report("$.optimization.FailureReason")})
    )
    assert _reads(findings) == [("Report", "$.optimization.FailureReason")]
    (finding,) = findings
    assert finding.where == "Parameters.Cause.$"
    assert "FailureReason is optional in DescribeOptimizationJobResponse" in finding.why


def test_a_result_selector_that_selects_an_optional_member_is_reported():
    """ResultSelector reads the raw answer: nothing can guard it (DescribeLastProof's mistake)."""
    selector = {"status.$": "$.OptimizationJobStatus", "reason.$": "$.FailureReason"}
    findings = unguarded_optional_reads(
        _machine({"Describe": _describe("Done", ResultSelector=selector), "Done": {"Type": "Succeed"}})
    )
    assert [(f.state, f.where, f.path) for f in findings] == [
        ("Describe", "ResultSelector.reason.$", "$.FailureReason")
    ]
    assert "optional" in findings[0].why


def test_the_same_read_behind_an_is_present_choice_passes():
    guard = {
        "Type": "Choice",
        "Choices": [{"Variable": "$.optimization.FailureReason", "IsPresent": True, "Next": "Report"}],
        "Default": "WithoutReason",
    }
    states = {
        "Describe": _describe("HasReason?"),
        "HasReason?": guard,
        "Report": _report("$.optimization.OptimizationJobStatus", "$.optimization.FailureReason"),
        "WithoutReason": _report("$.optimization.OptimizationJobStatus"),
    }
    assert unguarded_optional_reads(_machine(states)) == []

    # a guard that does not dominate the read: the Default reaches it too
    bypassed = {**states, "HasReason?": {**guard, "Default": "Report"}}
    assert _reads(unguarded_optional_reads(_machine(bypassed))) == [("Report", "$.optimization.FailureReason")]


def test_reads_of_required_members_pass():
    states = {
        "Describe": _describe("Report"),
        "Report": _report("$.optimization.OptimizationJobStatus", "$.optimization.OutputConfig.S3OutputLocation"),
    }
    assert unguarded_optional_reads(_machine(states)) == []


def test_optional_members_along_the_way_are_reported_each():
    """CandidateFromOptimization's read: OptimizationOutput and RecommendedInferenceImage are both optional."""
    path = "$.optimization.OptimizationOutput.RecommendedInferenceImage"
    candidate = {"Type": "Pass", "ResultPath": "$.candidate", "Parameters": {"image.$": path}, "End": True}
    findings = unguarded_optional_reads(_machine({"Describe": _describe("Candidate"), "Candidate": candidate}))
    assert _reads(findings) == [("Candidate", path)] * 2
    assert {f.why.split(": ", 1)[1] for f in findings} == {
        "OptimizationOutput is optional in DescribeOptimizationJobResponse (sagemaker DescribeOptimizationJob)",
        "RecommendedInferenceImage is optional in OptimizationOutput (sagemaker DescribeOptimizationJob)",
    }


def test_an_is_present_earlier_in_the_same_and_guards_the_comparison():
    reason = "$.optimization.FailureReason"
    present = {"Variable": reason, "IsPresent": True}
    compare = {"Variable": reason, "StringEquals": "capacity"}

    def choice(*parts: dict[str, Any]) -> dict[str, Any]:
        rule = {"And": list(parts), "Next": "Done"}
        return {"Type": "Choice", "Choices": [rule], "Default": "Done"}

    def findings(state: dict[str, Any]) -> list[Finding]:
        return unguarded_optional_reads(
            _machine({"Describe": _describe("Check"), "Check": state, "Done": {"Type": "Succeed"}})
        )

    assert findings(choice(present, compare)) == []
    (late,) = findings(choice(compare, present))  # the comparison runs first
    assert (late.state, late.where, late.path) == ("Check", "Choices[0].And[0].Variable", reason)
    # an earlier rule that failed on `IsPresent: false` guards the later rules and the Default
    absent_first = {
        "Type": "Choice",
        "Choices": [
            {"Variable": reason, "IsPresent": False, "Next": "Done"},
            {**compare, "Next": "Done"},
        ],
        "Default": "Report",
    }
    states = {"Describe": _describe("Check"), "Check": absent_first, "Done": {"Type": "Succeed"}}
    assert unguarded_optional_reads(_machine({**states, "Report": _report(reason)})) == []


def test_a_new_answer_forgets_the_guard_of_the_old_one():
    guard = {
        "Type": "Choice",
        "Choices": [{"Variable": "$.optimization.FailureReason", "IsPresent": True, "Next": "DescribeAgain"}],
        "Default": "Done",
    }
    states = {
        "Describe": _describe("HasReason?"),
        "HasReason?": guard,
        "DescribeAgain": _describe("Report"),
        "Report": _report("$.optimization.FailureReason"),
        "Done": {"Type": "Succeed"},
    }
    assert _reads(unguarded_optional_reads(_machine(states))) == [("Report", "$.optimization.FailureReason")]


def test_lambda_payload_is_opaque_but_the_invoke_answer_is_checked():
    invoke = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "decide", "Payload.$": "$"},
        "ResultPath": "$.decision",
        "Next": "Use",
    }
    use = {
        "Type": "Pass",
        "Parameters": {"summary.$": "$.decision.Payload.summary", "error.$": "$.decision.FunctionError"},
        "End": True,
    }
    findings = unguarded_optional_reads(_machine({"Invoke": invoke, "Use": use}, start="Invoke"))
    assert _reads(findings) == [("Use", "$.decision.FunctionError")]


def test_sync_integrations_answer_with_the_describe_call():
    job = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sagemaker:createProcessingJob.sync",
        "Parameters": {"ProcessingJobName": "job"},
        "ResultSelector": {"status.$": "$.ProcessingJobStatus", "exit.$": "$.ExitMessage"},
        "Next": "Child",
    }
    child = {  # DescribeExecution's output is set whenever the child succeeded, the only way .sync succeeds
        "Type": "Task",
        "Resource": "arn:aws:states:::states:startExecution.sync:2",
        "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:111111111111:stateMachine:child"},
        "ResultSelector": {"key.$": "$.Output.key", "error.$": "$.Error"},
        "End": True,
    }
    findings = unguarded_optional_reads(_machine({"Job": job, "Child": child}, start="Job"))
    assert [(f.state, f.path) for f in findings] == [("Child", "$.Error"), ("Job", "$.ExitMessage")]
    assert "DescribeProcessingJobResponse" in findings[1].why


def test_an_index_into_a_selected_list_needs_a_guard():
    """FindLastProof selects the ARNs of at most one package: `[0]` exists only behind ProvenBefore?."""
    listing = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:sagemaker:listModelPackages",
        "Parameters": {"ModelPackageGroupName": "group"},
        "ResultSelector": {"arns.$": "$.ModelPackageSummaryList[*].ModelPackageArn"},
        "ResultPath": "$.last",
        "Next": "Proven?",
    }
    proven = {
        "Type": "Choice",
        "Choices": [{"Variable": "$.last.arns[0]", "IsPresent": True, "Next": "Use"}],
        "Default": "Done",
    }
    use = {"Type": "Pass", "Parameters": {"arn.$": "$.last.arns[0]"}, "Next": "Done"}
    states = {"List": listing, "Proven?": proven, "Use": use, "Done": {"Type": "Succeed"}}
    assert unguarded_optional_reads(_machine(states, start="List")) == []
    unguarded = {**states, "List": {**listing, "Next": "Use"}}
    assert _reads(unguarded_optional_reads(_machine(unguarded, start="List"))) == [("Use", "$.last.arns[0]")]


# --------------------------------------------------------------------------- the synthesized templates


def _definitions(templates: dict[str, dict]) -> dict[str, dict]:
    """`stack/logical id` -> definition, for every state machine of every template."""
    from optigate.rehearse.template import placeholder_definition, state_machines

    return {
        f"{stack}/{logical}": placeholder_definition(template, logical)
        for stack, template in templates.items()
        for logical in state_machines(template)
    }


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_a_bypassed_guard_of_a_real_gate_is_reported(example_app):
    """The check is live on the synthesized definitions: route each Choice's Default around a rule that
    tests `IsPresent: true` and the states behind it read unguarded; some of them must be reported."""
    import copy

    from optigate.rehearse.asl import iter_states

    definitions = _definitions(example_app.templates)
    caught = set()
    for label, definition in definitions.items():
        baseline = set(unguarded_optional_reads(definition))
        for name, state in iter_states(definition):
            for rule in state.get("Choices", []):
                if rule.get("IsPresent") is not True:
                    continue
                mutated = copy.deepcopy(definition)
                choice = next(s for n, s in iter_states(mutated) if n == name)
                choice["Default"] = rule["Next"]
                new = set(unguarded_optional_reads(mutated)) - baseline
                if any(f.path.startswith(rule["Variable"]) or rule["Variable"] in f.path for f in new):
                    caught.add((label.split("/")[0], name, rule["Variable"]))
    guarded = {variable for _, _, variable in caught}
    assert {"$.endpoint.FailureReason", "$.last.arns[0]"} <= guarded, sorted(caught)


@pytest.fixture(scope="module")
def pipeline_stages(stage_templates) -> dict[str, dict]:
    """Every stack of every stage of the promotion pipeline (the pipeline stack itself has no state machine)."""
    return stage_templates


def _report_all(templates: dict[str, dict]) -> list[str]:
    """The rule's findings over every state machine of every template, through the rule pack."""
    rule = sfn_optional_reads_guarded.ID
    return [
        str(finding)
        for name, template in templates.items()
        for finding in registry.findings(Stack(name, template), rule)
    ]


def test_no_state_machine_of_the_example_app_reads_an_optional_member_unguarded(example_app):
    definitions = _definitions(example_app.templates)
    assert len(definitions) >= len(example_app.templates)  # gates and benchmark fleets
    problems = _report_all(example_app.templates)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_no_state_machine_of_the_pipeline_stages_reads_an_optional_member_unguarded(pipeline_stages):
    definitions = _definitions(pipeline_stages)
    assert definitions
    problems = _report_all(pipeline_stages)
    assert not problems, "\n".join(problems)
