"""`optigate resolve`: lock what each environment serves (the newest gate-Approved package per team)."""

from __future__ import annotations

import argparse

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, CliError, InvalidConfig
from optigate.cli.output import console


def cmd_resolve(args: argparse.Namespace) -> int:
    """Write the lock of each environment: the newest Approved package of every gated team."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from optigate.config.loader import ConfigError, load_project, team_file
    from optigate.promote.lock import read_lock, write_lock
    from optigate.promote.resolve import resolve

    try:
        # --team: only those teams' files are read (a team's pipeline; another team's broken file does not stop it).
        only = None if args.team is None else [team_file(args.config, team) for team in args.team]
        project = load_project(args.config, only=only)
    except ConfigError as error:
        raise InvalidConfig([error], exit_code=2) from error  # 2, not 1: resolve has always exited 2 here
    known = {environment.name: environment for environment in project.environments.environments}
    unknown = [name for name in args.env if name not in known]
    if unknown:
        raise CliError(f"--env {', '.join(unknown)}: no such environment; known: {', '.join(known)}", exit_code=2)
    for name in args.env:
        environment = known[name]
        client = boto3.client("sagemaker", region_name=environment.region)
        try:
            lock = resolve(project, environment, client, partition=args.partition)
        except NoCredentialsError as error:
            raise CliError(
                f"no AWS credentials to read {name}'s model registry ({environment.account}, {environment.region}): "
                "configure them (aws configure, AWS_PROFILE) and run resolve again; synth needs no lock",
                exit_code=CANNOT_RESOLVE_EXIT,
            ) from error
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "ClientError")
            detail = error.response.get("Error", {}).get("Message", "")
            raise CliError(
                f"cannot read {name}'s model registry ({environment.account}, {environment.region}): {code} {detail}; "
                "check the credentials' account and their sagemaker:ListModelPackages/DescribeModelPackage rights",
                exit_code=CANNOT_RESOLVE_EXIT,
            ) from error
        except BotoCoreError as error:
            raise CliError(
                f"cannot reach {name}'s model registry in {environment.region}: {error}; check the network and region",
                exit_code=CANNOT_RESOLVE_EXIT,
            ) from error
        except ValueError as error:  # an Approved package the team stack would deploy differently
            raise CliError(
                f"{name}: {error}; reject that package in the registry, then resolve again",
                exit_code=CANNOT_RESOLVE_EXIT,
            ) from error
        previous = read_lock(args.out, name) if args.team else None
        if previous is not None:  # the other teams' entries stay as they were
            lock = lock.model_copy(update={"teams": {**previous.teams, **lock.teams}})
        path = write_lock(lock, args.out)
        for team, package in lock.teams.items():
            served = package.model_package_arn if package else "baseline (no Approved package)"
            console.print(f"{name}/{team}: {served}", highlight=False)
        console.print(f"wrote {path}")
    return 0


def add_resolve_parser(commands: argparse._SubParsersAction) -> None:
    resolver = commands.add_parser(
        "resolve",
        help="lock what each environment serves: the newest gate-Approved model package per team"
        " (needs AWS credentials)",
    )
    resolver.add_argument("--env", action="append", required=True, help="environment; repeat for several (required)")
    resolver.add_argument("--config", default="config", help="config folder (default: config)")
    resolver.add_argument(
        "--team",
        action="append",
        help="only this team (its file alone is read, only its entry of the lock updated); repeat for several"
        " (default: every team)",
    )
    resolver.add_argument(
        "--out", default="config/locks", help="folder <env>.json is written to; synth reads it from here"
    )
    resolver.add_argument("--partition", default="aws", help="AWS partition of the ARNs (default: aws)")
    resolver.set_defaults(handler=cmd_resolve)
