"""LMI container images, resolved offline from the tables the SageMaker SDK ships.

`cdk synth` must not call AWS, so the image URI for a region and version comes from the JSON
tables the SDK ships (`sagemaker/core/image_uri_config/djl-*.json`), read directly: importing the
SDK for `image_uris.retrieve` costs ~2 s and each call reloads botocore's endpoint data, which made
image resolution a third of a whole-app synth. The DJL tables are flat (repository, tag_prefix and
registries per version, plus version aliases), so the URI is what `retrieve` builds for them:
`<registry>.dkr.<ECR hostname of the region>/<repository>:<tag_prefix>`; a table with anything else
(processors, Python versions, container versions) is refused rather than guessed, and a test checks
the result against `image_uris.retrieve` for every version and region of every family.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

# optigate container family -> the SDK's framework name
SDK_FRAMEWORK = {"lmi": "djl-lmi", "lmi-trtllm": "djl-tensorrtllm", "lmi-neuronx": "djl-neuronx"}

# Defaults: the newest version of each family that the SDK tables list when this was written.
DEFAULT_VERSION = {"lmi": "0.36.0", "lmi-trtllm": "0.33.0", "lmi-neuronx": "0.29.0"}

# LMI v15 (DJL 0.33.0) replaced lmi-dist with vLLM V1 and OPTION_SPECULATIVE_CONFIG.
FIRST_VLLM_SPECULATIVE_CONFIG_VERSION = (0, 33, 0)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


# The per-version keys the direct reader understands (see the module docstring).
_VERSION_KEYS = {"registries", "repository", "tag_prefix"}


def _tables_folder() -> Path:
    spec = importlib.util.find_spec("sagemaker.core")  # imports only the `sagemaker` namespace package
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sagemaker SDK (sagemaker.core) is not installed; it ships the image URI tables")
    return Path(next(iter(spec.submodule_search_locations)), "image_uri_config")


@cache
def _table(family: str) -> dict:
    table = json.loads((_tables_folder() / f"{SDK_FRAMEWORK[family]}.json").read_text())
    for version, config in table["versions"].items():
        if set(config) - _VERSION_KEYS:
            raise RuntimeError(
                f"the SDK's {SDK_FRAMEWORK[family]}.json gives version {version} "
                f"{sorted(set(config) - _VERSION_KEYS)}: the direct reader does not know them"
            )
    return table


def _version_config(family: str, version: str) -> dict:
    table = _table(family)
    name = table.get("version_aliases", {}).get(version, version)
    if name not in table["versions"]:
        raise ValueError(
            f"no {family} image version {version!r} in the SageMaker SDK's tables; "
            f"known: {', '.join(known_versions(family))}"
        )
    return table["versions"][name]


def known_versions(family: str) -> list[str]:
    return sorted(_table(family)["versions"], key=version_tuple, reverse=True)


def regions_for(family: str, version: str) -> list[str]:
    return sorted(_version_config(family, version)["registries"])


def image_tag(family: str, version: str) -> str:
    return _version_config(family, version)["tag_prefix"]


@cache
def _endpoint_resolver() -> Any:
    """botocore's endpoint tables, loaded once (the SDK's `retrieve` reloads them on every call)."""
    import botocore.loaders
    import botocore.regions

    return botocore.regions.EndpointResolver(botocore.loaders.create_loader().load_data("endpoints"))


def ecr_hostname(region: str) -> str:
    """ECR's hostname in the region, from botocore's endpoint tables (`ecr.<region>.amazonaws.com[.cn]`)."""
    endpoint = _endpoint_resolver().construct_endpoint("ecr", region)
    if not endpoint and region == "il-central-1":  # as the SDK's retrieve: absent from older botocore tables
        return f"ecr.{region}.amazonaws.com"
    if not endpoint:
        raise ValueError(f"botocore's endpoint tables know no ECR endpoint in region {region!r}")
    return str(endpoint["hostname"])


@cache
def image_uri(family: str, version: str, region: str) -> str:
    """The ECR image URI for the family, version and region (no AWS call; resolved once per process)."""
    config = _version_config(family, version)
    registries = config["registries"]
    if region not in registries:
        raise ValueError(
            f"no {family} {version} image in region {region!r}; the SageMaker SDK's tables list: "
            f"{', '.join(sorted(registries))}"
        )
    return f"{registries[region]}.dkr.{ecr_hostname(region)}/{config['repository']}:{config['tag_prefix']}"


def image_repository_arn(uri: str) -> str:
    """`arn:aws:ecr:<region>:<account>:repository/<name>` for an ECR image URI (for least-privilege pulls)."""
    registry, _, rest = uri.partition("/")
    account, _, _, region, *_ = registry.split(".")
    repository = rest.split(":")[0].split("@")[0]
    partition = "aws-cn" if registry.endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repository}"
