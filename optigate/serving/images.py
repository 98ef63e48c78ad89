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

import ast
import importlib.util
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

# optigate container family -> the SDK's framework name
SDK_FRAMEWORK = {"lmi": "djl-lmi", "lmi-trtllm": "djl-tensorrtllm", "lmi-neuronx": "djl-neuronx"}

# LMI version boundaries of the container itself (each typed engine option's own versions are in its entry of
# optigate.config.lmi_options). LMI v15 (DJL 0.33.0) replaced lmi-dist with vLLM V1 and OPTION_SPECULATIVE_CONFIG.
FIRST_VLLM_SPECULATIVE_CONFIG_VERSION = (0, 33, 0)
#: LMI read `option.quantize=fp8` from the optimization job's serving.properties as `compressed-tensors` from
#: 0.35.0 on: the job quantizes with llm-compressor and rewrites the option (djl-serving commit d4f5ee7,
#: "AutoFP8 to llmcompressor migration", first in tag v0.35.0: serving/docker/partition/sm_neo_quantize.py,
#: NeoQuantizationService.write_properties). Before, AutoFP8 wrote an `fp8` checkpoint and left the option.
FIRST_COMPRESSED_TENSORS_LMI = (0, 35, 0)

#: An LMI DLC tag starts with its DJL/LMI version: `0.36.0-lmi18.0.0-cu128`.
_LMI_TAG = re.compile(r"(\d+\.\d+\.\d+)-lmi")


def version_tuple(version: str) -> tuple[int, ...]:
    """An LMI version as the config and the SDK's tables name it, comparable: `0.36.0` -> (0, 36, 0)."""
    return tuple(int(part) for part in version.split("."))


# The per-version keys the direct reader understands (see the module docstring).
_VERSION_KEYS = {"registries", "repository", "tag_prefix"}


def _sdk_folder() -> Path:
    """The installed SDK's `sagemaker` folder, found without importing the SDK."""
    spec = importlib.util.find_spec("sagemaker.core")  # imports only the `sagemaker` namespace package
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sagemaker SDK (sagemaker.core) is not installed; it ships the image URI tables")
    return Path(next(iter(spec.submodule_search_locations))).parent


def _tables_folder() -> Path:
    return _sdk_folder() / "core" / "image_uri_config"


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


def newest_version(family: str) -> str:
    """The newest version of the family in the SDK's tables: its `latest` alias (what the SDK itself
    resolves `latest` to), else the highest version listed."""
    table = _table(family)
    latest = table.get("version_aliases", {}).get("latest")
    return latest if latest in table["versions"] else known_versions(family)[0]


def default_version(family: str) -> str:
    """The version a serving block without `container.version` runs: the newest in the SDK's tables, so
    an unpinned team moves with the installed SDK (`optigate summary` says which it got and whether a
    pinned team has a newer one)."""
    return newest_version(family)


def cuda_version(tag: str) -> tuple[int, int] | None:
    """The CUDA version an image tag was built for (`0.38.0-lmi29.0.0-cu130` -> (13, 0)), None if it names none."""
    for token in tag.split("-"):
        if token.startswith("cu") and token[2:].isdigit() and len(token) >= 5:
            return int(token[2:-1]), int(token[-1])
    return None


@cache
def _sdk_cuda13_ami_rule() -> tuple[str, frozenset[str]]:
    """The SDK's rule for CUDA 13 images (sagemaker/serve/model_builder_servers.py, ModelBuilder's
    `_resolve_inference_ami_version`): an image tagged `cu130` on one of the instance families documented
    for the GPU 4.1 AMI runs on that AMI (NVIDIA driver 580, CUDA 13.0; the default hosts of those
    families have driver 470, 535 or 550: docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html).
    Read from the module's source, not imported: importing the SDK costs seconds of every synth."""
    source = (_sdk_folder() / "serve" / "model_builder_servers.py").read_text()
    found: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "_CUDA_13_INFERENCE_AMI":
                found[name] = ast.literal_eval(node.value)
            elif name == "_CUDA_13_INFERENCE_AMI_COMPATIBLE_FAMILIES" and isinstance(node.value, ast.Call):
                found[name] = frozenset(ast.literal_eval(node.value.args[0]))
    ami, families = found.get("_CUDA_13_INFERENCE_AMI"), found.get("_CUDA_13_INFERENCE_AMI_COMPATIBLE_FAMILIES")
    if not isinstance(ami, str) or not isinstance(families, frozenset):
        raise RuntimeError("the installed SageMaker SDK no longer states its CUDA 13 inference AMI rule where expected")
    return ami, families


def tag_of(uri: str) -> str:
    """The tag of an image URI (`…/djl-inference:0.38.0-lmi29.0.0-cu130` -> `0.38.0-lmi29.0.0-cu130`)."""
    return uri.rpartition(":")[2] if ":" in uri.rpartition("/")[2] else ""


def lmi_version(image: str) -> tuple[int, ...] | None:
    """The DJL/LMI version of an LMI DLC URI (`.../djl-inference:0.36.0-lmi18.0.0-cu128`), None if unknown."""
    match = _LMI_TAG.match(tag_of(image))
    return version_tuple(match.group(1)) if match else None


def inference_ami_version(tag: str, instance_type: str) -> str | None:
    """The InferenceAmiVersion a production variant of `instance_type` needs to run an image tagged `tag`
    (the SDK's rule: :func:`_sdk_cuda13_ami_rule`), None for SageMaker's default AMI."""
    if cuda_version(tag) != (13, 0):
        return None
    ami, families = _sdk_cuda13_ami_rule()
    return ami if instance_type.rsplit(".", 1)[0] in families else None


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


def inference_ami_version_for(tag: str, instance_types: list[str]) -> str | None:
    """The one InferenceAmiVersion a variant whose instances may be any of `instance_types` (instance pools)
    needs; a ValueError if they need different ones (a variant has a single AMI)."""
    needed = {inference_ami_version(tag, instance_type) for instance_type in instance_types}
    if len(needed) > 1:
        raise ValueError(
            f"{', '.join(instance_types)} need different host AMIs for an image tagged {tag} "
            f"({', '.join(str(a) for a in needed)}); a variant has one InferenceAmiVersion"
        )
    return needed.pop()
