"""`optigate bench residency`: what a LoRA swap costs in TTFT on an inference-component endpoint."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from optigate.cli.bench_target import check_target_arguments
from optigate.cli.errors import CANNOT_RESOLVE_EXIT, CliError, UsageError
from optigate.cli.output import console, write_json
from optigate.cli.parser import RawHelpFormatter

RESIDENCY_EXIT_CODES = """exit codes:
  0  measured: a swap cost (its interval above zero), or none told apart from zero (at most the upper end)
  2  usage or input error
  3  cannot tell: too few complete rounds, too many failed requests, or evicted requests faster than
     resident ones (something else differs); or no AWS credentials for a real endpoint

Each round measures one adapter twice, in a seeded random order: right after requests to the base
component (resident), and right after requests to max_loras other adapters (evicted from vLLM's LRU
slots). The swap cost is the median paired difference with its 95 % bootstrap interval."""


def _adapters(text: str | None) -> dict[str, str]:
    example = "e.g. --adapters triage=support-triage-ic,reply=support-reply-ic"
    if not text:
        raise UsageError(f"--adapters is required: NAME=INFERENCE_COMPONENT pairs separated by commas, {example}")
    adapters: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, sep, component = (piece.strip() for piece in item.partition("="))
        if not sep or not name or not component:
            raise UsageError(f"--adapters {item!r}: expected NAME=INFERENCE_COMPONENT, {example}")
        if name in adapters:
            raise UsageError(f"--adapters names {name} twice")
        adapters[name] = component
    return adapters


def cmd_bench_residency(args: argparse.Namespace) -> int:
    """Probe the swap cost and print the verdict; the trials go to --json."""
    from optigate.bench.core.client import Target
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.residency import CANNOT_TELL, ResidencySpec, judge, run_probe

    check_target_arguments(args)
    if args.max_loras is None:
        raise UsageError("--max-loras is required: the endpoint's serving.lora.max_loras (OPTION_MAX_LORAS)")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout}: must be positive")
    try:
        spec = ResidencySpec(
            adapters=_adapters(args.adapters),
            max_loras=args.max_loras,
            base_component=args.base_component,
            rounds=args.rounds,
            prompt_tokens=args.prompt_tokens,
            max_new_tokens=args.max_new_tokens,
            engine_mode=args.engine_mode,
            schema=args.schema,
            seed=args.seed,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    target = Target(args.endpoint, args.region, args.endpoint_url)
    trials = run_loop(run_probe(target, spec, timeout=args.timeout))
    result = judge(trials)
    data = {"target": {"endpoint": args.endpoint, "url": target.url}, "spec": asdict(spec), **result.to_dict()}
    if args.json:
        write_json(args.json, data)
        console.print(f"wrote {args.json}")
    if result.swap_ms is not None:
        console.print(
            f"TTFT: resident {result.resident_ttft_ms:.1f} ms, evicted {result.evicted_ttft_ms:.1f} ms (medians of "
            f"{result.pairs} paired rounds); by adapter: "
            + ", ".join(f"{name} {value:+.1f} ms" for name, value in result.per_adapter_swap_ms.items()),
            highlight=False,
        )
    if result.verdict == CANNOT_TELL:
        raise CliError(f"cannot tell: {result.reason}", exit_code=CANNOT_RESOLVE_EXIT)
    console.print(result.reason, highlight=False)
    return 0


def add_residency_parser(subcommands: argparse._SubParsersAction) -> None:
    """`bench residency`, a subcommand of `bench` (whose handler hands it on to cmd_bench_residency)."""
    parser = subcommands.add_parser(
        "residency",
        help="what a LoRA swap costs: TTFT of a request whose adapter is resident vs evicted",
        description="Measure the first-token latency a LoRA adapter's request pays when its adapter is not in one "
        "of vLLM's max_loras GPU slots, on an endpoint serving adapters through inference components.",
        epilog=RESIDENCY_EXIT_CODES,
        formatter_class=RawHelpFormatter,
    )
    parser.add_argument("--endpoint", help="the SageMaker endpoint name (required)")
    parser.add_argument(
        "--endpoint-url", help="e.g. http://127.0.0.1:8080 for an emulator (default: SageMaker's runtime in --region)"
    )
    parser.add_argument("--region", default="us-east-1", help="AWS region")
    parser.add_argument(
        "--adapters", help="NAME=INFERENCE_COMPONENT pairs, comma-separated: more than --max-loras (required)"
    )
    parser.add_argument(
        "--base-component",
        help="the base model's inference component: resident trials then wait as many requests as evicted ones "
        "(default: none, the measured request follows its adapter's request directly)",
    )
    parser.add_argument("--max-loras", type=int, help="GPU LoRA slots of the endpoint (OPTION_MAX_LORAS; required)")
    parser.add_argument("--rounds", type=int, default=40, help="paired rounds (resident + evicted trial each)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="synthetic prompt length in tokens")
    parser.add_argument("--max-new-tokens", type=int, default=4, help="output tokens per request")
    parser.add_argument(
        "--engine-mode", choices=["async", "rolling-batch"], default="async", help="LMI's engine mode (as `bench`)"
    )
    parser.add_argument("--schema", choices=["inputs", "messages"], help="request body (default: the engine mode's)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    parser.add_argument(
        "--seed", type=int, default=0, help="orders the trials of each round and seeds the prompts (default: 0)"
    )
    parser.add_argument("--json", help="write the verdict and every trial here (default: not written)")
