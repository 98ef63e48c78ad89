"""Adapter evaluation rules: the gate judges each adapter's quality on its own records, so each adapter has a dataset.

On an endpoint serving LoRA adapters through inference components the gate evaluates every adapter's component on
the baseline twin and on the candidate (optigate.evaluate.adapter_verdicts): the adapter's own
`adapters[i].evaluation.dataset_s3_uri`, else the team's `gate.evaluation.dataset_s3_uri`.
"""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import TeamConfig
from optigate.config.rule_registry import Found, Problem, rule_check

#: CreateProcessingJob (botocore 1.44): ContainerArguments 1-100 items, ProcessingInputs at most 10. The gate's job
#: takes 15 arguments of its own, 4 per evaluated component (the base's included) and a 5th for a component with its
#: own dataset, and one input per distinct dataset (optigate.constructs.evaluation_job).
MAX_ARGUMENTS, JOB_ARGUMENTS, PER_COMPONENT, MAX_INPUTS = 100, 15, 4, 10


def adapter_evaluation_problems(team: TeamConfig) -> list[Problem]:
    """Every adapter judged on a dataset when the gate has a candidate; an adapter's dataset only then; in the order
    they are reported, one rule function each: the job's size, then each adapter's two rules, adapter by adapter."""
    problems = adapters_one_evaluation_job(team)
    for index in range(len(team.adapters)):
        problems += adapter_dataset(team, index)
        problems += adapter_evaluation_needs_gate(team, index)
    return problems


@rule_check("OG440", "with a gate candidate, every adapter has an evaluation dataset")
def adapter_dataset(team: TeamConfig, index: int) -> Iterator[Found]:
    """When the gate has a candidate, adapter `index` has an evaluation dataset: its own
    (`adapters[i].evaluation.dataset_s3_uri`) or the team's (`gate.evaluation.dataset_s3_uri`), checked one adapter
    at a time.

    Why: the gate evaluates every adapter's component on the baseline twin and on the candidate, each on its own
    records (optigate.evaluate.adapter_verdicts), before anything is promoted; an adapter without a dataset could not
    be judged.
    """
    adapter = team.adapters[index]
    if team.gate.candidate and adapter.evaluation is None and team.gate.evaluation.dataset_s3_uri is None:
        yield (
            ("adapters", index),
            f"adapter {adapter.name} has no evaluation dataset: the gate judges each adapter's quality on "
            f"its own records before anything is promoted; set adapters[{index}].evaluation.dataset_s3_uri "
            "or gate.evaluation.dataset_s3_uri",
        )


@rule_check("OG441", "an adapter's evaluation dataset only with a gate candidate")
def adapter_evaluation_needs_gate(team: TeamConfig, index: int) -> Iterator[Found]:
    """Adapter `index` has its own evaluation dataset (`adapters[i].evaluation`) only when the gate has a candidate,
    checked one adapter at a time.

    Why: only the gate reads the dataset (it evaluates the adapter on the baseline twin and on the candidate), and a
    gate without a candidate evaluates nothing: the setting would have no effect.
    """
    adapter = team.adapters[index]
    if not team.gate.candidate and adapter.evaluation is not None:
        yield (
            ("adapters", index, "evaluation"),
            f"adapter {adapter.name}'s evaluation dataset is read only by the gate, and this team's gate has "
            f"no candidate: remove adapters[{index}].evaluation or give gate.candidate",
        )


@rule_check("OG442", "the adapters a gate evaluates fit one processing job's arguments and inputs")
def adapters_one_evaluation_job(team: TeamConfig) -> Iterator[Found]:
    """When the gate has a candidate, the base and the adapters it evaluates fit one processing job: at most
    100 container arguments and 10 inputs.

    Why: the gate evaluates the base and every adapter in one SageMaker processing job, whose CreateProcessingJob
    takes ContainerArguments of 1-100 items and at most 10 ProcessingInputs (botocore 1.44). The job takes 15
    arguments of its own, 4 per evaluated component (the base's included) and a 5th for a component with its own
    dataset, and one input per distinct dataset (optigate.constructs.evaluation_job).
    """
    if not team.gate.candidate or not team.adapters:
        return
    own = {adapter.evaluation.dataset_s3_uri for adapter in team.adapters if adapter.evaluation is not None}
    with_own = sum(adapter.evaluation is not None for adapter in team.adapters)
    arguments = JOB_ARGUMENTS + PER_COMPONENT * (len(team.adapters) + 1) + with_own
    inputs = 1 + len(own - {team.gate.evaluation.dataset_s3_uri})
    if arguments <= MAX_ARGUMENTS and inputs <= MAX_INPUTS:
        return
    yield (
        ("adapters",),
        f"the gate evaluates the base and each adapter in one processing job, which takes at most {MAX_ARGUMENTS} "
        f"arguments and {MAX_INPUTS} inputs (CreateProcessingJob); {len(team.adapters)} adapters need "
        f"{arguments} and {inputs}: share evaluation datasets between adapters, or split the adapters over teams",
    )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    adapter_dataset,
    adapter_evaluation_needs_gate,
    adapters_one_evaluation_job,
)
