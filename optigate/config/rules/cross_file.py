"""Cross-file rules: each environment's overrides against each team they apply to, and regions
against the SDK's own tables. A single file can be valid while the pair synthesizes nonsense
(`MinCapacity 2, MaxCapacity 1`) or fails only at synth (`Unsupported region`).

Problems are reported where the user would change something: the override in environments.yaml.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from optigate.config.models import DataCapture, Environment, EnvironmentOverrides, EnvironmentsFile, TeamConfig
from optigate.config.rolling_update import (
    COMPONENT_BATCH_MIN_PERCENT,
    COMPONENT_TIMEOUT_MAX_SECONDS,
    bakes_within_limit,
    most_batches_within_limit,
    rolling_batch_percent,
    rolling_batches,
)
from optigate.config.rule_registry import Found, Problem, did_you_mean, rule_check

CAPTURE_KEYS = frozenset({"data_capture", "data_capture_percentage"})


def effective_overrides(team: TeamConfig, environment: Environment) -> EnvironmentOverrides:
    """Environment-wide overrides, then the team's own overrides in that environment."""
    merged = environment.overrides.model_dump(exclude_none=True)
    team_overrides = environment.teams.get(team.team)
    if team_overrides is not None:
        own = team_overrides.model_dump(exclude_none=True)
        if CAPTURE_KEYS & own.keys():  # the team's own capture replaces the environment's, whichever key it uses
            for key in CAPTURE_KEYS:
                merged.pop(key, None)
        merged.update(own)
    return EnvironmentOverrides(**merged)


@cache
def sagemaker_regions() -> frozenset[str]:
    """Every region botocore's endpoint tables list SageMaker in, across partitions (no AWS call)."""
    import botocore.session

    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("sagemaker", partition)
    )


@dataclass(frozen=True)
class _Where:
    index: int
    environment: Environment
    team: str

    def override(self, key: str) -> tuple[str | int, ...]:
        """The YAML path of the override that set `key` for this team (its own, else the environment's)."""
        own = self.environment.teams.get(self.team)
        if own is not None and getattr(own, key) is not None:
            return ("environments", self.index, "teams", self.team, key)
        return ("environments", self.index, "overrides", key)


@rule_check("OG603", "each environment's region has SageMaker (botocore's tables)")
def region_has_sagemaker(environments: EnvironmentsFile) -> Iterator[Found]:
    """Each environment's `region` is one botocore's endpoint tables list SageMaker in, in any partition (no AWS
    call).

    Why: the file's pattern accepts any region-shaped name, and a region without SageMaker would fail only at synth
    (`Unsupported region`). A mistyped region is answered with the closest one.
    """
    regions = sagemaker_regions()
    for index, environment in enumerate(environments.environments):
        if environment.region not in regions:
            yield (
                ("environments", index, "region"),
                f"SageMaker has no endpoint in region '{environment.region}' (botocore's tables)"
                + _region_hint(environment.region, sorted(regions)),
            )


def _region_hint(region: str, regions: list[str]) -> str:
    """A region with the same letters first (`us-esat-1` is `us-east-1` typed fast, while difflib prefers
    `us-west-1`), else the closest one."""
    anagrams = [r for r in regions if sorted(r) == sorted(region)]
    return f"; did you mean '{anagrams[0]}'?" if anagrams else did_you_mean(region, regions)


def check_overrides(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """Each environment's overrides against each team's serving, as the team stack will combine them: the rules in
    the order they are reported, pair by pair."""
    problems: list[Problem] = []
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            where = _Where(index, environment, name)
            overrides = effective_overrides(team, environment)
            problems += override_has_effect(where, team)
            problems += max_capacity_at_least_min(where, team, overrides)
            problems += instance_count_at_most_max(where, team, overrides)
    return problems


@rule_check("OG604", "autoscaling overrides only for a team with serving.autoscaling")
def override_has_effect(where: _Where, team: TeamConfig) -> Iterator[Found]:
    """A team's own overrides in an environment (`teams.<team>`) set `autoscaling_max_capacity` or
    `suspend_autoscaling` only for a team with `serving.autoscaling`.

    Why: a team without autoscaling has no scalable target for them to change, so they would have no effect.
    Environment-wide overrides are not reported: they apply to every team, some of which may autoscale.
    """
    own = where.environment.teams.get(where.team)
    if team.serving.autoscaling is None:
        for key in ("autoscaling_max_capacity", "suspend_autoscaling"):
            if own is not None and getattr(own, key) is not None:
                yield (where.override(key), f"has no effect: team '{where.team}' has no serving.autoscaling")


@rule_check("OG605", "an overridden autoscaling maximum is at least the team's minimum")
def max_capacity_at_least_min(where: _Where, team: TeamConfig, overrides: EnvironmentOverrides) -> Iterator[Found]:
    """In each environment, the autoscaling maximum (`autoscaling_max_capacity`, environment-wide or the team's own,
    else the team's `serving.autoscaling.max_capacity`) is at least the team's minimum. `overrides`: the team's
    effective overrides there (`effective_overrides`).

    Why: each file can be valid alone while the pair synthesizes nonsense (`MinCapacity 2, MaxCapacity 1`). The
    minimum is what the stack synthesizes: an endpoint keeps at least one instance, while an adapter team's copies
    may go to zero. Reported at the override that set the maximum.
    """
    scaling = team.serving.autoscaling
    if scaling is None:
        return  # OG604
    minimum = scaling.min_capacity if team.adapters else max(1, scaling.min_capacity)
    maximum = overrides.autoscaling_max_capacity or scaling.max_capacity
    if maximum < minimum:
        yield (
            where.override("autoscaling_max_capacity"),
            f"{maximum} is below team '{where.team}'s serving.autoscaling.min_capacity ({minimum}) "
            f"in {where.environment.name}: raise it to at least {minimum}, or lower the team's minimum",
        )


@rule_check("OG606", "an overridden instance_count is at most the autoscaling maximum")
def instance_count_at_most_max(where: _Where, team: TeamConfig, overrides: EnvironmentOverrides) -> Iterator[Found]:
    """An environment's `instance_count` override (environment-wide or the team's own) is at most the autoscaling
    maximum there, for an autoscaled team without adapters. `overrides`: the team's effective overrides there
    (`effective_overrides`).

    Why: autoscaling would remove the instances above its maximum at once. Adapter teams are not checked: their
    autoscaling counts copies of the base component, not instances.
    """
    scaling = team.serving.autoscaling
    if scaling is None:
        return  # OG604
    maximum = overrides.autoscaling_max_capacity or scaling.max_capacity
    count = overrides.instance_count
    if count is not None and not team.adapters and count > maximum:
        yield (
            where.override("instance_count"),
            f"{count} instances exceed team '{where.team}'s autoscaling maximum ({maximum}) in "
            f"{where.environment.name}: autoscaling would remove them at once",
        )


@rule_check(
    "OG613", "an environment's autoscaling maximum keeps an adapter team's rolling update within the 8-hour limit"
)
def component_rollout_fits_environment(
    environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]
) -> Iterator[Found]:
    """An environment's `autoscaling_max_capacity` (environment-wide or the team's own) leaves an adapter team's
    rolling update time to bake every batch.

    Why: an adapter team's base inference component rolls out in batches of its copies, at most one batch per copy
    (optigate.config.rolling_update), each baking `rollout.canary.wait_minutes`, and SageMaker stops a rolling
    update after 28800 s (MaximumExecutionTimeoutInSeconds), so the last batch could never bake. OG521 checks the
    team file's own maximum; an environment that raises it may add batches. Reported at the override; not when
    autoscaling is suspended there (one copy), nor when the team file alone breaks OG503, OG520 or OG521.
    """
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            scaling = team.serving.autoscaling
            if not team.adapters or scaling is None:
                continue
            overrides = effective_overrides(team, environment)
            maximum = overrides.autoscaling_max_capacity
            if maximum is None or overrides.suspend_autoscaling:
                continue  # the team file's maximum (OG521), or one copy
            rollout = team.rollout  # read only where an override applies (a broken rollout holds back only there)
            if rollout.strategy == "shadow":
                continue  # OG503
            batch, wait = rolling_batch_percent(rollout), rollout.canary.wait_minutes * 60
            if batch < COMPONENT_BATCH_MIN_PERCENT:
                continue  # OG520
            if not bakes_within_limit(rolling_batches(batch, scaling.max_capacity), wait):
                continue  # the team file's own maximum already does not fit: OG521
            batches = rolling_batches(batch, maximum)
            if not bakes_within_limit(batches, wait):
                yield (
                    _Where(index, environment, name).override("autoscaling_max_capacity"),
                    f"{maximum} copies of team '{name}'s base component in {environment.name} roll out in "
                    f"{batches} batches of {batch}% each baking {rollout.canary.wait_minutes} min ({batches * wait} "
                    f"s), and SageMaker stops a rolling update after {COMPONENT_TIMEOUT_MAX_SECONDS} s "
                    "(MaximumExecutionTimeoutInSeconds), so the last batch could never bake; lower it to at most "
                    f"{most_batches_within_limit(wait)}, or shorten the team's rollout.canary.wait_minutes",
                )


#: ModelSpeculativeDecodingConfig's TrainingDataSource (API reference,
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ModelSpeculativeDecodingConfig.html): "The data
#: must be formatted as ShareGPT, OpenAI Completions or OpenAI Chat Completions. The input can also be unencrypted
#: captured data from a SageMaker endpoint as long as the endpoint uses one of the above formats."
TRAINABLE_FORMATS = ("openai_chat", "openai_completions", "sharegpt")


def capture_training_refusals(capture: DataCapture | None, environment: str) -> list[tuple[str, str]]:
    """Why an optimization job cannot train an EAGLE head from this environment's data capture: (the
    data_capture key to change, the reason and what to change), none when it can.

    - "Unencrypted" is not defined by the docs. S3 encrypts every new object (SSE-S3 by default), so it cannot
      mean "no encryption at rest"; optigate reads it as "no KMS": captures SageMaker writes with
      DataCaptureConfig.KmsKeyId are SSE-KMS and are refused (whether kms:Decrypt for the job's role would be
      enough is undocumented, and the doc says unencrypted), an SSE-S3 bucket without a capture key is accepted.
    - Without CaptureContentTypeHeader.JsonContentTypes "SageMaker AI will by default base64 encode" the captured
      payload (API_CaptureContentTypeHeader); whether the job decodes base64 is undocumented, so JSON is required.
    - The clients' request format is invisible to optigate: it must be stated (data_capture.request_format), and
      LMI's own {inputs, parameters} schema is none of the formats the job reads.
    """
    s3_managed = "data_capture: {percentage: N, encryption: s3_managed, json_content_types: [application/json]"
    if capture is None:
        return [
            (
                "data_capture",
                f"captures nothing in {environment}, and the gate's EAGLE head trains from that capture; set "
                f"{s3_managed}, request_format: openai_chat}} for {environment}, or train_from an S3 prefix of "
                "ShareGPT/OpenAI data",
            )
        ]
    refusals = []
    if capture.encryption != "s3_managed":
        refusals.append(
            (
                "encryption",
                f"the capture in {environment} is KMS-encrypted (DataCaptureConfig.KmsKeyId), and an optimization "
                "job trains only from 'unencrypted captured data' (API reference, ModelSpeculativeDecodingConfig); "
                f"set {s3_managed}}} for {environment} only (a separate SSE-S3, SSL-only capture bucket without a "
                "KMS key), or train_from an S3 prefix of exported ShareGPT/OpenAI data",
            )
        )
    if not capture.json_content_types:
        refusals.append(
            (
                "json_content_types",
                f"without json_content_types the capture in {environment} stores payloads base64-encoded "
                "(CaptureContentTypeHeader), which the optimization job is not documented to read; add the content "
                "type your clients send, e.g. json_content_types: [application/json]",
            )
        )
    if capture.request_format is None:
        refusals.append(
            (
                "request_format",
                f"say what the clients of {environment} send (request_format: openai_chat, openai_completions, "
                "sharegpt or lmi): the optimization job reads ShareGPT, OpenAI Completions or OpenAI Chat only, and "
                "optigate cannot see the clients",
            )
        )
    elif capture.request_format not in TRAINABLE_FORMATS:
        refusals.append(
            (
                "request_format",
                f"clients in {environment} send LMI's {{inputs, parameters}} schema, which the optimization job does "
                "not read (ShareGPT, OpenAI Completions, OpenAI Chat only); have them send OpenAI chat `messages` "
                "(LMI's vLLM backend accepts it) and set request_format: openai_chat, or train_from an S3 prefix",
            )
        )
    return refusals


def _trains_from_capture(team: TeamConfig) -> bool:
    speculative = team.gate.candidate.get("speculative_decoding")
    return isinstance(speculative, dict) and (speculative.get("method"), speculative.get("train_from")) == (
        "eagle",
        "data_capture",
    )


@rule_check("OG607", "an EAGLE head trained from data capture has a capture the optimization job reads")
def capture_trainable(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> Iterator[Found]:
    """A team whose gate trains an EAGLE head from data capture (`speculative_decoding: {method: eagle,
    train_from: data_capture}`) has, in every environment its gate runs in, a capture the optimization job can read:
    a capture at all, SSE-S3 rather than KMS (`encryption: s3_managed`), JSON payloads (`json_content_types`), and a
    `request_format` the job reads. Reported at the capture override to change.

    Why: the job's training data "must be formatted as ShareGPT, OpenAI Completions or OpenAI Chat Completions. The
    input can also be unencrypted captured data from a SageMaker endpoint as long as the endpoint uses one of the
    above formats" (ModelSpeculativeDecodingConfig's TrainingDataSource, API reference): optigate reads
    "unencrypted" as "no KMS" (S3 encrypts every new object); without CaptureContentTypeHeader.JsonContentTypes
    SageMaker base64-encodes the captured payload, which the job is not documented to decode; and optigate cannot
    see what the clients send, so it must be stated (each reason: `capture_training_refusals`).
    """
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            if not _trains_from_capture(team):
                continue
            where = _Where(index, environment, name)
            overrides = effective_overrides(team, environment)
            for field, message in capture_training_refusals(overrides.capture, environment.name):
                if overrides.data_capture is not None:
                    sub = "percentage" if field == "data_capture" else field
                    path = (*where.override("data_capture"), sub)
                elif overrides.data_capture_percentage is not None:  # KMS, no header: data_capture replaces it
                    path = where.override("data_capture_percentage")
                else:
                    path = ("environments", index, "overrides", "data_capture")
                yield (path, f"team '{name}' trains its EAGLE head from data capture: {message}")


@rule_check("OG608", "each team an environment overrides has a team file")
def team_in_environment_exists(environments: EnvironmentsFile, known: set[str], teams: list[str]) -> Iterator[Found]:
    """Each team an environment names under `teams:` is defined by a team file, or may be by a file that could not
    be read. `known`: those teams; `teams`: the names to suggest.

    Why: overrides for a team no file defines apply to nothing, and a misspelt name would leave the team it meant
    without them. The closest team name is suggested.
    """
    for index, environment in enumerate(environments.environments):
        for name in environment.teams:
            if name not in known:
                yield (
                    ("environments", index, "teams", name),
                    f"no team file defines team '{name}'{did_you_mean(name, teams)}",
                )


@rule_check("OG609", "each team name is used by one team file")
def team_name_once(team: str, used_by: str | None, declared_by: Sequence[str] = ()) -> Iterator[Found]:
    """A team file's `team:` names a team no other team file uses: no file read before it defines that team, and,
    when only some files are read (one team's synth or check), no file left unread declares it. Reported at the
    later file's `team`. `used_by`: the file read before that defines it; `declared_by`: the unread files declaring it.

    Why: stacks and endpoints are named after the team (`optigate-<env>-<team>`, `<team>-<env>`), so a second file
    of one team would deploy over the first one's stacks; a copied file keeps the name it was copied from until it
    is changed.
    """
    if used_by is not None:
        yield (("team",), f"team name '{team}' is also used by {used_by}")
    elif declared_by:
        yield (
            ("team",),
            f"team name '{team}' is also declared by {', '.join(declared_by)}; keep one file per team (a copied "
            "file keeps the name it was copied from until you change it)",
        )


#: A (team, environment) pair.
Pair = tuple[str, str]


@rule_check("OG610", "no two (team, environment) pairs share resource names")
def resource_names_distinct(first: Pair, second: Pair, clashes: Iterable[tuple[Pair, Pair, str]]) -> Iterator[Found]:
    """No two (team, environment) pairs give an AWS resource the same name. Reported at the second team's file.
    `clashes`: each two pairs that would share a name, and the kind of name, as optigate.naming.clashes finds them
    over every pair (optigate.deployment.project passes them: the config layer imports no other package); checked
    for the pairs `first` and `second`.

    Why: names are `<team>-<env>`, ambiguous when names contain hyphens (team `a-b` in `c`, team `a` in `b-c`),
    and two such pairs would deploy two teams onto one endpoint (optigate.naming.clashes).
    """
    kinds = [kind.replace("_", " ") for one, other, kind in clashes if (one, other) == (first, second)]
    if kinds:
        yield (
            ("team",),
            f"team '{first[0]}' in environment '{first[1]}' and team '{second[0]}' in environment '{second[1]}' "
            f"would share resource names ({', '.join(kinds)}); rename one of the teams",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    region_has_sagemaker,
    override_has_effect,
    max_capacity_at_least_min,
    instance_count_at_most_max,
    capture_trainable,
    team_in_environment_exists,
    team_name_once,
    resource_names_distinct,
    component_rollout_fits_environment,
)
