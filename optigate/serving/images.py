"""LMI container images, resolved offline from the tables the SageMaker SDK ships.

`cdk synth` must not call AWS, so the image URI for a region and version comes from
`sagemaker/core/image_uri_config/*.json` through the SDK's own `image_uris.retrieve`.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path

# optigate container family -> the SDK's framework name
SDK_FRAMEWORK = {"lmi": "djl-lmi", "lmi-trtllm": "djl-tensorrtllm", "lmi-neuronx": "djl-neuronx"}

# Defaults: the newest version of each family that the SDK tables list when this was written.
DEFAULT_VERSION = {"lmi": "0.36.0", "lmi-trtllm": "0.33.0", "lmi-neuronx": "0.29.0"}

# LMI v15 (DJL 0.33.0) replaced lmi-dist with vLLM V1 and OPTION_SPECULATIVE_CONFIG.
FIRST_VLLM_SPECULATIVE_CONFIG_VERSION = (0, 33, 0)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@cache
def _table(family: str) -> dict:
    spec = importlib.util.find_spec("sagemaker.core")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sagemaker SDK (sagemaker.core) is not installed; it ships the image URI tables")
    folder = Path(next(iter(spec.submodule_search_locations)), "image_uri_config")
    return json.loads((folder / f"{SDK_FRAMEWORK[family]}.json").read_text())


def known_versions(family: str) -> list[str]:
    return sorted(_table(family)["versions"], key=version_tuple, reverse=True)


def regions_for(family: str, version: str) -> list[str]:
    return sorted(_table(family)["versions"][version]["registries"])


def image_tag(family: str, version: str) -> str:
    return _table(family)["versions"][version]["tag_prefix"]


def image_uri(family: str, version: str, region: str) -> str:
    """The ECR image URI for the family, version and region (no AWS call)."""
    from sagemaker.core import image_uris  # imported lazily: the SDK costs ~2 s to import

    return image_uris.retrieve(SDK_FRAMEWORK[family], region=region, version=version)


def image_repository_arn(uri: str) -> str:
    """`arn:aws:ecr:<region>:<account>:repository/<name>` for an ECR image URI (for least-privilege pulls)."""
    registry, _, rest = uri.partition("/")
    account, _, _, region, *_ = registry.split(".")
    repository = rest.split(":")[0].split("@")[0]
    partition = "aws-cn" if registry.endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repository}"
