"""`optigate emulate`: a local SageMaker-runtime emulator on loopback; its options are the emulator's settings."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from optigate.cli.errors import UsageError
from optigate.cli.output import stderr
from optigate.cli.parser import RawHelpFormatter
from optigate.emulator.config import command_line_options


def _emulator_data(path: str | None) -> dict:
    """The `--config` file's settings: a mapping, or one line saying what is wrong with the file."""
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(
            f"emulate --config {path}: no such file; give a YAML or JSON file of emulator settings"
        ) from None
    except OSError as error:
        raise UsageError(f"emulate --config {path}: cannot read it ({error.strerror or error})") from error
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f":{where.line + 1}" if where is not None else ""
        raise UsageError(
            f"emulate --config {path}{line}: not valid YAML or JSON ({getattr(error, 'problem', error)})"
        ) from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"emulate --config {path}: expected a mapping of settings, e.g. {{default: {{ttft_ms: 150}}}}")
    return data


def cmd_emulate(args: argparse.Namespace) -> int:
    """A local SageMaker-runtime emulator on loopback (see optigate.emulator.sagemaker_runtime)."""
    import errno

    from optigate.emulator.sagemaker_runtime import EmulatorConfig, serve

    data = _emulator_data(args.config)
    default = data.setdefault("default", {})
    if not isinstance(default, dict):
        raise UsageError(f"emulate --config {args.config}: `default` must be a mapping of settings")
    for option in command_line_options():
        value = getattr(args, option.name)
        if value is not None:
            default[option.name] = value
    if args.capture_dir:
        data["capture_dir"] = args.capture_dir
    if args.capture_streams:
        data["capture_streams"] = True
    try:
        config = EmulatorConfig.parse(data)
    except (TypeError, ValueError, AttributeError) as error:
        where = f"emulate --config {args.config}" if args.config else "emulate"
        raise UsageError(f"{where}: {error}; see `optigate emulate --help` for the settings") from error

    def ready(port: int) -> None:
        if args.port_file:
            Path(args.port_file).write_text(str(port))
        stderr.print(f"optigate emulator on http://127.0.0.1:{port} (endpoint_url for boto3)")
        if config.capture_dir and not config.capture_streams:
            stderr.print(
                f"capturing InvokeEndpoint calls into {config.capture_dir}; streamed calls (optigate bench) are not "
                "captured, as AWS documents capture of InvokeEndpoint only: --capture-streams captures them too"
            )

    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve(config, port=args.port, ready=ready)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {args.port} on 127.0.0.1 is in use: stop what listens there, or choose another --port "
                "(0 picks a free one, --port-file says which)"
            ) from error
        raise UsageError(f"cannot listen on 127.0.0.1:{args.port}: {error.strerror or error}") from error
    return 0


def _behaviour_settings() -> str:
    """The emulator's settings with their defaults, read from the Behaviour dataclass itself."""
    from dataclasses import fields

    from optigate.emulator.config import Behaviour, Distribution

    default = Behaviour()
    shown = []
    for field in fields(Behaviour):
        value = getattr(default, field.name)
        if isinstance(value, Distribution):
            value = f"{value.mean:g} (or {{mean, jitter, kind: normal|lognormal|fixed}})"
        elif isinstance(value, tuple):
            value = list(value)
        shown.append(f"{field.name}={value}")
    import textwrap

    return textwrap.fill(", ".join(shown), width=100, initial_indent="  ", subsequent_indent="  ")


EMULATE_EPILOG = """--config: YAML or JSON {{default: {{SETTING: VALUE, ...}}, seed: 0, endpoints: {{NAME:
{{SETTING: VALUE, ..., variants: {{VARIANT: {{...}}}}, inference_components: {{COMPONENT: {{...}}}}}}}}}};
an endpoint not listed gets default. `seed` makes the latency and fault draws repeatable.
Answer mode: answers_file (JSONL of id, model_input, target_output, category) with wrong_fraction /
refuse_fraction (in wrong_categories / refuse_categories).
Faults: *_rate are shares of requests; a stall holds a response stall_seconds.

Settings and defaults:
{settings}"""


def add_emulate_parser(commands: argparse._SubParsersAction) -> None:
    emulate = commands.add_parser(
        "emulate",
        help="run a local SageMaker-runtime emulator (loopback only)",
        formatter_class=RawHelpFormatter,
        description="A SageMaker runtime for LLM endpoints on 127.0.0.1: streaming and plain invocations with\n"
        "configurable latency, payload format and faults. The options below override --config's `default`.",
    )
    # The defaults live in the Behaviour dataclass (a stdlib-only module); the epilog lists them from it.
    emulate.epilog = EMULATE_EPILOG.format(settings=_behaviour_settings())
    emulate.add_argument("--port", type=int, default=8080, help="loopback port; 0 picks a free one")
    emulate.add_argument(
        "--config",
        help="YAML/JSON settings per endpoint, variant and component (see below; default: none, the options)",
    )
    emulate.add_argument("--port-file", help="write the bound port here once listening (default: not written)")
    emulate.add_argument(
        "--capture-dir",
        help="write every request here as SageMaker's data capture does (endpoint/variant/yyyy/mm/dd/hh/*.jsonl), "
        "for `optigate bench --workload` (default: not written)",
    )
    emulate.add_argument(
        "--capture-streams",
        action="store_true",
        help="capture streamed calls too (InvokeEndpointWithResponseStream): AWS documents data capture of "
        "InvokeEndpoint only, so this is an assumed surface (docs/container-surfaces.md; default: off)",
    )
    for option in command_line_options():  # the settings' one definition: optigate.emulator.config
        emulate.add_argument(
            f"--{option.name.replace('_', '-')}", type=option.type, choices=option.choices, help=option.help
        )
    emulate.set_defaults(handler=cmd_emulate)
