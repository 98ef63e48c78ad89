"""Load and validate config files, reporting every problem of a file at once with its line.

Errors read `config/teams/chat.yaml:14 serving.max_model_len: <what is wrong and what to do>`.
Shape and type problems come from pydantic; cross-field problems from `optigate.config.rules`;
a caller adds the checks that need the catalog or the plan (`team_checks`, see `optigate.deployment`).
Both are mapped back to the YAML line through the composed node tree.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from optigate.config.models import Calibration, CalibrationFile, EnvironmentsFile, TeamConfig
from optigate.config.reader import (
    ConfigError,
    ConfigIssue,
    PathT,
    YamlDocument,
    format_path,
    read_yaml,
    shown,
)
from optigate.config.reader import display_name as _display_name
from optigate.config.rules import (
    Problem,
    check_capture_training,
    check_environments,
    check_overrides,
    check_regions,
    check_team,
)
from optigate.config.rules.cross_file import TEAM_IN_ENVIRONMENT_EXISTS, TEAM_NAME_ONCE
from optigate.config.rules.registry import rule_of_model_error
from optigate.config.rules.workload_rules import capture_replay_problems
from optigate.config.schema_messages import expected_type, message

# Checks of a later layer on a parsed team (see load_team).
TeamChecks = Callable[[TeamConfig], list[Problem]]
ModelT = TypeVar("ModelT", bound=BaseModel)


# --------------------------------------------------------------------------- pydantic errors


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[PathT, bool]:
    """Map a pydantic loc to the YAML path, dropping union-branch names pydantic inserts.

    Returns the path and whether the error belongs to a union branch the data did not take
    (e.g. the `str` branch of `architecture` when the user gave a mapping), which is noise.
    """
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and node.get("method") == part:
            continue  # discriminated-union tag
        elif part in ("str", "int", "float", "bool"):
            return tuple(path), not isinstance(node, (str, int, float, bool)) or isinstance(node, dict)
        elif isinstance(part, str) and part[:1].isupper():
            if index == len(loc) - 1:
                continue  # the model member of a union a scalar did not fit: reported at the value's own path
            if not isinstance(node, dict):
                return tuple(path), True  # a model branch for a scalar value
            continue
        else:
            path.append(part)
            node = None
    return tuple(path), False


def issues_from_validation_error(
    document: YamlDocument, error: ValidationError, root: type[BaseModel]
) -> list[ConfigIssue]:
    """Each error at its line, in optigate's words (`optigate.config.schema_messages`); a value that fits no member of a
    union (a model name or a mapping of fields) is one issue saying every form it could take."""
    issues: list[ConfigIssue] = []
    seen: set[tuple[str, str]] = set()
    expected_at: dict[str, list[str]] = {}  # a union's type errors at one path: merged into one issue
    for item in error.errors(include_url=False):
        path, is_noise = _data_path(document.data, item["loc"])
        if is_noise:
            continue
        where = format_path(path)
        expected = expected_type(item, root)
        if expected is not None and item["input"] is not None and where in expected_at:
            if expected not in expected_at[where]:
                expected_at[where].append(expected)
            continue
        if expected is not None and item["input"] is not None:
            expected_at[where] = [expected]
        entry = ConfigIssue(document.file, document.line_of(path), where, message(item, root), _rule_id(item))
        if (entry.path, entry.message) not in seen:
            seen.add((entry.path, entry.message))
            issues.append(entry)
    for index, issue in enumerate(issues):
        forms = expected_at.get(issue.path, [])
        if len(forms) > 1 and issue.message.startswith("expected "):
            got = issue.message[issue.message.index(" (got ") :]
            issues[index] = replace(issue, message=f"expected {' or '.join(forms)}{got}")
    return issues


def _rule_id(error: ErrorDetails) -> str | None:
    """The ID of the registered rule a model validator's error reports (pure shape and type errors have none)."""
    if error["type"] != "value_error":
        return None
    found = rule_of_model_error(str(error.get("ctx", {}).get("error", "")))
    return found.id if found else None


# --------------------------------------------------------------------------- public API


def _parse(document: YamlDocument, model: type[ModelT]) -> ModelT:
    if not isinstance(document.data, dict):
        got = "nothing (the file is empty or only comments)" if document.data is None else shown(document.data)
        message = (
            f"expected the file's keys at the top level (`key: value` lines), got {got}; see docs/configuration.md"
        )
        raise ConfigError([ConfigIssue(document.file, 1, "", message)])
    try:
        return model.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(issues_from_validation_error(document, error, model)) from None


def load_team(path: str | Path, *, rules: bool = True, team_checks: TeamChecks | None = None) -> TeamConfig:
    """Read, validate and rule-check one team file; raise ConfigError listing every problem.

    `team_checks` adds the checks of a later layer (the catalog, the capacity plan: see
    `optigate.deployment`), reported at their lines with the config's own. `rules=False` checks the
    schema only: for tools that read thresholds in environments without the image tables or the
    catalog (the evaluation container).
    """
    document = read_yaml(Path(path))
    try:
        team = _parse(document, TeamConfig)
    except ConfigError as schema_error:
        known = _without_unknown_keys(document.data) if rules else None
        if known is None:
            raise
        # Unknown keys change nothing the model reads: the rules still judge the rest, so one run shows the
        # typo and the rule problems together.
        problems = check_team(known) + (team_checks(known) if team_checks is not None else [])
        issues = schema_error.issues + _issues(document, problems)
        raise ConfigError(sorted(issues, key=lambda issue: issue.line or 0)) from None
    team.with_calibrations(calibrations_for(Path(path))).located_in(str(Path(path).parent))
    if not rules:
        return team
    problems = check_team(team)
    if team_checks is not None:
        problems += team_checks(team)
    if problems:
        raise ConfigError(_issues(document, problems))
    return team


#: Beside environments.yaml: what the teams' own gate runs measured (`optigate plan --calibrate`).
CALIBRATION_FILE = "calibration.yaml"


def calibration_path(team_file: Path) -> Path | None:
    """config/calibration.yaml for a team file under config/teams/, else None (an ad-hoc file has no project)."""
    return team_file.parent.parent / CALIBRATION_FILE if team_file.parent.name == "teams" else None


def load_calibrations(path: Path) -> tuple[Calibration, ...]:
    """The calibrations of a calibration.yaml (none when it does not exist); a malformed file is a ConfigError whose
    issues name the file, the line and the YAML path, each on one line. A file without `format_version` (written
    before versioning) is read; another version is refused naming both (CalibrationFile)."""
    if not path.exists():
        return ()
    return tuple(_parse(read_yaml(path), CalibrationFile).calibrations)


def calibrations_for(team_file: Path) -> tuple[Calibration, ...]:
    path = calibration_path(team_file)
    return load_calibrations(path) if path is not None else ()


def _without_unknown_keys(data: Any) -> TeamConfig | None:
    """The team without the keys the schema does not know, when unknown keys are its only schema errors."""
    try:
        TeamConfig.model_validate(data)
    except ValidationError as error:
        if any(item["type"] != "extra_forbidden" for item in error.errors()):
            return None
        pruned = copy.deepcopy(data)
        for item in error.errors():
            path, _ = _data_path(data, item["loc"])
            parent = pruned
            try:
                for part in path[:-1]:
                    parent = parent[part]
            except (KeyError, IndexError, TypeError):
                return None
            if not path or not isinstance(parent, dict):
                return None
            parent.pop(path[-1], None)
        try:
            return TeamConfig.model_validate(pruned)
        except ValidationError:
            return None
    return None


def _issues(document: YamlDocument, problems: list[Problem]) -> list[ConfigIssue]:
    """Problems as issues at their lines, in file order (a problem without a line comes first)."""
    issues = [
        ConfigIssue(document.file, document.line_of(p.path), format_path(p.path), p.message, p.rule_id)
        for p in problems
    ]
    return sorted(issues, key=lambda issue: issue.line or 0)


def load_environments(path: str | Path) -> EnvironmentsFile:
    document = read_yaml(Path(path))
    environments = _parse(document, EnvironmentsFile)
    problems = check_environments(environments) + check_regions(environments)
    if problems:
        raise ConfigError(_issues(document, problems))
    return environments


@dataclass(frozen=True)
class Project:
    """Every config file of a checkout, validated together."""

    environments: EnvironmentsFile
    teams: dict[str, TeamConfig]
    team_files: dict[str, str]


def team_files(config_dir: str | Path) -> list[Path]:
    return sorted(Path(config_dir, "teams").glob("*.y*ml"))


def declared_team(path: Path) -> str | None:
    """The `team:` a file declares, read leniently (a broken file declares nothing)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = data.get("team") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def team_file(config_dir: str | Path, team: str) -> Path:
    """The file that defines `team`: `teams/<team>.yaml` (the convention), else the one file declaring it.

    Only the files whose name does not give the team away are read, leniently: another team's broken file
    must not stop this team's check (`cdk synth -c team=...`, a team's own CI)."""
    files = team_files(config_dir)
    named = [path for path in files if path.stem == team]
    # A copied file not yet renamed inside (search.yaml still saying `team: support`) is not search's: building it
    # as `-c team=search` would deploy over support's stacks.
    misnamed = [path for path in named if declared_team(path) not in (team, None)]
    if len(named) == 1 and not misnamed:
        return named[0]
    declaring = [path for path in files if declared_team(path) == team]
    if len(declaring) == 1:
        return declaring[0]
    folder = _display_name(Path(config_dir, "teams"))
    if misnamed and not declaring:
        path = misnamed[0]
        message = (
            f"{_display_name(path)} declares team '{declared_team(path)}', not '{team}': "
            f"set `team: {team}` in it (or name the file after its team)"
        )
    elif declaring:
        where = ", ".join(_display_name(path) for path in declaring)
        message = f"team '{team}' is defined by {len(declaring)} files ({where}); keep one"
    else:
        known = [path.stem for path in files]
        close = difflib.get_close_matches(team, known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        message = f"no file in {folder} defines team '{team}'; {hint}known: {', '.join(known) or 'none'}"
    raise ConfigError([ConfigIssue(folder, None, "team", message)])


def load_project(
    config_dir: str | Path = "config",
    *,
    team_checks: TeamChecks | None = None,
    only: Collection[Path] | None = None,
) -> Project:
    """Load environments.yaml and every team file; collect the problems of all files before raising.

    `team_checks`: as for `load_team`, run on every team file. `only`: read these team files and no other
    (one team's synth or check; the cross-file checks then cover the files read, and an environment's
    `teams:` list may name teams whose files were not read)."""
    issues: list[ConfigIssue] = []
    environments: EnvironmentsFile | None = None
    environments_path = Path(config_dir, "environments.yaml")
    try:
        environments = load_environments(environments_path)
    except ConfigError as error:
        issues += error.issues
    teams: dict[str, TeamConfig] = {}
    files: dict[str, str] = {}
    declared: dict[Path, str | None] | None = None
    for path in team_files(config_dir) if only is None else sorted(Path(p) for p in only):
        try:
            team = load_team(path, team_checks=team_checks)
        except ConfigError as error:
            issues += error.issues
            continue
        if team.team in teams:
            issues.append(
                ConfigIssue(
                    _display_name(path),
                    1,
                    "team",
                    f"team name '{team.team}' is also used by {files[team.team]}",
                    TEAM_NAME_ONCE.id,
                )
            )
            continue
        teams[team.team] = team
        files[team.team] = _display_name(path)
        if only is not None:  # the files not read may still declare this team: one file per team
            if declared is None:  # every file's `team:`, read once, leniently
                declared = {other.resolve(): declared_team(other) for other in team_files(config_dir)}
            others = [other for other, name in declared.items() if other != Path(path).resolve() and name == team.team]
            if others:
                issues.append(
                    ConfigIssue(
                        _display_name(path),
                        read_yaml(Path(path)).line_of(("team",)) or 1,
                        "team",
                        f"team name '{team.team}' is also declared by {', '.join(map(_display_name, others))}; "
                        "keep one file per team (a copied file keeps the name it was copied from until you change it)",
                        TEAM_NAME_ONCE.id,
                    )
                )
    every_file_parsed = not issues  # else a team whose file failed would look unknown below
    if environments is not None:
        # Across files, over every team file that parsed: one run reports them with the files' own problems.
        document = read_yaml(environments_path)
        issues += _issues(
            document,
            check_overrides(environments, teams)
            + check_capture_training(environments, teams)
            + capture_replay_problems(environments, teams),
        )
    # A team named in an environment whose file exists but was not read (`only`) is not unknown.
    unread = {path.stem for path in team_files(config_dir)} if only is not None else set()
    if environments is not None and every_file_parsed:
        for index, environment in enumerate(environments.environments):
            for name in environment.teams:
                if name not in teams and (only is None or name not in unread):
                    where = ("environments", index, "teams", name)
                    close = difflib.get_close_matches(name, list(teams), n=1)
                    hint = f"; did you mean '{close[0]}'?" if close else ""
                    issues.append(
                        ConfigIssue(
                            document.file,
                            document.line_of(where),
                            format_path(where),
                            f"no team file defines team '{name}'{hint}",
                            TEAM_IN_ENVIRONMENT_EXISTS.id,
                        )
                    )
    if issues or environments is None:
        raise ConfigError(issues)
    return Project(environments, teams, files)
