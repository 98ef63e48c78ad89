"""`optigate advise`: the next optimization step for a team, in order ("a sequence, not a switch", issue 17).

1. container settings (max_model_len, batch, memory fraction) against the requests the team benchmarks;
2. quantize: FP8 where the GPU has FP8 tensor cores (compute capability >= 8.9), AWQ otherwise;
3. speculative decoding, where a decode step at the real concurrency is still memory-bound;
4. freeze the instance family, then compile (TensorRT-LLM);
5. only then a bigger or different instance, compared against a scale-to-zero inference component.
A team serving adapters gets the same steps as gate.candidate blocks, and what its gate needs beside them
(`adapter_gate`: the benchmark mix, a dataset per adapter, what OG401 refuses).

The steps are worded in `serving_steps` (1-3) and `hardware_steps` (4-5), what they say in `findings`, and the
planner's figures (including the speculation roofline) come from `optigate.plan`.
Pure logic: every step reads the team's resolution (`optigate.deployment.ResolvedTeam`, resolved once by the
caller), and every proposed block goes through the same rules as `optigate validate`
(`optigate.advise.admission`); its predicted effect is the re-plan of the merged serving block by that
resolution, never a rule of thumb. Where the config cannot know something (how busy the endpoint is, how
often drafts are accepted), the finding says which input is missing.
"""

from __future__ import annotations

from collections.abc import Mapping

from optigate.advise.adapter_gate import adapter_gate
from optigate.advise.findings import PROVING, RECOMMENDED, TRIED, Advice, Context, Finding
from optigate.advise.hardware_steps import step_compile, step_instance
from optigate.advise.serving_steps import step_container_settings, step_quantize, step_speculation
from optigate.deployment import ResolvedTeam

STEP_FUNCTIONS = (step_container_settings, step_quantize, step_speculation, step_compile, step_instance)


class CannotAdvise(ValueError):
    """A team advise cannot plan (it did not resolve, or the planner has no plan of it)."""


def advise(
    resolved_team: ResolvedTeam,
    *,
    environment: str | None = None,
    instance_count: int | None = None,
    min_instances: int | None = None,
    utilization_pct: float | None = None,
    tried: Mapping[int, str] | None = None,
) -> Advice:
    """Every step of the sequence for the team, now; `tried`: steps a gate report says did not pay off (step ->
    the gate's summary), which are not offered again."""
    baseline = resolved_team.baseline
    if baseline is None or baseline.plan is None or resolved_team.problems:
        raise CannotAdvise(f"team {resolved_team.team.team} does not resolve to a plan: run `optigate validate`")
    ctx = Context(
        resolved_team,
        baseline,
        baseline.plan,
        instance_count or resolved_team.team.serving.instance_count,
        utilization_pct,
        min_instances,
    )
    findings = []
    for function in STEP_FUNCTIONS:
        finding = function(ctx)
        if tried and finding.step in tried and finding.status in (RECOMMENDED, PROVING):
            finding = Finding(finding.step, TRIED, f"the gate did not approve it: {tried[finding.step]}")
        findings.append(finding)
    proposed = next((f.candidate for f in findings if f.status in (RECOMMENDED, PROVING)), None)
    gate = adapter_gate(resolved_team.team, resolved_team.team.gate.candidate or proposed)
    return Advice(resolved_team.team.team, environment, tuple(findings), ctx.concurrency, gate)
