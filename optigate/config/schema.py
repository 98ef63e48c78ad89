"""JSON schema of the config files, generated from the pydantic models for editors.

Point yaml-language-server at it with a first line such as
`# yaml-language-server: $schema=../schema/team.schema.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from optigate.config.models import CalibrationFile, EnvironmentsFile, TeamConfig

SCHEMAS: dict[str, type[BaseModel]] = {
    "team.schema.json": TeamConfig,
    "environments.schema.json": EnvironmentsFile,
    "calibration.schema.json": CalibrationFile,
}


def render_schemas() -> dict[str, str]:
    rendered = {}
    for name, model in SCHEMAS.items():
        schema = model.model_json_schema(mode="validation")
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"https://optigate.dev/schema/{name}"
        rendered[name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return rendered


def stale_schemas(folder: str | Path) -> list[str]:
    """Names of schema files in `folder` that differ from the models (missing counts as stale)."""
    stale = []
    for name, text in render_schemas().items():
        path = Path(folder, name)
        if not path.exists() or path.read_text() != text:
            stale.append(name)
    return stale


def write_schemas(folder: str | Path) -> list[Path]:
    Path(folder).mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_schemas().items():
        path = Path(folder, name)
        path.write_text(text)
        written.append(path)
    return written
