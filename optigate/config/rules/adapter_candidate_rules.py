"""A new adapter version as the gate's candidate: `gate.candidate.adapters: {<adapter>: s3://.../<name>.tar.gz}`.

The key is not a serving override (serving_with takes it out): it names, per adapter of the team, the archive the
candidate serves instead of the team file's. The archive's own content (rank, base model, target modules) is
checked by the gate's stager before any endpoint exists (optigate.deployment.adapter_archive).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from optigate.config.models import CANDIDATE_ADAPTERS, TeamConfig
from optigate.config.rules.gate_rules import GATE_CANDIDATE
from optigate.config.rules.registry import Problem, did_you_mean, rule
from optigate.config.rules.rollout_rules import SHADOW_CANDIDATE

CANDIDATE_ADAPTERS_NEED_ADAPTERS = rule("OG450", "gate.candidate.adapters only for a team with adapters")
CANDIDATE_ADAPTERS_IN_GATE = rule("OG451", "new adapter versions only under gate.candidate, not a shadow candidate")
CANDIDATE_ADAPTER_NAMES = rule("OG452", "gate.candidate.adapters names adapters of the team")
CANDIDATE_ADAPTER_ARCHIVES = rule("OG453", "gate.candidate.adapters gives each adapter an S3 .tar.gz archive")
CANDIDATE_ADAPTER_CHANGES = rule("OG454", "a new adapter version is another archive than the one served")
CANDIDATE_ADAPTER_LATENCY = rule("OG455", "a new adapter version comes with p99 TTFT and ITL budgets")

#: An S3 object (not a prefix) ending .tar.gz, as an inference component's ArtifactUrl takes it; `{region}` becomes
#: the environment's region, as in `adapters[i].s3_uri`.
ARCHIVE_URI = re.compile(r"^s3://[a-z0-9{][a-z0-9.\-{}]{1,80}[a-z0-9}]/\S+\.tar\.gz$")
#: The model package records each version in CustomerMetadataProperties, whose values are at most 256 characters
#: (botocore 1.44 sagemaker CustomerMetadataMap: value max 256, 50 entries).
MAX_METADATA_VALUE = 256


def candidate_adapters(team: TeamConfig) -> dict[str, str]:
    """The adapter versions the gate's candidate serves, by adapter name (empty: none); only meaningful once the
    rules below passed (a malformed value reads as empty)."""
    value = team.gate.candidate.get(CANDIDATE_ADAPTERS)
    if not isinstance(value, Mapping):
        return {}
    return {str(name): uri for name, uri in value.items() if isinstance(uri, str)}


def adapter_candidate_problems(team: TeamConfig) -> list[Problem]:
    shadow = team.rollout.shadow
    problems: list[Problem] = []
    if shadow is not None and CANDIDATE_ADAPTERS in shadow.candidate:
        problems.append(
            Problem(
                (*SHADOW_CANDIDATE, CANDIDATE_ADAPTERS),
                "a new adapter version is proven by the gate (quality on its dataset, then latency): put it under "
                "gate.candidate.adapters",
                CANDIDATE_ADAPTERS_IN_GATE,
            )
        )
    if CANDIDATE_ADAPTERS not in team.gate.candidate:
        return problems
    path = (*GATE_CANDIDATE, CANDIDATE_ADAPTERS)
    value = team.gate.candidate[CANDIDATE_ADAPTERS]
    benchmark = team.gate.benchmark
    if team.adapters and (benchmark.p99_ttft_ms_budget is None or benchmark.p99_itl_ms_budget is None):
        # A new version's rank changes its latency; the gate judges each adapter's p99 against the budgets (Holm
        # across adapters). Without them only all traffic's throughput would judge it, where one adapter's share
        # can hide its own slow-down.
        problems.append(
            Problem(
                ("gate", "benchmark"),
                "a new adapter version is judged on its own latency against gate.benchmark.p99_ttft_ms_budget and "
                "p99_itl_ms_budget (each adapter's p99, Holm across adapters): set both",
                CANDIDATE_ADAPTER_LATENCY,
            )
        )
    if not team.adapters:
        return [
            *problems,
            Problem(
                path,
                "the team serves no adapters: list them under `adapters` first, then prove a new version here",
                CANDIDATE_ADAPTERS_NEED_ADAPTERS,
            ),
        ]
    if not isinstance(value, Mapping) or not value:
        return [
            *problems,
            Problem(
                path,
                "give a mapping of adapter name to its new archive, e.g. {reply: s3://bucket/support/reply-v3.tar.gz}",
                CANDIDATE_ADAPTER_ARCHIVES,
            ),
        ]
    served = {adapter.name: adapter.s3_uri for adapter in team.adapters}
    for name, uri in value.items():
        where = (*path, str(name))
        if name not in served:
            problems.append(
                Problem(
                    where,
                    f"'{name}' is not one of the team's adapters ({', '.join(served)})"
                    + did_you_mean(str(name), list(served)),
                    CANDIDATE_ADAPTER_NAMES,
                )
            )
        elif not isinstance(uri, str) or not ARCHIVE_URI.match(uri) or len(uri) > MAX_METADATA_VALUE:
            problems.append(
                Problem(
                    where,
                    f"{uri!r} is not an S3 URI of a .tar.gz archive of at most {MAX_METADATA_VALUE} characters (the "
                    "approved version is recorded in the model package's metadata, whose values are that long)",
                    CANDIDATE_ADAPTER_ARCHIVES,
                )
            )
        elif uri == served[name]:
            problems.append(
                Problem(
                    where,
                    f"{uri} is the version the team serves already; a candidate proves another archive against it",
                    CANDIDATE_ADAPTER_CHANGES,
                )
            )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    CANDIDATE_ADAPTERS_NEED_ADAPTERS,
    CANDIDATE_ADAPTERS_IN_GATE,
    CANDIDATE_ADAPTER_NAMES,
    CANDIDATE_ADAPTER_ARCHIVES,
    CANDIDATE_ADAPTER_CHANGES,
    CANDIDATE_ADAPTER_LATENCY,
)
