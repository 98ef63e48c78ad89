"""The weights as stored at the team's source, resolved once per team: what every variant downloads unless the
gate's optimization job writes it new weights, and what the engine can quantize at start-up.

Known, in this order, from: model.local_dir's config.json (read here; nothing is fetched from a hub), the
catalog's entry for a Hugging Face id (optigate/plan/data/models.yaml), or model.weights. A stated value that
contradicts a known one is refused. Unknown weights are taken as bf16 and said so: 16 bits is what nearly every
published checkpoint stores, and it is the larger of what a wrong guess could be for the timeouts (bar fp32), while
a serving quantization that needs pre-quantized weights is then refused until the team states them (fail closed
where a wrong guess would stop the endpoint from starting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from optigate.config.models import UNQUANTIZED_WEIGHTS, TeamConfig
from optigate.config.rules import Problem
from optigate.config.rules.checkpoint_rules import local_config_readable, weights_agree
from optigate.plan.checkpoints import weights_in_catalog, weights_of_config

ASSUMED_WEIGHTS = "bf16"
#: The planner's precision for 16- or 32-bit weights served unquantized (vLLM's dtype auto serves 16 bits).
SIXTEEN_BIT = "bf16"


def served_precision(stored: str, quantization: str | None) -> str:
    """The precision the engine serves (the planner's name): serving.quantization if set, else the stored format
    when the checkpoint is quantized (vLLM reads it from the checkpoint's quantization_config), else 16 bit. The one
    place this is decided: the plan, the timeouts' served GB and the precision rules read it."""
    if quantization is not None:
        return quantization
    return SIXTEEN_BIT if stored in UNQUANTIZED_WEIGHTS else stored


def applied_quantization(stored: str, quantization: str | None) -> str | None:
    """The quantization to apply to the stored weights (OPTION_QUANTIZE: by the engine at start-up, or by the gate's
    optimization job, which reads the same option); None when they are served as stored. Never set on a quantized
    checkpoint: djl-serving's vLLM user guide says not to set option.quantize on a pre-quantized model, and vLLM
    refuses a method other than the checkpoint's (vllm/config/model.py, ModelConfig._verify_quantization)."""
    return quantization if quantization is not None and stored in UNQUANTIZED_WEIGHTS else None


@dataclass(frozen=True)
class Checkpoint:
    """The weights as stored at the team's source, and how optigate knows."""

    weights: str
    known_from: str
    assumed: bool = False

    @property
    def note(self) -> str:
        """One line for the summary and the plan."""
        return f"as stored: {self.weights} ({self.known_from})"


def _local_config(team: TeamConfig, local_dir: str) -> tuple[str | None, str, list[Problem]]:
    """(weights, where read, problems) of model.local_dir's config.json."""
    folder = Path(local_dir)
    if not folder.is_absolute() and team.folder is not None:
        folder = Path(team.folder) / folder
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        why = "no config.json" if isinstance(error, FileNotFoundError) else f"an unreadable config.json ({error})"
        return None, str(path), local_config_readable(local_dir, why)
    weights = weights_of_config(config) if isinstance(config, dict) else None
    if weights is None:
        return None, str(path), []
    return weights, f"{path}: quantization_config / torch_dtype", []


def resolve_checkpoint(team: TeamConfig) -> tuple[Checkpoint, list[Problem]]:
    """The team's stored weights, and the problems of what the team file says about them."""
    model = team.model
    stated = model.weights
    known: tuple[str, str] | None = None
    if model.local_dir is not None:
        weights, where, unread = _local_config(team, model.local_dir)
        if unread:
            return Checkpoint(stated or ASSUMED_WEIGHTS, "model.weights", stated is None), unread
        if weights is None and stated is None:
            return Checkpoint(ASSUMED_WEIGHTS, where, True), local_config_readable(
                model.local_dir, "a quantization_config optigate has no name for"
            )
        known = (weights, where) if weights is not None else None
    elif model.source.hugging_face is not None:
        found = weights_in_catalog(model.source.hugging_face.model_id)
        if found is not None:
            known = (found[0], f"the catalog's {model.source.hugging_face.model_id}")
    if known is not None:
        return Checkpoint(*known), weights_agree(stated, *known)
    if stated is not None:
        return Checkpoint(stated, "model.weights"), []
    return (
        Checkpoint(
            ASSUMED_WEIGHTS,
            "not known: assumed, as most published checkpoints store; state model.weights if it is not",
            assumed=True,
        ),
        [],
    )
