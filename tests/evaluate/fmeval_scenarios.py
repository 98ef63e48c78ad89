"""Run by the evaluation environment's Python (fmeval installed): real fmeval pipelines against
emulated endpoints, one scenario per (baseline, candidate, dataset). Prints a JSON summary.

    python tests/evaluate/fmeval_scenarios.py --url http://127.0.0.1:PORT --data DIR --out DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from optigate.config.models import EvaluationGate
from optigate.evaluate import job
from optigate.evaluate.input_errors import InputError
from optigate.evaluate.job import evaluate, load_dataset
from optigate.evaluate.model_runner import EndpointSpec, SageMakerEndpointRunner

SCENARIOS = {
    # name: (baseline endpoint, candidate endpoint, dataset file, streaming)
    "identical": ("baseline", "same", "full.jsonl", False),
    "worse_slice": ("baseline", "worse", "full.jsonl", False),
    "refuses_more": ("baseline", "refuser", "full.jsonl", True),
    "small": ("baseline", "same", "small.jsonl", False),
}
#: Endpoints that cannot answer: (baseline, candidate, endpoint URL or None for the emulator's).
BROKEN = {
    "unknown_endpoint": ("baseline", "nope", None),
    "connection_refused": ("baseline", "same", "http://127.0.0.1:9"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    summary = {}
    for name, (baseline, candidate, dataset, stream) in SCENARIOS.items():
        records = load_dataset(Path(args.data, dataset))
        runners = [
            SageMakerEndpointRunner(EndpointSpec.parse(e), endpoint_url=args.url, stream=stream)
            for e in (baseline, candidate)
        ]
        verdict = evaluate(records, runners[0], runners[1], EvaluationGate(), Path(args.out, name))
        summary[name] = {**verdict.to_dict(), "records": len(records)}
    records = load_dataset(Path(args.data, "small.jsonl"))
    for name, (baseline, candidate, url) in BROKEN.items():
        runners = [
            SageMakerEndpointRunner(EndpointSpec.parse(e), endpoint_url=url or args.url) for e in (baseline, candidate)
        ]
        try:
            evaluate(records, runners[0], runners[1], EvaluationGate(), Path(args.out, name))
            summary[name] = {"error": None}
        except InputError as error:
            summary[name] = {"error": str(error)}
    # An adapter team: each adapter's component on the twin and the candidate endpoint, through the job's own
    # command line (the Processing job's way), with the real runner sending InferenceComponentName.
    adapters_out = Path(args.out, "adapters")
    code = job.main(
        ["--dataset", str(Path(args.data, "full.jsonl")), "--baseline", "adapters-twin", "--candidate",
         "adapters-cand", "--out", str(adapters_out), "--endpoint-url", args.url, "--exit-zero-on-verdict",
         "--adapter", "base", "twin-base", "cand-base", "--adapter", "reply", "twin-reply", "cand-reply"]
    )  # fmt: skip
    summary["adapters"] = {"exit": code, **json.loads((adapters_out / "verdict.json").read_text())}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
