"""The customer-managed KMS keys of what a team's roles read from S3, in one environment (no CDK here).

`model.source.kms_key_arn` encrypts the model's prefix; `adapters[i].kms_key_arn` an adapter's archives (the team
file's and any new version the gate proves). S3 needs kms:Decrypt of an SSE-KMS object's key to download it, a
multipart copy (UploadPartCopy) of it too (awsdocs/amazon-s3-userguide UsingKMSEncryption.md and
troubleshoot-403-errors.md); a source is never written, so nothing more. The key's own policy must allow the same
roles: that is its owner's to grant (docs/guide.md, "Before the first cdk deploy").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from optigate.config.models import TeamConfig


@dataclass(frozen=True)
class SourceKeys:
    """The keys, `{region}` filled in: the model prefix's (None: none) and each adapter's that has one, by name."""

    model: str | None = None
    adapters: tuple[tuple[str, str], ...] = ()

    def adapter(self, name: str) -> str | None:
        """The key of adapter `name`'s archives, or None."""
        return dict(self.adapters).get(name)

    def of_adapters(self, names: Iterable[str]) -> tuple[str, ...]:
        """The keys of these adapters' archives, each once, sorted."""
        return tuple(sorted({key for name in names if (key := self.adapter(name)) is not None}))

    @property
    def model_role(self) -> tuple[str, ...]:
        """What the model's execution role decrypts: the model's prefix (the live model, the gate's twin, candidate
        and optimization job read it as that role) and every adapter's archives (each inference component's
        ArtifactUrl), each key once, sorted."""
        return tuple(sorted({*((self.model,) if self.model else ()), *(key for _, key in self.adapters)}))


def source_keys(team: TeamConfig, region: str) -> SourceKeys:
    """The team's source keys in `region` (`{region}` is allowed in a multi-Region key's ARN only: the config's
    pattern)."""

    def in_region(arn: str) -> str:
        return arn.replace("{region}", region)

    model = team.model.source.kms_key_arn
    return SourceKeys(
        model=in_region(model) if model else None,
        adapters=tuple((a.name, in_region(a.kms_key_arn)) for a in team.adapters if a.kms_key_arn),
    )


def key_region(key_arn: str) -> str:
    """The region of a key ARN (arn:<partition>:kms:<region>:...): an SSE-KMS key is in its bucket's region, where S3
    calls it."""
    return key_arn.split(":")[3]
