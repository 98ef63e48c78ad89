"""Small team files for tests: the least a team file needs, plus what a test adds."""

from __future__ import annotations

import textwrap
from pathlib import Path


def minimal_team(folder: Path, architecture: str, instance: str, serving_extra: str = "", tail: str = "") -> Path:
    """`folder/team.yaml`: team `demo` with `architecture` on `instance`; `serving_extra` is indented into the
    serving block, `tail` appended at the top level (both dedented first)."""
    path = folder / "team.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            team: demo
            model:
              source:
                s3_uri: s3://acme-models/m/
              architecture: {architecture}
            serving:
              instance_type: {instance}
            """
        )
        + textwrap.indent(textwrap.dedent(serving_extra), "  ")
        + textwrap.dedent(tail)
    )
    return path
