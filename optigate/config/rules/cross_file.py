"""Cross-file rules: each environment's overrides against each team they apply to, and regions
against the SDK's own tables. A single file can be valid while the pair synthesizes nonsense
(`MinCapacity 2, MaxCapacity 1`) or fails only at synth (`Unsupported region`).

Problems are reported where the user would change something: the override in environments.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
from optigate.config.rules.registry import Found, Problem, did_you_mean, rule, rule_check

REGION_HAS_SAGEMAKER = rule("OG603", "each environment's region has SageMaker (botocore's tables)")
OVERRIDE_HAS_EFFECT = rule("OG604", "autoscaling overrides only for a team with serving.autoscaling")
MAX_CAPACITY_AT_LEAST_MIN = rule("OG605", "an overridden autoscaling maximum is at least the team's minimum")
INSTANCE_COUNT_AT_MOST_MAX = rule("OG606", "an overridden instance_count is at most the autoscaling maximum")
CAPTURE_TRAINABLE = rule("OG607", "an EAGLE head trained from data capture has a capture the optimization job reads")
TEAM_IN_ENVIRONMENT_EXISTS = rule("OG608", "each team an environment overrides has a team file")
TEAM_NAME_ONCE = rule("OG609", "each team name is used by one team file")
RESOURCE_NAMES_DISTINCT = rule("OG610", "no two (team, environment) pairs share resource names")

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


def check_regions(environments: EnvironmentsFile) -> list[Problem]:
    regions = sagemaker_regions()
    problems = []
    for index, environment in enumerate(environments.environments):
        if environment.region not in regions:
            problems.append(
                Problem(
                    ("environments", index, "region"),
                    f"SageMaker has no endpoint in region '{environment.region}' (botocore's tables)"
                    + _region_hint(environment.region, sorted(regions)),
                    REGION_HAS_SAGEMAKER,
                )
            )
    return problems


def _region_hint(region: str, regions: list[str]) -> str:
    """A region with the same letters first (`us-esat-1` is `us-east-1` typed fast, while difflib prefers
    `us-west-1`), else the closest one."""
    anagrams = [r for r in regions if sorted(r) == sorted(region)]
    return f"; did you mean '{anagrams[0]}'?" if anagrams else did_you_mean(region, regions)


def check_overrides(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """Each environment's overrides against each team's serving, as the team stack will combine them."""
    problems: list[Problem] = []
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            where = _Where(index, environment, name)
            overrides = effective_overrides(team, environment)
            own = environment.teams.get(name)
            scaling = team.serving.autoscaling
            if scaling is None:
                for key in ("autoscaling_max_capacity", "suspend_autoscaling"):
                    if own is not None and getattr(own, key) is not None:
                        problems.append(
                            Problem(
                                where.override(key),
                                f"has no effect: team '{name}' has no serving.autoscaling",
                                OVERRIDE_HAS_EFFECT,
                            )
                        )
                continue
            # What the stack synthesizes: an endpoint keeps at least one instance; copies may go to zero.
            minimum = scaling.min_capacity if team.adapters else max(1, scaling.min_capacity)
            maximum = overrides.autoscaling_max_capacity or scaling.max_capacity
            if maximum < minimum:
                problems.append(
                    Problem(
                        where.override("autoscaling_max_capacity"),
                        f"{maximum} is below team '{name}'s serving.autoscaling.min_capacity ({minimum}) "
                        f"in {environment.name}: raise it to at least {minimum}, or lower the team's minimum",
                        MAX_CAPACITY_AT_LEAST_MIN,
                    )
                )
            count = overrides.instance_count
            if count is not None and not team.adapters and count > maximum:
                problems.append(
                    Problem(
                        where.override("instance_count"),
                        f"{count} instances exceed team '{name}'s autoscaling maximum ({maximum}) in "
                        f"{environment.name}: autoscaling would remove them at once",
                        INSTANCE_COUNT_AT_MOST_MAX,
                    )
                )
    return problems


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


def check_capture_training(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """A team whose gate trains an EAGLE head from data capture needs, in every environment its gate runs in, a
    capture the optimization job can read; reported at the capture override to change."""
    problems: list[Problem] = []
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
                problems.append(
                    Problem(
                        path, f"team '{name}' trains its EAGLE head from data capture: {message}", CAPTURE_TRAINABLE
                    )
                )
    return problems


def unknown_team_problems(environments: EnvironmentsFile, known: set[str], teams: list[str]) -> list[Problem]:
    """Each team an environment names that no file defines (`known`: the teams defined, or that a file which could not
    be read may define; `teams`: the names to suggest)."""
    problems = []
    for index, environment in enumerate(environments.environments):
        for name in environment.teams:
            if name not in known:
                where = ("environments", index, "teams", name)
                problems.append(
                    Problem(
                        where,
                        f"no team file defines team '{name}'{did_you_mean(name, teams)}",
                        TEAM_IN_ENVIRONMENT_EXISTS,
                    )
                )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    REGION_HAS_SAGEMAKER,
    OVERRIDE_HAS_EFFECT,
    MAX_CAPACITY_AT_LEAST_MIN,
    INSTANCE_COUNT_AT_MOST_MAX,
    CAPTURE_TRAINABLE,
    TEAM_IN_ENVIRONMENT_EXISTS,
    TEAM_NAME_ONCE,
    RESOURCE_NAMES_DISTINCT,
    component_rollout_fits_environment,
)
