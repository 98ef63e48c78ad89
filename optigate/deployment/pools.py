"""A variant with instance pools (ProductionVariant.InstancePools): one container environment on every pool.

SageMaker provisions the priority-1 type first and falls back in priority order when a type has no capacity, at
creation, at scale-out and at scale-in (lowest priority removed first); the variant's one model, and so its one
`OPTION_*` environment, runs on whichever type it gets
(https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html). A fallback that cannot
hold the model is worse than none, so every pool passes every single-instance rule (the same functions, run on the
serving block with the pool's type) and problems name the pool (`serving.instance_pools[1]`). Unset values shared by
all pools are chosen so that every pool holds them: the tensor-parallel degree every pool allows, the shortest
derived `max_model_len` and the smallest derived batch; the pool that decides each is named.

`InstancePool.ModelNameOverride` (a per-pool model) is not used: the gate proves one environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from optigate.config.models import Serving, TeamConfig
from optigate.config.reader import format_path
from optigate.config.rule_registry import Found, rule_check
from optigate.config.rules import PathT, Problem, Severity, instance_pool_problems
from optigate.deployment.serving import ResolvedPool, ResolvedServing
from optigate.plan import catalog, parallel
from optigate.plan.architecture import ModelArchitecture
from optigate.serving import images

#: How one serving block on one instance type is checked and resolved (optigate.deployment.team._single_variant).
SingleVariant = Callable[[TeamConfig, ModelArchitecture, Serving, PathT], tuple[ResolvedServing | None, list[Problem]]]

USER_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html"


def has_pools(serving: Serving) -> bool:
    """Whether `serving` deploys instance pools whose shape the config rules accept."""
    return bool(serving.instance_pools) and not instance_pool_problems(serving, ())


def pool_serving(serving: Serving, instance_type: str, **shared: object) -> Serving:
    """`serving` as it runs on one pool: the pool's instance type, the shared settings given."""
    return serving.model_copy(update={"instance_type": instance_type, **shared})


def _at_pool(
    problems: list[Problem], path: PathT, index: int, serving: Serving, primary: frozenset[Problem] = frozenset()
) -> list[Problem]:
    """A pool's problems at `serving.instance_pools[index]`, saying which shared setting the pool cannot run; one the
    primary has word for word (a length beyond the model's, a timeout) is the primary's, reported once."""
    if index == 0:  # the primary is serving.instance_type: its problems stay where the user set them
        return problems
    pool = serving.instance_pools[index]  # type: ignore[index]
    out = []
    for problem in problems:
        if problem in primary:
            continue
        sub = problem.path[len(path) :]
        field = format_path(sub)
        what = "" if sub[:1] in ((), ("instance_type",)) else f" with the {field} every pool shares"
        out.append(
            Problem(
                (*path, "instance_pools", index),
                f"{pool.instance_type} (priority {pool.priority}){what}: {problem.message.rstrip('.')}; "
                "or remove this pool (every pool runs the one container environment)",
                problem.rule,
            )
        )
    return out


@rule_check("OG257", "the pools of a variant store the model on one kind of storage (NVMe or EBS)")
def pool_storage_one_kind(serving: Serving, path: PathT) -> Iterator[Found]:
    """Every pool after the first stores the model on the same kind of storage as serving.instance_type: NVMe
    instance storage, or EBS volumes. Checked pool by pool, once every pool's type is known.

    Why: CreateEndpointConfig fails with a KmsKeyId when any variant's type has local storage (KmsKeyId,
    CreateEndpointConfig API reference), so EBS pools would run without the team's key; VolumeSizeInGB likewise
    suits only EBS types. One endpoint config, one kind of storage per variant.
    """
    pools = serving.instance_pools or []
    primary = catalog.has_instance_storage(serving.instance_type)
    kind = {True: "NVMe instance storage", False: "EBS volumes"}
    for index, pool in enumerate(pools):
        if index and catalog.has_instance_storage(pool.instance_type) != primary:
            yield (
                (*path, "instance_pools", index),
                f"{pool.instance_type} stores the model on {kind[not primary]} and {serving.instance_type} on "
                f"{kind[primary]}: one endpoint config cannot both omit KmsKeyId (required with instance storage) and "
                "encrypt EBS volumes with the team's key; choose pools of one kind",
            )


@rule_check("OG258", "the pools of a variant run the image on one host AMI")
def pool_ami_one_version(serving: Serving, path: PathT) -> Iterator[Found]:
    """Every pool after the first runs the container image on the same host AMI as serving.instance_type: a CUDA 13
    image needs the SageMaker SDK's CUDA 13 AMI on the instance families it lists, the default AMI elsewhere
    (`optigate.serving.images.inference_ami_version`). Checked pool by pool, once every pool's type is known; not
    for an unknown container version (OG301's).

    Why: a production variant has one InferenceAmiVersion, which every pool shares.
    """
    family = serving.container.family
    try:
        tag = images.image_tag(family, serving.container.version or images.default_version(family))
    except ValueError:
        return  # an unknown version: the single-instance rules report it
    primary = images.inference_ami_version(tag, serving.instance_type)

    def name(ami: str | None) -> str:
        return ami or "SageMaker's default AMI"

    for index, pool in enumerate(serving.instance_pools or []):
        if index and (needed := images.inference_ami_version(tag, pool.instance_type)) != primary:
            yield (
                (*path, "instance_pools", index),
                f"{pool.instance_type} runs {tag} on {name(needed)} and {serving.instance_type} on {name(primary)} "
                "(the SageMaker SDK's AMI rule for CUDA 13 images); a variant has one InferenceAmiVersion: choose "
                "pools that run on the same AMI, or pin a container version both run",
            )


def _shared_degree(arch: ModelArchitecture, serving: Serving) -> tuple[int, str | None]:
    """The tensor-parallel degree every pool runs: the team's, or the largest every pool and the model's heads allow."""
    if serving.tensor_parallel_degree is not None:
        return serving.tensor_parallel_degree, None
    instances = [catalog.get_instance(pool.instance_type) for pool in serving.instance_pools or []]
    common = set.intersection(*(set(parallel.valid_degrees(arch, instance)) for instance in instances))
    degree = max(common) if common else 1
    alone = {i.instance_type: parallel.default_degree(arch, i) for i in instances}
    narrower = [f"{name} alone would take {d}" for name, d in alone.items() if d != degree]
    note = f"tensor_parallel_degree={degree}: the largest degree every pool and the model's heads allow" + (
        f" ({', '.join(narrower)})" if narrower else ""
    )
    return degree, note


def _smallest(values: list[int], serving: Serving, setting: str, unit: str) -> tuple[int, int | None, str]:
    """The smallest of the pools' derived values, the deciding pool's index (None: every pool derives the same),
    and the note that says so."""
    pools = serving.instance_pools or []
    index = min(range(len(values)), key=lambda i: (values[i], i))
    value = values[index]
    others = ", ".join(f"{pool.instance_type} {v:,}" for pool, v in zip(pools, values, strict=True) if v != value)
    decider = pools[index]
    if not others:
        return value, None, f"{setting}={value:,}: every pool derives it"
    note = (
        f"{setting}={value:,}: {decider.instance_type} (priority {decider.priority}) holds the least {unit} "
        f"and decides (alone: {others})"
    )
    return value, index, note


def resolve_pooled(
    team: TeamConfig, arch: ModelArchitecture, serving: Serving, path: PathT, single: SingleVariant
) -> tuple[ResolvedServing | None, list[Problem]]:
    """Every pool checked and planned with the one environment; the primary's resolution with `pools` filled."""
    pools = serving.instance_pools or []
    problems: list[Problem] = []
    known = []
    for index, pool in enumerate(pools):
        try:
            catalog.get_instance(pool.instance_type)
            known.append(index)
        except KeyError:
            # The single-instance rules say which types exist; reported once per unknown pool.
            _, unknown = single(team, arch, pool_serving(serving, pool.instance_type), path)
            problems += _at_pool(unknown, path, index, serving)
    if problems:
        return None, problems
    problems += pool_storage_one_kind(serving, path) + pool_ami_one_version(serving, path)
    degree, degree_note = _shared_degree(arch, serving)
    shared: dict[str, object] = {"tensor_parallel_degree": degree}

    def each(**settings: object) -> tuple[list[ResolvedServing | None], list[Problem]]:
        results, found = [], []
        primary: frozenset[Problem] = frozenset()
        for index, pool in enumerate(pools):
            resolved, pool_problems = single(team, arch, pool_serving(serving, pool.instance_type, **settings), path)
            results.append(resolved)
            found += _at_pool(pool_problems, path, index, serving, primary)
            primary = primary or frozenset(pool_problems)
        return results, found

    resolved, found = each(**shared)
    if problems or found or any(r is None for r in resolved):
        return None, problems + found
    notes = [degree_note] if degree_note else []
    decides: dict[int, list[str]] = {}
    if serving.max_model_len is None:
        lengths = [r.max_model_len for r in resolved if r is not None]
        shared["max_model_len"], decider, note = _smallest(lengths, serving, "max_model_len", "KV cache")
        notes.append(note)
        if decider is not None:
            decides.setdefault(decider, []).append("max_model_len")
        resolved, found = each(**shared)
    if serving.max_batch_size is None and not found:
        batches = [r.max_batch_size for r in resolved if r is not None]
        shared["max_batch_size"], decider, note = _smallest(batches, serving, "max_batch_size", "sequences")
        notes.append(note)
        if decider is not None:
            decides.setdefault(decider, []).append("max_batch_size")
        resolved, found = each(**shared)
    if found or any(r is None for r in resolved):
        return None, found
    final = [r for r in resolved if r is not None]
    primary = final[0]
    planned = tuple(
        ResolvedPool(pool.priority, r.instance, r.plan, tuple(decides.get(index, ())))
        for index, (pool, r) in enumerate(zip(pools, final, strict=True))
    )
    kept = tuple(n for n in primary.notes if not n.startswith(("max_model_len=", "max_batch_size=")))
    result = replace(
        primary,
        serving=serving,
        notes=(*notes, *kept),
        pools=tuple(sorted(planned, key=lambda p: p.priority)),
    )
    return result, []


def pool_advisories(team: TeamConfig) -> list[Problem]:
    """Combinations with pools the documentation neither allows nor forbids, one rule function each: said in
    `optigate validate`, not refused.

    The user guide documents pools with real-time and asynchronous endpoints, single models and inference components,
    autoscaling (scale-out on the next available type, scale-in lowest priority first) and CloudWatch metrics with an
    InstanceType dimension; the deployment-guardrails exclusions (blue/green, rolling) do not list pools. Nothing is
    said of shadow variants beside pools. Adapter components beside pools are refused (OG530).
    """
    return [*pools_with_shadow(team), *gate_measures_primary_pool(team)]


@rule_check("OG261", "instance pools beside a shadow variant are undocumented", Severity.NOTE)
def pools_with_shadow(team: TeamConfig) -> Iterator[Found]:
    """A note when a production variant with instance pools (of a shape the config rules accept) is rolled out
    beside a shadow variant (`rollout.strategy: shadow`); the shadow variant runs on serving.instance_type only.

    Why: the SageMaker user guide on instance pools documents them with real-time and asynchronous endpoints, single
    models, inference components and autoscaling, and says nothing of shadow variants beside them: neither allowed
    nor forbidden, so said rather than refused
    (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html).
    """
    serving = team.serving
    if has_pools(serving) and team.rollout.strategy == "shadow":
        yield (
            ("serving", "instance_pools"),
            "undocumented: a shadow variant beside a production variant with instance pools is not described in "
            f"the SageMaker docs ({USER_GUIDE}); the shadow variant runs on {serving.instance_type} only",
        )


# OG262 (pools with scale_to_zero) is retired: scale_to_zero is an inference-component setting, and adapter
# components are refused on pools (OG530, optigate.config.rules.component_rules).
@rule_check("OG263", "the gate measures the priority-1 pool only", Severity.NOTE)
def gate_measures_primary_pool(team: TeamConfig) -> Iterator[Found]:
    """A note when a team with instance pools (of a shape the config rules accept) has a gate candidate: the gate
    benchmarks the candidate and its baseline twin on serving.instance_type (priority 1) only.

    Why: the other pools run the same container environment and are checked by the planner, pool by pool, but not
    measured; what the gate proves holds for the priority-1 type.
    """
    serving = team.serving
    if has_pools(serving) and team.gate.candidate:
        yield (
            ("serving", "instance_pools"),
            f"the gate benchmarks the candidate and its baseline twin on {serving.instance_type} (priority 1) "
            "only; the other pools are checked by the planner, not measured",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    pool_storage_one_kind,
    pool_ami_one_version,
    pools_with_shadow,
    gate_measures_primary_pool,
)
