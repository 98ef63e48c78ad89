"""`optigate rehearse`: the whole gate of one team, offline, with emulated endpoints.

The team's stack is synthesized, and its gate and benchmark-fleet definitions run for real in
moto's Step Functions executor (optigate.testing.moto_gate): the Lambda handlers in-process, the
benchmark workers against two local emulator processes (the live endpoint and the candidate),
SageMaker, S3 and SNS in moto. Waits are compressed to zero and the benchmark is scaled down,
so a rehearsal takes seconds; everything else is the definition that `cdk deploy` would create.

This needs the dev extra (moto).
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ACCOUNT, REGION = "123456789012", "us-east-1"
BUCKET = "optigate-rehearsal"

# Emulated behaviour of the live endpoint and of a faster or slower candidate.
BASELINE = {"ttft_ms": {"mean": 150, "jitter": 8}, "itl_ms": {"mean": 15, "jitter": 1}}
FASTER = {"ttft_ms": {"mean": 110, "jitter": 6}, "itl_ms": {"mean": 9, "jitter": 0.8}}
SLOWER = {"ttft_ms": {"mean": 900, "jitter": 30}, "itl_ms": {"mean": 25, "jitter": 2}}


# --------------------------------------------------------------------------- definitions


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::StepFunctions::StateMachine"}


def render(template: dict[str, Any], logical_id: str, substitutions: dict[str, Any]) -> dict[str, Any]:
    """A state machine's definition with CloudFormation tokens replaced by concrete values.

    `substitutions` maps `LogicalId` (Ref) or `LogicalId.Attribute` (GetAtt) to a value, and `*` to
    a fallback `f(logical_id, attribute_or_None)`.
    """
    body = state_machines(template)[logical_id]["Properties"]["DefinitionString"]
    if isinstance(body, str):
        return json.loads(body)
    separator, parts = body["Fn::Join"]
    rendered = []
    for part in parts:
        if isinstance(part, str):
            rendered.append(part)
        else:
            rendered.append(_resolve(part, substitutions))
    return json.loads(separator.join(rendered))


def _resolve(token: dict[str, Any], substitutions: dict[str, Any]) -> str:
    if "Ref" in token:
        return str(substitutions.get(token["Ref"], substitutions["*"](token["Ref"], None)))
    if "Fn::GetAtt" in token:
        logical, attribute = token["Fn::GetAtt"]
        return str(substitutions.get(f"{logical}.{attribute}", substitutions["*"](logical, attribute)))
    if "Fn::Sub" in token:
        import re

        template = token["Fn::Sub"] if isinstance(token["Fn::Sub"], str) else token["Fn::Sub"][0]
        return re.sub(r"\$\{([^}]+)\}", lambda m: _resolve({"Ref": m.group(1)} if "." not in m.group(1) else {"Fn::GetAtt": m.group(1).split(".", 1)}, substitutions), template)
    if "Fn::Join" in token:
        separator, parts = token["Fn::Join"]
        return separator.join(p if isinstance(p, str) else _resolve(p, substitutions) for p in parts)
    raise ValueError(f"cannot render {token!r}")


#: The gate's wait while live traffic is mirrored to a shadow: CloudWatch windows are whole seconds.
MIRROR_WAIT, MIRROR_SECONDS = "MirrorLiveTraffic", 2


def compress(definition: dict[str, Any], *, rounds: int | None = None, max_new_tokens: int | None = None, top_level_only: bool = False) -> dict[str, Any]:
    """Rehearsal time: every Wait takes zero seconds (the mirror window two); optionally a smaller
    benchmark: `rounds` requests per stream, shorter answers, and only the highest concurrency level."""
    for name, state in definition["States"].items():
        if state["Type"] == "Wait":
            state.pop("SecondsPath", None)
            state["Seconds"] = MIRROR_SECONDS if name == MIRROR_WAIT else 0
        if state["Type"] == "Pass" and isinstance(state.get("Result"), list) and state["Result"] and "per_shard" in state["Result"][0]:
            items = state["Result"][-1:] if top_level_only else state["Result"]
            state["Result"] = [{**item, "requests": rounds * item["per_shard"] if rounds else item["requests"]} for item in items]
        for nested in ("ItemProcessor", "Iterator"):
            if nested in state:
                compress(state[nested], max_new_tokens=max_new_tokens)
        payload = state.get("Parameters", {}).get("Payload") if state["Type"] == "Task" else None
        if top_level_only and isinstance(payload, dict) and isinstance(payload.get("thresholds"), dict) and payload["thresholds"].get("concurrency"):
            payload["thresholds"]["concurrency"] = payload["thresholds"]["concurrency"][-1:]
        benchmark_input = state.get("Parameters", {}).get("Input") if state["Type"] == "Task" else None
        if isinstance(benchmark_input, dict) and max_new_tokens is not None and "max_new_tokens" in benchmark_input:
            benchmark_input["max_new_tokens"] = max_new_tokens
    return definition


def _generic(logical: str, attribute: str | None) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{logical}" if attribute else logical


def _render_value(value: Any, substitutions: dict[str, Any]) -> Any:
    """A template property with its CloudFormation tokens replaced (see `render`)."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in ("Ref", "Fn::GetAtt", "Fn::Sub", "Fn::Join"):
            return _resolve(value, substitutions)
        return {k: _render_value(v, substitutions) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_value(v, substitutions) for v in value]
    return value


def load_handler(folder: str) -> Callable[[dict, Any], Any]:
    spec = importlib.util.spec_from_file_location(f"optigate_lambda_{folder}", REPO / "lambdas" / folder / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def lambda_handlers(baseline_url: str, candidate_url: str, *, decide: Callable | None = None) -> dict[str, Callable]:
    """In-process handlers: the benchmark worker is routed to the emulator of the endpoint it loads."""
    worker, merge = load_handler("benchmark"), load_handler("benchmark_merge")

    def routed_worker(event: dict, context: Any) -> Any:
        url = candidate_url if "-cand-" in event["endpoint_name"] else baseline_url
        return worker({**event, "endpoint_url": url, "timeout_s": 30}, context)

    return {"worker": routed_worker, "merge": merge, "decide": decide or load_handler("gate_decide")}


def evaluation_writer(status: str, reasons: list[str] | tuple[str, ...] = ()) -> Callable[[dict], None]:
    """A processing-job hook that writes the evaluation verdict the gate reads."""

    def hook(request: dict) -> None:
        import boto3

        output = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]
        bucket, key = output.removeprefix("s3://").split("/", 1)
        verdict = {"status": status, "passed": status == "pass", "reasons": list(reasons), "warnings": [], "checks": []}
        boto3.client("s3", region_name=REGION).put_object(Bucket=bucket, Key=f"{key.rstrip('/')}/verdict.json", Body=json.dumps(verdict))

    return hook


@dataclass
class GateRun:
    """The gate and fleet of one synthesized stack, created in an active GateHarness."""

    template: dict[str, Any]
    harness: Any
    compress_options: dict[str, Any] = field(default_factory=dict)
    topic: str = ""
    fleet_arn: str = ""
    gate_arn: str = ""
    group: str = ""
    live: dict[str, str] = field(default_factory=dict)
    owned: set[str] = field(default_factory=set)  # what CloudFormation would own (created before the run)
    live_image: str = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"

    def __post_init__(self) -> None:
        h = self.harness
        h.client("s3").create_bucket(Bucket=BUCKET)
        self.topic = h.client("sns").create_topic(Name="gate")["TopicArn"]
        groups = [r["Properties"]["ModelPackageGroupName"] for r in self.template["Resources"].values() if r["Type"] == "AWS::SageMaker::ModelPackageGroup"]
        self.group = groups[0]
        h.client("sagemaker").create_model_package_group(ModelPackageGroupName=self.group)
        self.live = self._create_live_endpoints()
        fleet_id = next(k for k, r in state_machines(self.template).items() if not r["Properties"].get("StateMachineName", "").endswith("-gate"))
        gate_id = next(k for k, r in state_machines(self.template).items() if r["Properties"].get("StateMachineName", "").endswith("-gate"))
        self.fleet_arn = h.create_state_machine(compress(render(self.template, fleet_id, self.substitutions())), name="fleet")
        self.gate_arn = h.create_state_machine(compress(render(self.template, gate_id, self.substitutions()), **self.compress_options), name="gate")

    def _create_live_endpoints(self) -> dict[str, str]:
        """The endpoints the stack's CloudFormation would own, InService on their configs, as in
        production before a gate runs: endpoint name -> its config's name."""
        h, subs = self.harness, self.substitutions()
        sagemaker = h.client("sagemaker")
        live = {}
        for resource in self.template["Resources"].values():
            if resource["Type"] != "AWS::SageMaker::Endpoint":
                continue
            config_logical = resource["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]
            props = _render_value(self.template["Resources"][config_logical]["Properties"], subs)
            variants = props["ProductionVariants"] + props.get("ShadowProductionVariants", [])
            if not all("ModelName" in v for v in variants):
                continue  # inference components: no gate stages a shadow there
            self.owned |= {config_logical, *(v["ModelName"] for v in variants)}
            for variant in variants:
                sagemaker.create_model(ModelName=variant["ModelName"], ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/live", PrimaryContainer={"Image": self.live_image})
            request = {k: props[k] for k in ("ProductionVariants", "ShadowProductionVariants", "KmsKeyId") if k in props}
            sagemaker.create_endpoint_config(EndpointConfigName=config_logical, **request)
            name = _render_value(resource["Properties"]["EndpointName"], subs)
            h.create_live_endpoint(name, config_logical)
            self.owned.add(name)
            live[name] = config_logical
        return live

    def substitutions(self) -> dict[str, Any]:
        subs: dict[str, Any] = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com", "*": _generic}
        for logical, resource in self.template["Resources"].items():
            kind = resource["Type"]
            if kind == "AWS::S3::Bucket":
                subs[logical] = BUCKET
            elif kind == "AWS::SageMaker::Model":
                subs[f"{logical}.ModelName"] = logical
            elif kind == "AWS::SageMaker::EndpointConfig":
                subs[f"{logical}.EndpointConfigName"] = logical
                subs[logical] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint-config/{logical.lower()}"
            elif kind == "AWS::SNS::Topic":
                subs[logical] = self.topic
            elif kind == "AWS::Lambda::Function":
                handler_role = "worker" if "Worker" in logical else "merge" if "Merge" in logical else "decide"
                subs[f"{logical}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{handler_role}"
            elif kind == "AWS::StepFunctions::StateMachine" and not resource["Properties"].get("StateMachineName", "").endswith("-gate"):
                subs[logical] = self.fleet_arn or f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:fleet"
        return subs

    def execute(self, timeout: float = 300, execution_input: dict[str, Any] | None = None) -> dict[str, Any]:
        h = self.harness
        import uuid

        arn = h.start(self.gate_arn, execution_input or {}, name=f"run-{uuid.uuid4().hex[:12]}")
        execution = h.wait(arn, timeout=timeout)
        s3 = h.client("s3")
        endpoints = h.sagemaker_resources()["endpoints"]
        packages = h.model_packages(self.group)
        files = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="reports/").get("Contents", [])]
        keys = [key for key in files if key.endswith("report.json")]
        return {
            "execution": execution,
            "states": h.states_entered(arn),
            "report": json.loads(s3.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read()) if keys else None,
            "report_files": sorted(files),
            # Temporary resources the run left behind (never what CloudFormation owns).
            "left": {kind: [n for n in names if n not in self.owned] for kind, names in h.live_sagemaker_resources().items()},
            "packages": packages,
            "package_details": [h.client("sagemaker").describe_model_package(ModelPackageName=p["ModelPackageArn"]) for p in packages],
            "messages": h.sns_messages(self.topic),
            # Each live endpoint's status and config now, and the config it started on.
            "live": {name: {"status": endpoints[name]["status"], "config": endpoints[name]["config"], "original_config": config} for name, config in self.live.items()},
        }


# --------------------------------------------------------------------------- a team's rehearsal


def synthesize_team(team_name: str, environment: str | None = None, config_dir: str | Path = "config") -> tuple[dict[str, Any], Any]:
    """The team's stack template (without cdk-nag, which the tests run) and its Deployment."""
    from aws_cdk import App

    from optigate.deployment import deploy, load_resolved_project
    from optigate.stacks.app import FEATURE_FLAGS
    from optigate.stacks.team_inference_stack import TeamInferenceStack

    project = load_resolved_project(config_dir)
    if team_name not in project.teams:
        raise KeyError(f"no team '{team_name}'; known: {', '.join(sorted(project.teams))}")
    environments = project.environments
    chosen = next((e for e in environments if e.name == environment), None) if environment else environments[0]
    if chosen is None:
        raise KeyError(f"no environment '{environment}'")
    deployment = deploy(project.teams[team_name], chosen)
    if deployment.candidate is None:
        raise ValueError(f"team '{team_name}' has no gate.candidate: there is nothing to prove")
    outdir = tempfile.mkdtemp(prefix="optigate-rehearsal-")
    app = App(outdir=outdir, context=FEATURE_FLAGS)
    TeamInferenceStack(app, deployment)
    app.synth()
    return json.loads(Path(outdir, f"{deployment.stack_name}.template.json").read_text()), deployment


@contextmanager
def _offline_aws() -> Iterator[None]:
    """Fake credentials and a region for the in-process handlers; moto answers every call.
    moto's executor logs each failed state at ERROR: quiet it, the rehearsal prints the path."""
    import logging
    import os

    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION")}
    os.environ.update({"AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal", "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION})
    os.environ.pop("AWS_SESSION_TOKEN", None)
    logger = logging.getLogger("moto.stepfunctions")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def variant_traffic(deployment: Any, candidate: dict[str, Any], live_requests: int = 2000) -> dict[str, dict[str, Any]]:
    """CloudWatch figures of a mirror window: the live variant's requests, the sampled share of them
    on the shadow, and ModelLatency (a whole response, microseconds) from each side's behaviour."""
    import random

    shadow = deployment.team.rollout.shadow
    percentage = shadow.sampling_percentage if shadow else 0
    tokens = deployment.team.gate.benchmark.max_new_tokens
    rng = random.Random(0)

    def latencies(behaviour: dict[str, Any]) -> list[float]:
        ttft, itl = behaviour["ttft_ms"], behaviour["itl_ms"]
        return [1000 * (rng.gauss(ttft["mean"], ttft["jitter"]) + tokens * rng.gauss(itl["mean"], itl["jitter"])) for _ in range(100)]

    return {
        "AllTraffic": {"Invocations": live_requests, "Invocation5XXErrors": 0, "ModelLatency": latencies(BASELINE)},
        "GateCandidate": {"Invocations": live_requests * percentage // 100, "Invocation5XXErrors": 0, "ModelLatency": latencies(candidate)},
    }


@contextmanager
def emulators(candidate: dict[str, Any], speculative: bool) -> Iterator[tuple[str, str]]:
    from optigate.bench.harness import emulator_process

    if speculative and "tokens_per_chunk" not in candidate:
        candidate = {**candidate, "tokens_per_chunk": [1, 2, 3, 2]}  # drafts accepted about half the time
    with emulator_process({"default": BASELINE}) as baseline_url, emulator_process({"default": candidate}) as candidate_url:
        yield baseline_url, candidate_url


def rehearse(template: dict[str, Any], deployment: Any, candidate: str, *, behaviour: dict[str, Any] | None = None, on_state: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the gate once with a `faster` or `slower` emulated candidate (or an explicit emulator
    `behaviour`); returns what happened."""
    from optigate.testing.moto_gate import GateHarness, Scenario

    team = deployment.team
    speculative = bool(team.gate.candidate.get("speculative_decoding"))
    # Enough rounds for >= 5 one-second throughput buckets on the faster side.
    # The rehearsal benchmarks the highest level only (the deployed gate runs every level).
    rounds = 16 if candidate == "faster" else 12
    compress_options = {"rounds": rounds, "max_new_tokens": 32, "top_level_only": True}
    behaviour = behaviour or (FASTER if candidate == "faster" else SLOWER)
    with emulators(behaviour, speculative) as (baseline_url, candidate_url), _offline_aws():
        scenario = Scenario(on_processing_job=evaluation_writer("pass"), variant_traffic=variant_traffic(deployment, behaviour))
        with GateHarness(lambda_handlers=lambda_handlers(baseline_url, candidate_url), scenario=scenario, region=REGION) as harness:
            run = GateRun(template, harness, compress_options)
            result = run.execute()
    if on_state is not None:
        for state in result["states"]:
            on_state(state)
    return result
