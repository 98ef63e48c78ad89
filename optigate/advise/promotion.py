"""How a change the gate proves is promoted into the team file, said by `optigate advise` where the team's
gate.candidate already holds a step (nothing to paste) and after an approving report.

The gate's approval promotes the model package, not the file: `optigate resolve --env E` writes the lock
(config/locks/E.json: the package's image, weights and container environment) and synth deploys exactly that. The
team file still says the old serving block and the proven candidate, whose next gate run passes at once as a no-op
(the same fingerprint, approved). Promoting it into the file makes the file say what runs and frees gate.candidate
for the next step: the change's serving keys move into `serving`, a new adapter version into its `adapters` entry,
and what only the gate's optimization job made (weights it quantized or compiled, a head it trained) is served from
the package's weights, the lock's `model_data_uri`. docs/guide.md (Promotion) says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from optigate.config.models import CANDIDATE_ADAPTERS, Serving
from optigate.deployment import ResolvedTeam

#: Where the guide says it.
GUIDE = "docs/guide.md#promoting-a-proven-change-into-the-team-file"


@dataclass(frozen=True)
class Promotion:
    """The steps from an approved candidate to a team file that serves it, and the block to paste, if any."""

    steps: tuple[str, ...]
    block: dict[str, Any] | None = None

    @property
    def block_yaml(self) -> str | None:
        if not self.block:
            return None
        return yaml.safe_dump(self.block, sort_keys=False, default_flow_style=False)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": list(self.steps), "block": self.block, "block_yaml": self.block_yaml, "guide": GUIDE}


def promotion(resolved_team: ResolvedTeam, change: Mapping[str, Any]) -> Promotion:
    """How to promote `change` (a gate.candidate the gate approves) into the team's file."""
    serving = {key: value for key, value in change.items() if key in Serving.model_fields}
    candidate, baseline = resolved_team.candidate, resolved_team.baseline
    # the gate's optimization job wrote other weights than the file's (quantized or compiled once, not at start-up)
    written = (
        bool(resolved_team.optimization_configs)
        and candidate is not None
        and baseline is not None
        and (candidate.downloaded_weights != baseline.downloaded_weights or "compile" in change)
    )
    head = resolved_team.trained_head is not None
    adapters = dict(change.get(CANDIDATE_ADAPTERS) or {})
    steps = [
        "once the gate approves it in an environment, `optigate resolve --env <env>` (the pipeline's synth runs it) "
        "locks the approved package in config/locks/<env>.json (its image, weights as model_data_uri, container "
        "environment) and synth deploys exactly that; `optigate summary --env <env>` names the package",
    ]
    moved = ", ".join(key for key in serving if not (head and key == "speculative_decoding"))
    block: dict[str, Any] = {}
    if moved:
        block["serving"] = {key: value for key, value in serving.items() if key in moved.split(", ")}
        steps.append(f"make the team file say what runs: move {moved} from gate.candidate into serving (below)")
    if written:
        weights = candidate.downloaded_weights if candidate is not None else "the precision the job wrote"
        steps.append(
            "the gate's optimization job wrote the weights it proved: set model.source.s3_uri to the lock's "
            f"model_data_uri and model.weights: {weights}, so the serving block starts those weights instead of "
            "converting the old ones at start-up"
        )
    if head:
        steps.append(
            "the trained EAGLE head is in the package's weights: serve it as serving.speculative_decoding {method: "
            "eagle, model_s3_uri: its folder under the lock's model_data_uri} (the lock's OPTION_SPECULATIVE_CONFIG "
            "names it); a head is trained only under gate.candidate (OG407)"
        )
    if adapters:
        block["adapters"] = [{"name": name, "s3_uri": uri} for name, uri in adapters.items()]
        steps.append(
            "set each proven adapter's s3_uri in adapters to its new archive (below; keep its other keys): the lock "
            "serves the approved versions until the file does"
        )
    steps.append(
        "then set gate.candidate to the next step's block: an unchanged candidate passes its gate at once, a no-op "
        "(the approved package has its fingerprint)"
    )
    return Promotion(tuple(steps), block or None)
