"""`optigate schema`: the JSON schema and the references of the config files, written or checked."""

from __future__ import annotations

import argparse

from optigate.cli.errors import CliError
from optigate.cli.output import console


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the JSON schema of the config files and the configuration reference, or check that both are current."""
    from optigate.config.reference import stale_reference, write_reference
    from optigate.config.rules.reference import stale_rules_reference, write_rules_reference
    from optigate.config.schema import stale_schemas, write_schemas
    from optigate.deployment.registry import every_rule

    if args.check:
        stale = [f"out of date in {args.out}: {', '.join(names)}"] if (names := stale_schemas(args.out)) else []
        stale += [f"{docs} is out of date" for docs in (args.docs,) if stale_reference(docs)]
        stale += [f"{docs} is out of date" for docs in (args.rules,) if stale_rules_reference(docs, every_rule())]
        if stale:
            raise CliError("; ".join(stale) + "; run `optigate schema`")
        console.print(f"[green]✓[/green] schemas in {args.out} match the models")
        return 0
    for path in [*write_schemas(args.out), write_reference(args.docs), write_rules_reference(args.rules, every_rule())]:
        console.print(f"wrote {path}")
    return 0


def add_schema_parser(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser("schema", help="write the JSON schema and the reference of the config files")
    schema.add_argument("--out", default="config/schema", help="folder of the schema files (default: config/schema)")
    schema.add_argument(
        "--docs", default="docs/configuration.md", help="the configuration reference (default: docs/configuration.md)"
    )
    schema.add_argument("--rules", default="docs/rules.md", help="the rules reference (default: docs/rules.md)")
    schema.add_argument("--check", action="store_true", help="fail if the files differ from the models and rules")
    schema.set_defaults(handler=cmd_schema)
