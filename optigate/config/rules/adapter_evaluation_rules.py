"""Adapter evaluation rules: the gate judges each adapter's quality on its own records, so each adapter has a dataset.

On an endpoint serving LoRA adapters through inference components the gate evaluates every adapter's component on
the baseline twin and on the candidate (optigate.evaluate.adapter_verdicts): the adapter's own
`adapters[i].evaluation.dataset_s3_uri`, else the team's `gate.evaluation.dataset_s3_uri`.
"""

from __future__ import annotations

from optigate.config.models import TeamConfig
from optigate.config.rules.registry import Problem, rule

ADAPTER_DATASET = rule("OG440", "with a gate candidate, every adapter has an evaluation dataset")
ADAPTER_EVALUATION_NEEDS_GATE = rule("OG441", "an adapter's evaluation dataset only with a gate candidate")
ADAPTERS_ONE_EVALUATION_JOB = rule(
    "OG442", "the adapters a gate evaluates fit one processing job's arguments and inputs"
)

#: CreateProcessingJob (botocore 1.44): ContainerArguments 1-100 items, ProcessingInputs at most 10. The gate's job
#: takes 15 arguments of its own, 4 per evaluated component (the base's included) and a 5th for a component with its
#: own dataset, and one input per distinct dataset (optigate.constructs.evaluation_job).
MAX_ARGUMENTS, JOB_ARGUMENTS, PER_COMPONENT, MAX_INPUTS = 100, 15, 4, 10


def adapter_evaluation_problems(team: TeamConfig) -> list[Problem]:
    """Every adapter judged on a dataset when the gate has a candidate; an adapter's dataset only then."""
    problems: list[Problem] = _job_size_problems(team)
    for index, adapter in enumerate(team.adapters):
        if team.gate.candidate and adapter.evaluation is None and team.gate.evaluation.dataset_s3_uri is None:
            problems.append(
                Problem(
                    ("adapters", index),
                    f"adapter {adapter.name} has no evaluation dataset: the gate judges each adapter's quality on "
                    f"its own records before anything is promoted; set adapters[{index}].evaluation.dataset_s3_uri "
                    "or gate.evaluation.dataset_s3_uri",
                    ADAPTER_DATASET,
                )
            )
        if not team.gate.candidate and adapter.evaluation is not None:
            problems.append(
                Problem(
                    ("adapters", index, "evaluation"),
                    f"adapter {adapter.name}'s evaluation dataset is read only by the gate, and this team's gate has "
                    f"no candidate: remove adapters[{index}].evaluation or give gate.candidate",
                    ADAPTER_EVALUATION_NEEDS_GATE,
                )
            )
    return problems


def _job_size_problems(team: TeamConfig) -> list[Problem]:
    if not team.gate.candidate or not team.adapters:
        return []
    own = {adapter.evaluation.dataset_s3_uri for adapter in team.adapters if adapter.evaluation is not None}
    with_own = sum(adapter.evaluation is not None for adapter in team.adapters)
    arguments = JOB_ARGUMENTS + PER_COMPONENT * (len(team.adapters) + 1) + with_own
    inputs = 1 + len(own - {team.gate.evaluation.dataset_s3_uri})
    if arguments <= MAX_ARGUMENTS and inputs <= MAX_INPUTS:
        return []
    return [
        Problem(
            ("adapters",),
            f"the gate evaluates the base and each adapter in one processing job, which takes at most {MAX_ARGUMENTS} "
            f"arguments and {MAX_INPUTS} inputs (CreateProcessingJob); {len(team.adapters)} adapters need "
            f"{arguments} and {inputs}: share evaluation datasets between adapters, or split the adapters over teams",
            ADAPTERS_ONE_EVALUATION_JOB,
        )
    ]


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    ADAPTER_DATASET,
    ADAPTER_EVALUATION_NEEDS_GATE,
    ADAPTERS_ONE_EVALUATION_JOB,
)
