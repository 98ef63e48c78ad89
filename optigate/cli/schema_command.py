"""`optigate schema`: the JSON schema and the references of the config files, written or checked."""

from __future__ import annotations

import argparse
from pathlib import Path

from optigate.cli.errors import CliError
from optigate.cli.output import console


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the JSON schema of the config files (and, with --docs, optigate's reference pages), or check that they
    are current."""
    from optigate.bench.capture_file import CAPTURE_SCHEMA_NAME, render_capture_schema
    from optigate.bench.result_file import FILE_SCHEMAS
    from optigate.config.reference import REFERENCE_PATH, stale_reference, write_reference
    from optigate.config.rules.rules_reference import RULES_REFERENCE_PATH, stale_rules_reference, write_rules_reference
    from optigate.config.schema import stale_schemas, write_schemas
    from optigate.deployment.all_rules import every_rule
    from optigate.gate.report_file import REPORT_SCHEMA_NAME, render_report_schema
    from optigate.lambdas.events import event_schemas
    from optigate.layout_reference import DESIGN_PAGE, stale_layout, write_layout
    from optigate.serving.surfaces import SURFACES_PAGE, reference_markdown

    # The reference pages are optigate's own docs: written only when asked, never into a user's project.
    docs = Path(args.docs) if args.docs else None
    reference = docs / REFERENCE_PATH.name if docs else None
    rules = docs / RULES_REFERENCE_PATH.name if docs else None
    # design.md's layout: a marked section of a written page, every package and module with its docstring's summary.
    design = docs / DESIGN_PAGE if docs else None
    # The files optigate reads back (a bench result, a merged fleet result, the gate's report.json, a SageMaker
    # capture record as optigate reads it): their schemas beside the reference.
    # And what each container and service publishes (optigate.serving.surfaces), which the emulators serve from, and
    # the event of each seam between the gate's state machines and its Lambda functions (optigate.lambdas.events).
    readers = {
        **FILE_SCHEMAS,
        REPORT_SCHEMA_NAME: render_report_schema,
        CAPTURE_SCHEMA_NAME: render_capture_schema,
        SURFACES_PAGE: reference_markdown,
        **event_schemas(),
    }
    file_schemas = {docs / name: render for name, render in readers.items()} if docs else {}
    again = "optigate schema" + (f" --docs {args.docs}" if docs else "")
    if args.check:
        stale = [f"out of date in {args.out}: {', '.join(names)}"] if (names := stale_schemas(args.out)) else []
        if reference is not None and stale_reference(reference):
            stale.append(f"{reference} is out of date")
        if rules is not None and stale_rules_reference(rules, every_rule()):
            stale.append(f"{rules} is out of date")
        if design is not None and stale_layout(design):
            stale.append(f"{design}'s layout is out of date")
        for path, render in file_schemas.items():
            if not path.exists() or path.read_text() != render():
                stale.append(f"{path} is out of date")
        if stale:
            raise CliError("; ".join(stale) + f"; run `{again}`")
        console.print(f"[green]✓[/green] schemas in {args.out} match the models")
        return 0
    written = write_schemas(args.out)
    if reference is not None and rules is not None and design is not None:
        try:
            written.append(write_layout(design))
        except ValueError as error:
            raise CliError(f"{design}: {error}: add the two markers where the layout goes") from error
        written += [write_reference(reference), write_rules_reference(rules, every_rule())]
        for path, render in file_schemas.items():
            path.write_text(render())
            written.append(path)
    for path in written:
        console.print(f"wrote {path}")
    return 0


def add_schema_parser(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser("schema", help="write the JSON schema and the reference of the config files")
    schema.add_argument("--out", default="config/schema", help="folder of the schema files (default: config/schema)")
    schema.add_argument(
        "--docs",
        default=None,
        metavar="FOLDER",
        help="also optigate's reference pages (configuration.md, rules.md, container-surfaces.md, the read-back "
        "files' and the gate's Lambda events' schemas, design.md's layout) in this folder (in optigate's "
        "checkout: --docs docs; default: none, a user's project has no use for them)",
    )
    schema.add_argument("--check", action="store_true", help="fail if the files differ from the models and rules")
    schema.set_defaults(handler=cmd_schema)
