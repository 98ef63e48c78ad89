"""A new adapter version as the gate's candidate: `gate.candidate.adapters: {<adapter>: s3://.../<name>.tar.gz}`.

The key is not a serving override (serving_with takes it out): it names, per adapter of the team, the archive the
candidate serves instead of the team file's. The archive's own content (rank, base model, target modules) is
checked by the gate's stager before any endpoint exists (optigate.deployment.adapter_archive).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from optigate.config.models import CANDIDATE_ADAPTERS, TeamConfig
from optigate.config.rule_registry import Found, Problem, did_you_mean, rule_check
from optigate.config.rules.gate_rules import GATE_CANDIDATE
from optigate.config.rules.rollout_rules import SHADOW_CANDIDATE

#: An S3 object (not a prefix) ending .tar.gz, as an inference component's ArtifactUrl takes it; `{region}` becomes
#: the environment's region, as in `adapters[i].s3_uri`.
ARCHIVE_URI = re.compile(r"^s3://[a-z0-9{][a-z0-9.\-{}]{1,80}[a-z0-9}]/\S+\.tar\.gz$")
#: The model package records each version in CustomerMetadataProperties, whose values are at most 256 characters
#: (botocore 1.44 sagemaker CustomerMetadataMap: value max 256, 50 entries).
MAX_METADATA_VALUE = 256
#: Where the new versions are written.
NEW_VERSIONS = (*GATE_CANDIDATE, CANDIDATE_ADAPTERS)


def candidate_adapters(team: TeamConfig) -> dict[str, str]:
    """The adapter versions the gate's candidate serves, by adapter name (empty: none); only meaningful once the
    rules below passed (a malformed value reads as empty)."""
    value = team.gate.candidate.get(CANDIDATE_ADAPTERS)
    if not isinstance(value, Mapping):
        return {}
    return {str(name): uri for name, uri in value.items() if isinstance(uri, str)}


def adapter_candidate_problems(team: TeamConfig) -> list[Problem]:
    """The new versions' rules in the order they are reported, one rule function each: a shadow candidate's; then,
    with new versions, their budgets, and without adapters only that, with a malformed value only that; else each
    version's name, archive and change, version by version."""
    problems = candidate_adapters_in_gate(team)
    if CANDIDATE_ADAPTERS not in team.gate.candidate:
        return problems
    problems += candidate_adapter_latency(team)
    if not team.adapters:
        return problems + candidate_adapters_need_adapters(team)
    value = team.gate.candidate[CANDIDATE_ADAPTERS]
    if not isinstance(value, Mapping) or not value:
        return problems + candidate_adapter_archives(team)
    for index in range(len(value)):
        problems += candidate_adapter_names(team, index)
        problems += candidate_adapter_archives(team, index)
        problems += candidate_adapter_changes(team, index)
    return problems


def _versions(team: TeamConfig) -> list[tuple[object, object]] | None:
    """The new versions as (name, URI) pairs, None unless the team serves adapters and gives them as a non-empty
    mapping (what OG450 and OG453 refuse otherwise)."""
    value = team.gate.candidate.get(CANDIDATE_ADAPTERS)
    if not team.adapters or not isinstance(value, Mapping) or not value:
        return None
    return list(value.items())


def _served(team: TeamConfig) -> dict[str, str]:
    """The archive the team serves, by adapter name."""
    return {adapter.name: adapter.s3_uri for adapter in team.adapters}


def _not_an_archive(uri: object) -> bool:
    return not isinstance(uri, str) or not ARCHIVE_URI.match(uri) or len(uri) > MAX_METADATA_VALUE


@rule_check("OG450", "gate.candidate.adapters only for a team with adapters")
def candidate_adapters_need_adapters(team: TeamConfig) -> Iterator[Found]:
    """`gate.candidate.adapters` is given only by a team that serves adapters; without adapters the versions
    themselves are not checked (OG452-OG454).

    Why: a new version replaces the archive of one of the team's adapters (`adapters`) on the gate's candidate; a
    team without adapters has none to replace.
    """
    if CANDIDATE_ADAPTERS in team.gate.candidate and not team.adapters:
        yield (
            NEW_VERSIONS,
            "the team serves no adapters: list them under `adapters` first, then prove a new version here",
        )


@rule_check("OG451", "new adapter versions only under gate.candidate, not a shadow candidate")
def candidate_adapters_in_gate(team: TeamConfig) -> Iterator[Found]:
    """A shadow candidate (`rollout.shadow.candidate`) gives no `adapters`: new adapter versions go under
    `gate.candidate.adapters`.

    Why: a new adapter version is proven by the gate (quality on its dataset, then latency); `adapters` is no serving
    override (serving_with takes it out of a candidate), so under a shadow candidate it would be dropped.
    """
    shadow = team.rollout.shadow
    if shadow is not None and CANDIDATE_ADAPTERS in shadow.candidate:
        yield (
            (*SHADOW_CANDIDATE, CANDIDATE_ADAPTERS),
            "a new adapter version is proven by the gate (quality on its dataset, then latency): put it under "
            "gate.candidate.adapters",
        )


@rule_check("OG452", "gate.candidate.adapters names adapters of the team")
def candidate_adapter_names(team: TeamConfig, index: int) -> Iterator[Found]:
    """The `index`th new version in `gate.candidate.adapters` is keyed by the name of one of the team's adapters,
    checked one version at a time.

    Why: a new version replaces the archive of the adapter it names; a name that is none of the team's adapters
    replaces nothing.
    """
    versions = _versions(team)
    if versions is None:
        return
    served = _served(team)
    name = versions[index][0]
    if name not in served:
        yield (
            (*NEW_VERSIONS, str(name)),
            f"'{name}' is not one of the team's adapters ({', '.join(served)})" + did_you_mean(str(name), list(served)),
        )


@rule_check("OG453", "gate.candidate.adapters gives each adapter an S3 .tar.gz archive")
def candidate_adapter_archives(team: TeamConfig, index: int | None = None) -> Iterator[Found]:
    """`gate.candidate.adapters` (of a team serving adapters) maps adapter names to archives: called without `index`,
    it is a non-empty mapping; with it, the `index`th version (of an adapter of the team) is the S3 URI of a .tar.gz
    object of at most 256 characters, checked one version at a time.

    Why: an inference component's ArtifactUrl is an S3 object (not a prefix) ending .tar.gz, and the approved version
    is recorded in the model package's CustomerMetadataProperties, whose values are at most 256 characters (botocore
    1.44 sagemaker CustomerMetadataMap).
    """
    if index is None:
        if CANDIDATE_ADAPTERS in team.gate.candidate and team.adapters and _versions(team) is None:
            yield (
                NEW_VERSIONS,
                "give a mapping of adapter name to its new archive, e.g. {reply: s3://bucket/support/reply-v3.tar.gz}",
            )
        return
    versions = _versions(team)
    if versions is None:
        return
    name, uri = versions[index]
    if name in _served(team) and _not_an_archive(uri):
        yield (
            (*NEW_VERSIONS, str(name)),
            f"{uri!r} is not an S3 URI of a .tar.gz archive of at most {MAX_METADATA_VALUE} characters (the "
            "approved version is recorded in the model package's metadata, whose values are that long)",
        )


@rule_check("OG454", "a new adapter version is another archive than the one served")
def candidate_adapter_changes(team: TeamConfig, index: int) -> Iterator[Found]:
    """The `index`th new version in `gate.candidate.adapters` (of an adapter of the team, an archive) is another
    archive than the one the adapter serves (`adapters[i].s3_uri`), checked one version at a time.

    Why: the gate proves a candidate against what is served; the same archive on both sides proves nothing.
    """
    versions = _versions(team)
    if versions is None:
        return
    served = _served(team)
    name, uri = versions[index]
    if name in served and not _not_an_archive(uri) and uri == served.get(str(name)):
        yield (
            (*NEW_VERSIONS, str(name)),
            f"{uri} is the version the team serves already; a candidate proves another archive against it",
        )


@rule_check("OG455", "a new adapter version comes with p99 TTFT and ITL budgets")
def candidate_adapter_latency(team: TeamConfig) -> Iterator[Found]:
    """A team serving adapters that gives `gate.candidate.adapters` sets both `gate.benchmark.p99_ttft_ms_budget`
    and `p99_itl_ms_budget`.

    Why: a new version's rank changes its latency, and the gate judges each adapter's p99 against the budgets (Holm
    across adapters); without them only all traffic's throughput would judge it, where one adapter's share can hide
    its own slow-down.
    """
    if CANDIDATE_ADAPTERS not in team.gate.candidate:
        return
    benchmark = team.gate.benchmark
    if team.adapters and (benchmark.p99_ttft_ms_budget is None or benchmark.p99_itl_ms_budget is None):
        yield (
            ("gate", "benchmark"),
            "a new adapter version is judged on its own latency against gate.benchmark.p99_ttft_ms_budget and "
            "p99_itl_ms_budget (each adapter's p99, Holm across adapters): set both",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    candidate_adapters_need_adapters,
    candidate_adapters_in_gate,
    candidate_adapter_names,
    candidate_adapter_archives,
    candidate_adapter_changes,
    candidate_adapter_latency,
)
