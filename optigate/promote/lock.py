"""Lock files: which gate-approved model package each team serves in one environment.

`optigate resolve --env E` asks the Model Registry (before synth, with credentials) and writes
`<locks>/<E>.json`; synth only reads it, so `cdk synth` stays offline and deterministic, and the
pipeline's cloud assembly carries exactly what it deploys. No lock, or no package for a team:
the team serves the baseline of its team file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

# Re-exported: the group a team's gate records into, named in optigate.naming with every other name.
from optigate.naming import package_group  # noqa: F401


def compiled_for_metadata(target: Mapping[str, str]) -> str:
    """`compiled_for` as a CustomerMetadataProperties value: space-separated key=value pairs (the value's pattern in
    botocore allows letters, digits, spaces and `_.:/=+-@`, at most 256 characters)."""
    return " ".join(f"{key}={value}" for key, value in sorted(target.items()))


def parse_compiled_for(value: str | None) -> dict[str, str] | None:
    """The model package's `compiled_for` metadata as a mapping (None when the package is not a compiled engine)."""
    if not value:
        return None
    pairs = [item.partition("=") for item in value.split()]
    return {key: item for key, sep, item in pairs if sep}


#: CustomerMetadataProperties keys of the adapter versions a package was approved with: `adapter:<name>` = the
#: archive's S3 URI (botocore 1.44 sagemaker CustomerMetadataMap: keys up to 128 characters of
#: `\p{L}\p{Z}\p{N}_.:/=+-@`, values up to 256, at most 50 entries; adapter names are at most 32 characters, the
#: URIs at most 256 by OG453).
ADAPTER_METADATA_PREFIX = "adapter:"


def adapters_metadata(adapters: Mapping[str, str]) -> dict[str, str]:
    """The approved adapter versions as CustomerMetadataProperties entries (the gate's CreateModelPackage)."""
    return {f"{ADAPTER_METADATA_PREFIX}{name}": uri for name, uri in sorted(adapters.items())}


def parse_adapters(metadata: Mapping[str, str]) -> dict[str, str]:
    """The adapter versions a model package's metadata records, by adapter name (empty: none)."""
    return {
        key.removeprefix(ADAPTER_METADATA_PREFIX): uri
        for key, uri in metadata.items()
        if key.startswith(ADAPTER_METADATA_PREFIX) and key != ADAPTER_METADATA_PREFIX
    }


class ServedPackage(BaseModel):
    """An Approved model package as a team stack deploys it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_package_arn: str
    image: str
    model_data_uri: str = Field(description="S3 prefix of the (optimized) weights, uncompressed.")
    environment: dict[str, str] = Field(default_factory=dict, description="The container environment the gate proved.")
    fingerprint: str | None = Field(None, description="The gate's fingerprint of the candidate it proved.")
    report: str | None = None
    compiled_for: dict[str, str] | None = Field(
        None,
        description="A compiled engine's target (instance type, TP, maximum length, batch) as the gate recorded it; "
        "None: not a compiled engine, or recorded before optigate recorded it.",
    )
    adapters: dict[str, str] = Field(
        default_factory=dict,
        description="The adapter versions the gate approved, adapter name -> .tar.gz S3 URI: deployed instead of the "
        "team file's. An adapter not named here serves as the team file says.",
    )


class Lock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment: str
    resolved_at: str
    teams: dict[str, ServedPackage | None] = Field(
        default_factory=dict, description="None: no Approved package, the baseline is served."
    )


def default_locks_dir(config_dir: str | Path) -> Path:
    """Where `optigate resolve` writes and synth reads the locks of a config folder."""
    return Path(config_dir, "locks")


def lock_path(locks_dir: str | Path, environment: str) -> Path:
    return Path(locks_dir, f"{environment}.json")


def read_lock(locks_dir: str | Path | None, environment: str) -> Lock | None:
    if locks_dir is None:
        return None
    path = lock_path(locks_dir, environment)
    if not path.exists():
        return None
    lock = Lock.model_validate_json(path.read_text())
    if lock.environment != environment:
        raise ValueError(f"{path}: the lock is for environment {lock.environment!r}, not {environment!r}")
    return lock


def write_lock(lock: Lock, locks_dir: str | Path) -> Path:
    path = lock_path(locks_dir, lock.environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return path
