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


def adapter_evaluation_problems(team: TeamConfig) -> list[Problem]:
    """Every adapter judged on a dataset when the gate has a candidate; an adapter's dataset only then."""
    problems: list[Problem] = []
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
