"""Config: what the user said (pydantic models, YAML loader with lines, semantic rules)."""

from optigate.config.loader import ConfigError, ConfigIssue, Project, load_environments, load_project, load_team
from optigate.config.models import EnvironmentsFile, Serving, TeamConfig

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "EnvironmentsFile",
    "Project",
    "Serving",
    "TeamConfig",
    "load_environments",
    "load_project",
    "load_team",
]
