"""Load and validate config files, reporting every problem of a file at once with its line.

Errors read `config/teams/chat.yaml:14 serving.max_model_len: <what is wrong and what to do>`.
Shape and type problems come from pydantic; cross-field problems from `optigate.config.rules`;
a caller adds the checks that need the catalog or the plan (`team_checks`, see `optigate.deployment`).
Both are mapped back to the YAML line through the composed node tree.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from optigate.config.models import Calibration, CalibrationFile, EnvironmentsFile, TeamConfig
from optigate.config.reader import (
    ConfigError,
    ConfigIssue,
    YamlDocument,
    format_path,
    read_yaml,
    shown,
)
from optigate.config.reader import display_name as _display_name
from optigate.config.rule_registry import rule_of_model_error
from optigate.config.rules import Problem, check_environments, check_overrides, check_team
from optigate.config.rules.cross_file import (
    capture_trainable,
    component_rollout_fits_environment,
    region_has_sagemaker,
    team_in_environment_exists,
    team_name_once,
)
from optigate.config.rules.workload_rules import capture_replayable
from optigate.config.schema_messages import expected_type, message
from optigate.config.valid_part import Key, ValidPart, blocked_issue, data_path, held_back_issue, judge

# Checks of a later layer on a parsed team (see load_team).
TeamChecks = Callable[[TeamConfig], list[Problem]]
ModelT = TypeVar("ModelT", bound=BaseModel)


# --------------------------------------------------------------------------- pydantic errors


def issues_from_validation_error(
    document: YamlDocument, error: ValidationError, root: type[BaseModel]
) -> list[ConfigIssue]:
    """Each error at its line, in optigate's words (`optigate.config.schema_messages`); a value that fits no member of a
    union (a model name or a mapping of fields) is one issue saying every form it could take."""
    issues: list[ConfigIssue] = []
    seen: set[tuple[str, str]] = set()
    expected_at: dict[str, list[str]] = {}  # a union's type errors at one path: merged into one issue
    for item in error.errors(include_url=False):
        path, is_noise = data_path(document.data, item["loc"])
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


@dataclass
class Judged(Generic[ModelT]):
    """One file judged: its model (or, when its schema has problems, its valid part: see `optigate.config.valid_part`;
    None when not even that can be made), every problem, and the checks a key with a schema problem held back."""

    value: ModelT | None
    issues: list[ConfigIssue]
    document: YamlDocument | None = None
    part: ValidPart[ModelT] | None = None  # set when `value` is the valid part only
    held: dict[str, set[Key]] = field(default_factory=dict)  # by check: the keys left out it read
    blocked: ConfigIssue | None = None  # no part could be made: why no rule ran

    def run(self, area: str, check: Callable[[], list[Problem]]) -> tuple[list[Problem], bool]:
        """`check`'s problems, and whether it ran whole (see `optigate.config.rules.team_rules.AreaRunner`)."""
        if self.part is None:
            return check(), True
        problems, read = judge(check)
        if read:
            self.held.setdefault(area, set()).update(read)
        return problems, not read

    def held_back(self) -> list[ConfigIssue]:
        """The one line naming the checks held back in this file (none when every check ran whole)."""
        if self.blocked is not None:
            return [self.blocked]
        line = held_back_issue(self.document, self.held) if self.document is not None else None
        return [line] if line is not None else []


def _judged(path: Path, model: type[ModelT], rules: bool) -> Judged[ModelT]:
    """The file read and validated: its model, or its valid part with the schema problems (rules: find one)."""
    try:
        document = read_yaml(path)
    except ConfigError as error:
        return Judged(None, error.issues)
    try:
        return Judged(_parse(document, model), [], document)
    except ConfigError as error:
        found = ValidPart.of(document, model) if rules else None
        if isinstance(found, ValidPart):
            return Judged(found.value, error.issues, document, found)
        blocked = blocked_issue(document, found) if found is not None and isinstance(document.data, dict) else None
        return Judged(None, error.issues, document, blocked=blocked)


def _with_problems(judged: Judged[ModelT], problems: list[Problem]) -> None:
    """The rules' problems added at their lines; with schema problems, all in file order."""
    assert judged.document is not None
    schema = bool(judged.issues)
    judged.issues += _issues(judged.document, problems)
    if schema and problems:
        judged.issues.sort(key=lambda issue: issue.line or 0)


def judge_team_file(path: Path, *, rules: bool = True, team_checks: TeamChecks | None = None) -> Judged[TeamConfig]:
    """Read, validate and rule-check one team file, every problem at once (see `load_team`). A file with schema
    problems is rule-checked on its valid part: the rules that read only keys without a problem report in the same
    run; those that read one are held back, said in one line."""
    judged = _judged(path, TeamConfig, rules)
    team = judged.value
    if team is None:
        return judged
    team.with_calibrations(calibrations_for(path)).located_in(str(path.parent))
    if not rules:
        return judged
    with judged.part.watched() if judged.part is not None else nullcontext():
        problems = check_team(team, judged.run)
        if team_checks is not None:
            problems += judged.run("deployment checks (catalog, images, capacity plan)", lambda: team_checks(team))[0]
    _with_problems(judged, problems)
    return judged


def load_team(path: str | Path, *, rules: bool = True, team_checks: TeamChecks | None = None) -> TeamConfig:
    """Read, validate and rule-check one team file; raise ConfigError listing every problem.

    `team_checks` adds the checks of a later layer (the catalog, the capacity plan: see
    `optigate.deployment`), reported at their lines with the config's own. `rules=False` checks the
    schema only: for tools that read thresholds in environments without the image tables or the
    catalog (the evaluation container).
    """
    judged = judge_team_file(Path(path), rules=rules, team_checks=team_checks)
    if judged.issues or judged.value is None:
        raise ConfigError(judged.issues, judged.held_back())
    return judged.value


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


def _issues(document: YamlDocument, problems: list[Problem]) -> list[ConfigIssue]:
    """Problems as issues at their lines, in file order (a problem without a line comes first)."""
    issues = [
        ConfigIssue(document.file, document.line_of(p.path), format_path(p.path), p.message, p.rule_id)
        for p in problems
    ]
    return sorted(issues, key=lambda issue: issue.line or 0)


def judge_environments_file(path: Path) -> Judged[EnvironmentsFile]:
    """environments.yaml read, validated and rule-checked, every problem at once (its valid part, as a team file's)."""
    judged = _judged(path, EnvironmentsFile, rules=True)
    environments = judged.value
    if environments is not None:
        with judged.part.watched() if judged.part is not None else nullcontext():
            problems = judged.run("environment rules", lambda: check_environments(environments))[0]
            problems += judged.run("region rules", lambda: region_has_sagemaker(environments))[0]
        _with_problems(judged, problems)
    return judged


def load_environments(path: str | Path) -> EnvironmentsFile:
    judged = judge_environments_file(Path(path))
    if judged.issues or judged.value is None:
        raise ConfigError(judged.issues, judged.held_back())
    return judged.value


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


def _across_files(environments: EnvironmentsFile, teams: dict[str, TeamConfig]) -> list[Problem]:
    return (
        check_overrides(environments, teams)
        + capture_trainable(environments, teams)
        + capture_replayable(environments, teams)
        + component_rollout_fits_environment(environments, teams)
    )


def _file_issues(path: Path, line: int, problems: list[Problem]) -> list[ConfigIssue]:
    """Problems of a team file as a whole (OG609), at `line`."""
    return [ConfigIssue(_display_name(path), line, format_path(p.path), p.message, p.rule_id) for p in problems]


# Over 80 lines: every file's problems collected in one pass before raising, so all are reported at once.
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
    environments_path = Path(config_dir, "environments.yaml")
    judged_environments = judge_environments_file(environments_path)
    environments = judged_environments.value
    issues: list[ConfigIssue] = list(judged_environments.issues)
    every: list[Judged[Any]] = [judged_environments]
    teams: dict[str, TeamConfig] = {}  # every team judged: a file's whole team, or its valid part
    files: dict[str, str] = {}
    unjudged: set[str] = set()  # the teams files that could not be judged may define
    declared: dict[Path, str | None] | None = None
    for path in team_files(config_dir) if only is None else sorted(Path(p) for p in only):
        judged = judge_team_file(Path(path), team_checks=team_checks)
        every.append(judged)
        issues += judged.issues
        team = judged.value
        if team is None:
            unjudged.add(declared_team(Path(path)) or Path(path).stem)
            continue
        if team.team in teams:
            issues += _file_issues(path, 1, team_name_once(team.team, files[team.team]))
            continue
        teams[team.team] = team
        files[team.team] = _display_name(path)
        if only is not None:  # the files not read may still declare this team: one file per team
            if declared is None:  # every file's `team:`, read once, leniently
                declared = {other.resolve(): declared_team(other) for other in team_files(config_dir)}
            others = [other for other, name in declared.items() if other != Path(path).resolve() and name == team.team]
            named = team_name_once(team.team, None, [_display_name(other) for other in others])
            if named:
                issues += _file_issues(path, read_yaml(Path(path)).line_of(("team",)) or 1, named)
    if environments is not None and judged_environments.document is not None:
        # Across files, over every team judged (a file with problems too): one run reports them with the files' own.
        by_file = {judged.document.file: judged for judged in every if judged.document is not None}
        # A team named in an environment whose file exists but was not read (`only`) is not unknown.
        unread = {path.stem for path in team_files(config_dir)} if only is not None else set()

        def across(area: str, check: Callable[[], list[Problem]]) -> list[Problem]:
            problems, read = judge(check)
            for key in read:
                by_file[key[0]].held.setdefault(area, set()).add(key)
            return problems

        with ExitStack() as watching:
            for judged in every:
                if judged.part is not None:
                    watching.enter_context(judged.part.watched())
            problems: list[Problem] = []
            for name, team in teams.items():
                problems += across("cross-file rules", partial(_across_files, environments, {name: team}))
            known = set(teams) | unjudged | unread
            problems += across(
                "cross-file rules", partial(team_in_environment_exists, environments, known, list(teams))
            )
        issues += _issues(judged_environments.document, problems)
    held_back = [line for judged in every for line in judged.held_back()]
    if issues or environments is None:
        raise ConfigError(issues, held_back)
    return Project(environments, teams, files)
