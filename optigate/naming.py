"""Every name optigate gives an AWS resource, and the IAM patterns that must match those names.

Names are built from the team and the environment, each a config `ResourceName` (lowercase
letters, digits and hyphens, up to 32 characters), so `<team>-<env>` is up to 65 characters. A
name longer than its service allows is shortened to `<head>-<hash of the whole name>`: two long
names that share their first characters stay apart, which a bare slice would merge.

The gate names its temporary resources at run time, `<run prefix>-<kind>-<run id>`; the run
prefix is computed here at synth with room for the longest kind and the run id, and the IAM
patterns are the run prefix with a wildcard for the run id, so pattern and name cannot drift.

Limits, from botocore's service models (botocore 1.44: `sagemaker`, `stepfunctions`, `iam`
`service-2.json`) unless noted:

- SageMaker EndpointName, EndpointConfigName, ModelName, OptimizationJobName (EntityName),
  ProcessingJobName, ModelPackageGroupName (EntityName), InferenceComponentName: 63 characters,
  `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}` (ModelName and InferenceComponentName:
  `[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?`, the same set of names).
- Step Functions state machine name: 80. IAM role name: 64, `[\\w+=,.@-]+`.
- CloudFormation stack name: 128, `[a-zA-Z][-a-zA-Z0-9]*` (CloudFormation's documentation;
  botocore carries no limit for StackName).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Literal

SAGEMAKER_NAME_MAX = 63
SAGEMAKER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
STATE_MACHINE_NAME_MAX = 80
IAM_ROLE_NAME_MAX = 64
IAM_ROLE_NAME_PATTERN = re.compile(r"^[\w+=,.@-]+$")
STACK_NAME_MAX = 128
STACK_NAME_PATTERN = re.compile(r"^[a-zA-Z][-a-zA-Z0-9]*$")

HASH_LENGTH = 8

# The gate's run id: the first group of a UUID, 8 hexadecimal characters.
RUN_ID_EXPRESSION = "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), 0)"
RUN_ID_LENGTH = 8

# What the gate creates per run: candidate model, endpoint config and endpoint (`cand`), the baseline's
# twin endpoint config and endpoint (`twin`: the live model on the candidate's instance type and count,
# without production traffic, which the benchmark and the evaluation load instead of the live
# endpoint), the shadow endpoint config on the live endpoint (`shadow`), the optimization job (`opt`),
# the evaluation processing job (`eval`), the optimized model an EAGLE-training optimization job registers
# (`optm`: its OutputConfig.SageMakerModel, which says where the trained head is).
RunKind = Literal["cand", "twin", "shadow", "opt", "eval", "optm"]
RUN_KINDS: tuple[RunKind, ...] = ("cand", "twin", "shadow", "opt", "eval", "optm")
RUN_PREFIX_MAX = SAGEMAKER_NAME_MAX - len("-") - max(map(len, RUN_KINDS)) - len("-") - RUN_ID_LENGTH

STACK_PREFIX = "optigate"
GATE_SUFFIX = "-gate"
INVOKER_SUFFIX = "-gate-invoker"
# The gate's state machine, invoker role and model package group share one prefix; the invoker
# role, `optigate-<prefix>-gate-invoker` within IAM's 64, is the tightest of the three.
GATE_PREFIX_MAX = IAM_ROLE_NAME_MAX - len(f"{STACK_PREFIX}-") - len(INVOKER_SUFFIX)


def shorten(name: str, limit: int) -> str:
    """`name` when it fits `limit`, else its head and a hash of the whole name (unique, not a slice)."""
    if len(name) <= limit:
        return name
    if limit < HASH_LENGTH + 2:
        raise ValueError(f"cannot shorten {name!r} to {limit} characters")
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_LENGTH]
    head = name[: limit - HASH_LENGTH - 1].rstrip("-")
    return f"{head}-{digest}"


def _joined(team: str, environment: str) -> str:
    return f"{team}-{environment}"


# --------------------------------------------------------------------------- the team's stack


def stack_name(environment: str, team: str) -> str:
    """The team's CloudFormation stack in one environment (fits: at most 74 characters)."""
    return f"{STACK_PREFIX}-{environment}-{team}"


def endpoint_name(team: str, environment: str) -> str:
    """The live endpoint: `<team>-<env>` whenever it fits SageMaker's 63 characters."""
    return shorten(_joined(team, environment), SAGEMAKER_NAME_MAX)


def inference_component_name(endpoint: str, component: str) -> str:
    """An inference component on `endpoint` (LoRA: `base` and each adapter): `<endpoint>-<component>`."""
    return shorten(f"{endpoint}-{component}", SAGEMAKER_NAME_MAX)


# --------------------------------------------------------------------------- the pipelines

#: One promotion pipeline per team (its stack, its CodePipeline and its role share the name, at most 50
#: characters), and the platform's own: the shared resources and the test suite.
PIPELINE_PREFIX = f"{STACK_PREFIX}-pipeline-"
PLATFORM_STACK = f"{STACK_PREFIX}-platform"
PLATFORM_ROLE = f"{PLATFORM_STACK}-pipeline"
#: The one role EventBridge assumes to start any team's pipeline on an approval (the platform's).
PIPELINE_TRIGGER_ROLE = f"{PLATFORM_STACK}-trigger"


def pipeline_stack_name(team: str) -> str:
    """A team's promotion pipeline: its CloudFormation stack and its CodePipeline name."""
    return f"{PIPELINE_PREFIX}{team}"


# --------------------------------------------------------------------------- the gate


def gate_prefix(team: str, environment: str) -> str:
    """What a team's gate names its lasting resources after (package group, state machine, roles)."""
    return shorten(_joined(team, environment), GATE_PREFIX_MAX)


def package_group(team: str, environment: str) -> str:
    """The model package group a team's gate records its verdicts into in one environment."""
    return f"{STACK_PREFIX}-{gate_prefix(team, environment)}"


def gate_state_machine_name(team: str, environment: str) -> str:
    return f"{STACK_PREFIX}-{gate_prefix(team, environment)}{GATE_SUFFIX}"


def pipeline_role_name(team: str) -> str:
    """A team's promotion pipeline's own role in the tools account (a fixed name: each of the team's gate
    invoker roles trusts exactly this principal, not another team's pipeline). At most 50 characters."""
    return f"{PIPELINE_PREFIX}{team}"


def gate_invoker_role_name(team: str, environment: str) -> str:
    """The role the promotion pipeline assumes to run this gate (a fixed name: it is in another account)."""
    return f"{STACK_PREFIX}-{gate_prefix(team, environment)}{INVOKER_SUFFIX}"


def run_prefix(team: str, environment: str) -> str:
    """What the gate's per-run resources are named after, with room for `-<kind>-<run id>`."""
    return shorten(_joined(team, environment), RUN_PREFIX_MAX)


def _checked_kind(kind: str) -> str:
    if kind not in RUN_KINDS:
        raise ValueError(f"unknown run resource kind {kind!r}; known: {', '.join(RUN_KINDS)}")
    return kind


def run_name(team: str, environment: str, kind: RunKind, run_id: str) -> str:
    """The name a gate run gives its `kind` of resource (what `run_name_template` formats at run time)."""
    if len(run_id) != RUN_ID_LENGTH:
        raise ValueError(f"a run id has {RUN_ID_LENGTH} characters, not {len(run_id)} ({run_id!r})")
    return run_name_template(team, environment, kind).format(run_id)


def run_name_template(team: str, environment: str, kind: RunKind) -> str:
    """`run_name` with `{}` for the run id: the format string of a Step Functions `States.Format`."""
    return f"{run_prefix(team, environment)}-{_checked_kind(kind)}-{{}}"


def run_name_pattern(team: str, environment: str, kind: RunKind) -> str:
    """An IAM resource-name pattern matching every run's `kind` of resource."""
    return run_name_template(team, environment, kind).format("*")


#: An adapter team's run serves through inference components on its twin and candidate endpoints: component
#: `index` (0 the base, 1.. the team's adapters in order) is `<run prefix>-<side letters>c<index>-<run id>`,
#: the kind `twcNN` / `cacNN` no longer than the longest RunKind, so it fits SageMaker's 63 characters.
COMPONENT_SIDES: dict[RunKind, str] = {"twin": "tw", "cand": "ca"}
MAX_RUN_COMPONENTS = 100


def run_component_template(team: str, environment: str, side: RunKind, index: int) -> str:
    """The name a run gives component `index` on its `side` endpoint ("twin" or "cand"), `{}` for the run id."""
    if side not in COMPONENT_SIDES:
        raise ValueError(f"inference components run on the twin or the candidate, not on {side!r}")
    if not 0 <= index < MAX_RUN_COMPONENTS:
        raise ValueError(f"a run has at most {MAX_RUN_COMPONENTS} components (the base and 99 adapters), not {index}")
    return f"{run_prefix(team, environment)}-{COMPONENT_SIDES[side]}c{index:02d}-{{}}"


def run_component_patterns(team: str, environment: str) -> list[str]:
    """IAM resource-name patterns matching every run's components, on both sides."""
    return [f"{run_prefix(team, environment)}-{letters}c*" for letters in COMPONENT_SIDES.values()]


def invocable_endpoints(team: str, environment: str) -> list[str]:
    """The endpoints the gate's benchmark fleet and evaluation job invoke: each run's baseline twin
    and candidate (IAM resource-name patterns). Never the live endpoint: production users must not
    receive the gate's load."""
    return [run_name_pattern(team, environment, "twin"), run_name_pattern(team, environment, "cand")]


# --------------------------------------------------------------------------- checks


def all_names(team: str, environment: str, run_id: str = "0" * RUN_ID_LENGTH) -> dict[str, str]:
    """Every name one team gets in one environment, by what it names (a run's with `run_id`)."""
    names = {
        "stack": stack_name(environment, team),
        "endpoint": endpoint_name(team, environment),
        "package_group": package_group(team, environment),
        "gate_state_machine": gate_state_machine_name(team, environment),
        "gate_invoker_role": gate_invoker_role_name(team, environment),
    }
    names.update({f"run_{kind}": run_name(team, environment, kind, run_id) for kind in RUN_KINDS})
    sides: tuple[RunKind, ...] = ("twin", "cand")
    for side in sides:  # the shortest and the longest index
        for index in (0, MAX_RUN_COMPONENTS - 1):
            template = run_component_template(team, environment, side, index)
            names[f"run_{side}_component_{index}"] = template.format(run_id)
    return names


def clashes(pairs: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str], str]]:
    """(team, environment) pairs that would share a resource name, with the kind of name.

    `<team>-<env>` is ambiguous when names contain hyphens (team `a-b` in `c`, team `a` in `b-c`);
    a config whose pairs clash would deploy two teams onto one endpoint.
    """
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    found = []
    for pair in dict.fromkeys(pairs):
        for kind, name in all_names(*pair).items():
            other = owner.setdefault((kind, name), pair)
            if other != pair:
                found.append((other, pair, kind))
    return found


# --------------------------------------------------------------------------- the managed benchmark (cross-check)

#: `-<side initial><concurrency>` after a cross-check job's run id: `b` or `c` and up to five digits (the
#: config caps a level at 4096 streams; shards round it up by less than one worker's 64).
CROSS_CHECK_SUFFIX_MAX = len("-b") + 5
CROSS_CHECK_KIND = "xc"


def cross_check_prefix(team: str, environment: str) -> str:
    """What the gate's managed benchmark jobs are named after, with room for `-xc-<run id>-<b|c><level>`
    (AIBenchmarkJobName: 63 characters, `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`, botocore's AIEntityName)."""
    room = SAGEMAKER_NAME_MAX - len(f"-{CROSS_CHECK_KIND}-") - RUN_ID_LENGTH - CROSS_CHECK_SUFFIX_MAX
    return shorten(_joined(team, environment), room)


def cross_check_job_template(team: str, environment: str, side: str, concurrency: int) -> str:
    """A run's managed benchmark job of one side ("baseline" or "candidate") at one level, `{}` for the run id."""
    if side not in ("baseline", "candidate"):
        raise ValueError(f"a cross-check side is baseline or candidate, not {side!r}")
    suffix = f"-{side[0]}{concurrency}"
    if len(suffix) > CROSS_CHECK_SUFFIX_MAX:
        raise ValueError(f"concurrency {concurrency} does not fit a benchmark job name")
    return f"{cross_check_prefix(team, environment)}-{CROSS_CHECK_KIND}-{{}}{suffix}"


def cross_check_job_pattern(team: str, environment: str) -> str:
    """An IAM resource-name pattern matching every run's managed benchmark jobs."""
    return f"{cross_check_prefix(team, environment)}-{CROSS_CHECK_KIND}-*"


def workload_config_name(team: str, environment: str, concurrency: int, content: str) -> str:
    """The AWS::SageMaker::AIWorkloadConfig of one benchmarked level. Its name must be lowercase
    (`^[a-z0-9](-*[a-z0-9]){0,62}$`: "DeleteAIWorkloadConfig lowercases the name", cfn-lint's resource schema)
    and every property is create-only, so the name ends in a hash of `content` (the workload): a changed
    workload is a new resource with a new name, which CloudFormation creates before it deletes the old."""
    digest = hashlib.sha256(content.encode()).hexdigest()[:HASH_LENGTH]
    head = shorten(f"{_joined(team, environment)}-aiperf-c{concurrency}", SAGEMAKER_NAME_MAX - HASH_LENGTH - 1)
    return f"{head}-{digest}".lower()


#: Where the benchmark fleet writes each run's merged result: `<prefix>/<run id>/result.json`.
RESULTS_PREFIX = "benchmarks"
#: The two sides of a gate's benchmark, as their runs are named.
BENCHMARK_SIDES = ("baseline", "candidate")


def benchmark_run_id(run_id: str, side: str, per_shard: int, block: int) -> str:
    """One benchmark run of a gate run: `<run>-<side>-c<streams per worker>-b<block>` (the fleet's run id)."""
    return f"{run_id}-{side}-c{per_shard}-b{block}"


def benchmark_result_key(run_id: str, side: str, per_shard: int, block: int) -> str:
    """Where the fleet writes that run's merged result."""
    return f"{RESULTS_PREFIX}/{benchmark_run_id(run_id, side, per_shard, block)}/result.json"
