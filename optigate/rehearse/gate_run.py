# Over 400 lines: one stack's state machines created and executed offline share one set of values filled in.
"""The gate and benchmark fleet of one synthesized stack, created and executed in an active GateHarness:
the definitions `cdk deploy` would create, with CloudFormation's values filled in offline, the waits
compressed, and the Lambda handlers of the repository run in-process (optigate.rehearse.gate_handlers).

Every part of the definition is found by its structure (optigate.rehearse.gate_layout, and the
Task/Wait/Map states below), never by state names or logical ids.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from optigate.config.models import split_s3_uri
from optigate.rehearse.asl import iter_states, sdk_calls
from optigate.rehearse.gate_layout import STAGE, GateLayout, gate_layout
from optigate.rehearse.harness import ACCOUNT_ID, REGION, GateHarness
from optigate.rehearse.template import render_definition, render_value, resources_of_type

BUCKET: Final = "optigate-rehearsal"
#: The gate's wait while live traffic is mirrored to a shadow: CloudWatch windows are whole seconds.
MIRROR_SECONDS: Final = 2
LIVE_IMAGE: Final = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"


# --------------------------------------------------------------------------- rehearsal time


def _state_sets(definition: dict[str, Any]) -> Iterator[dict[str, dict[str, Any]]]:
    """The States of the definition and of every Parallel branch and Map processor in it."""
    yield definition.get("States", {})
    for state in definition.get("States", {}).values():
        for nested in [*state.get("Branches", []), *(state[k] for k in ("ItemProcessor", "Iterator") if k in state)]:
            yield from _state_sets(nested)


#: A hang guard, not a budget: the longest rehearsal (an adapter team's, every component benchmarked) takes about
#: 1.5 minutes on a quiet two-core machine, several times that on a shared one; a hung execution is stopped after this.
EXECUTION_TIMEOUT_S = 1800.0


def _starts_executions(state: dict[str, Any]) -> bool:
    return state.get("Type") == "Task" and ":states:::states:startExecution" in state.get("Resource", "")


def _is_lambda_invoke(state: dict[str, Any]) -> bool:
    return state.get("Type") == "Task" and state.get("Resource", "").endswith(":states:::lambda:invoke")


def compress(
    definition: dict[str, Any],
    *,
    requests_per_stream: int | None = None,
    max_new_tokens: int | None = None,
    top_level_only: bool = False,
    max_concurrency: int | None = None,
) -> dict[str, Any]:
    """Rehearsal time, in place: every Wait takes zero seconds, except the one before CloudWatch metrics are
    read (the mirror window), which takes MIRROR_SECONDS. Optionally a smaller benchmark: `requests_per_stream`
    in each block (each round) and `max_new_tokens` per answer in the fleet executions the gate starts, and
    with `top_level_only` only the highest concurrency level (every block of it, benchmarked and decided
    on), or the highest not above `max_concurrency` (the lowest when every level is above it)."""
    metric_reads = {call.state for call in sdk_calls(definition) if call.operation == "GetMetricData"}
    # The level is chosen once, from the decision's levels (total streams), and the benchmark's items
    # (streams per shard) take the same position: with several shards the two numbers differ.
    chosen: int | None = None
    for _, state in iter_states(definition):
        if state["Type"] == "Wait":
            state.pop("SecondsPath", None)
            state["Seconds"] = MIRROR_SECONDS if state.get("Next") in metric_reads else 0
        benchmark_input = state.get("Parameters", {}).get("Input") if _starts_executions(state) else None
        if isinstance(benchmark_input, dict) and max_new_tokens is not None and "max_new_tokens" in benchmark_input:
            benchmark_input["max_new_tokens"] = max_new_tokens
        payload = state.get("Parameters", {}).get("Payload") if _is_lambda_invoke(state) else None
        thresholds = payload.get("thresholds") if isinstance(payload, dict) else None
        if top_level_only and isinstance(thresholds, dict) and thresholds.get("concurrency"):
            configured = sorted(thresholds["concurrency"])
            level = rehearsal_level(configured, max_concurrency)
            chosen = configured.index(level)
            thresholds["concurrency"] = [level]
            # The decision reads each round's results by the levels it names (streams per worker): the same one.
            rounds = payload.get("rounds") if isinstance(payload, dict) else None
            if isinstance(rounds, dict) and isinstance(rounds.get("per_shard"), list) and rounds["per_shard"]:
                per_shard = sorted(rounds["per_shard"])
                picked = per_shard[chosen] if chosen < len(per_shard) else rehearsal_level(per_shard, max_concurrency)
                rounds["per_shard"] = [picked]
    for states in _state_sets(definition):
        for state in states.values():
            processor = state.get("ItemProcessor") or state.get("Iterator")
            if state["Type"] != "Map" or not any(_starts_executions(s) for _, s in iter_states(processor or {})):
                continue
            # The benchmark levels: the list a Pass state puts where this Map reads its items.
            for levels in states.values():
                if (
                    levels["Type"] == "Pass"
                    and levels.get("ResultPath") == state.get("ItemsPath")
                    and isinstance(levels.get("Result"), list)
                ):
                    # One item per level of a round, levels ascending: the top level's is the last one.
                    items = levels["Result"]
                    if top_level_only and items:
                        per_shard = sorted({item["per_shard"] for item in items})
                        fallback = rehearsal_level(per_shard, max_concurrency)
                        picked = per_shard[chosen] if chosen is not None and chosen < len(per_shard) else fallback
                        items = [item for item in items if item["per_shard"] == picked]
                    levels["Result"] = [
                        {
                            **item,
                            "requests": requests_per_stream * item["per_shard"]
                            if requests_per_stream
                            else item["requests"],
                        }
                        for item in items
                    ]
    return definition


def rehearsal_level(levels: list[int], max_concurrency: int | None) -> int:
    """The one level a scaled-down rehearsal benchmarks: the highest, or the highest not above the cap."""
    allowed = [level for level in levels if max_concurrency is None or level <= max_concurrency]
    return max(allowed) if allowed else min(levels)


# --------------------------------------------------------------------------- the run


@dataclass
class GateRun:
    """The gate and fleet of one synthesized stack, created in an active GateHarness."""

    template: dict[str, Any]
    harness: GateHarness
    compress_options: dict[str, Any] = field(default_factory=dict)
    topic: str = ""
    fleet_arn: str = ""
    gate_arn: str = ""
    group: str = ""
    live: dict[str, str] = field(default_factory=dict)
    owned: set[str] = field(default_factory=set)  # what CloudFormation would own (created before the run)
    live_image: str = LIVE_IMAGE
    layout: GateLayout = field(init=False)

    def __post_init__(self) -> None:
        h = self.harness
        self.layout = gate_layout(self.template)
        h.client("s3").create_bucket(Bucket=BUCKET)
        self.topic = h.client("sns").create_topic(Name="gate")["TopicArn"]
        groups = resources_of_type(self.template, "AWS::SageMaker::ModelPackageGroup").values()
        self.group = next(iter(groups))["Properties"]["ModelPackageGroupName"]
        h.client("sagemaker").create_model_package_group(ModelPackageGroupName=self.group)
        self.live = self._create_live_endpoints()
        self._create_workload_configs()
        fleet = compress(render_definition(self.template, self.layout.fleet, self.substitutions()))
        self.fleet_arn = h.create_state_machine(fleet, name="fleet")
        gate = compress(
            render_definition(self.template, self.layout.gate, self.substitutions()), **self.compress_options
        )
        self.gate_arn = h.create_state_machine(gate, name="gate")

    def staged_sources(self) -> list[str]:
        """The baseline's folders the gate stages into an optimized candidate's prefix (the S3 prefixes its
        stage function copies from; optigate.constructs.gate.stages.stage_candidate_files)."""
        definition = render_definition(self.template, self.layout.gate, self.substitutions())
        sources = []
        for _, state in iter_states(definition):
            parameters = state.get("Parameters", {}) if _is_lambda_invoke(state) else {}
            # substitutions() names each function by its role
            if str(parameters.get("FunctionName", "")).rsplit(":", 1)[-1] == STAGE:
                sources += [copy["source"] for copy in parameters.get("Payload", {}).get("copies", [])]
        return sources

    def job_sources(self) -> list[str]:
        """The baseline prefixes the gate's optimization job reads (its ModelSource, rendered)."""
        definition = render_definition(self.template, self.layout.gate, self.substitutions())
        jobs = [s for _, s in iter_states(definition) if s.get("Resource", "").endswith(":createOptimizationJob")]
        return [state["Parameters"]["ModelSource"]["S3"]["S3Uri"] for state in jobs]

    def seed_baseline_files(self) -> list[str]:
        """Put one file into each staged folder of the baseline and into the optimization job's source that is
        empty in moto S3 (a rehearsal has no model bucket; the team's has the weights and an EAGLE-3 head there).
        The keys written, as s3:// URIs."""
        s3 = self.harness.client("s3")
        written = []
        for source in self.staged_sources() + self.job_sources():
            bucket, prefix = split_s3_uri(source)
            if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
                s3.create_bucket(Bucket=bucket)
            if not s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount"):
                s3.put_object(Bucket=bucket, Key=f"{prefix}config.json", Body=b"{}")
                written.append(f"s3://{bucket}/{prefix}config.json")
        return written

    def training_sources(self) -> list[dict[str, str]]:
        """The TrainingDataSource of each EAGLE item the gate's optimization job gets (rendered)."""
        definition = render_definition(self.template, self.layout.gate, self.substitutions())
        sources = []
        for _, state in iter_states(definition):
            if state.get("Type") == "Task" and state.get("Resource", "").endswith(":createOptimizationJob"):
                for config in state.get("Parameters", {}).get("OptimizationConfigs", []):
                    source = config.get("ModelSpeculativeDecodingConfig", {}).get("TrainingDataSource")
                    sources += [source] if source else []
        return sources

    def seed_training_data(self) -> list[str]:
        """Put one captured OpenAI chat request (a data capture record, JSON-encoded) under each EAGLE training
        prefix that is empty in moto S3 (a rehearsal has no traffic; the emulated job fails without data). The
        keys written, as s3:// URIs."""
        s3 = self.harness.client("s3")
        request = {"messages": [{"role": "user", "content": "Where is my order?"}]}
        record = {
            "captureData": {
                "endpointInput": {
                    "observedContentType": "application/json",
                    "mode": "INPUT",
                    "data": json.dumps(request),
                    "encoding": "JSON",
                }
            },
            "eventMetadata": {"eventId": "rehearsal", "inferenceTime": "2026-01-01T00:00:00Z"},
            "eventVersion": "0",
        }
        written = []
        for source in self.training_sources():
            bucket, key = split_s3_uri(source["S3Uri"])
            if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
                s3.create_bucket(Bucket=bucket)
            if source["S3DataType"] == "ManifestFile":
                folder = key.rpartition("/")[0]
                manifest = [{"prefix": f"s3://{bucket}/{folder}/"}, "rehearsal.jsonl"]
                s3.put_object(Bucket=bucket, Key=f"{folder}/rehearsal.jsonl", Body=json.dumps(record))
                s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest))
                written.append(source["S3Uri"])
            elif not s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount"):
                s3.put_object(Bucket=bucket, Key=f"{key}rehearsal.jsonl", Body=json.dumps(record))
                written.append(f"s3://{bucket}/{key}rehearsal.jsonl")
        return written

    def _create_live_endpoints(self) -> dict[str, str]:
        """The endpoints the stack's CloudFormation would own, InService on their configs, as in
        production before a gate runs: endpoint name -> its config's name."""
        h, subs = self.harness, self.substitutions()
        sagemaker = h.client("sagemaker")
        live = {}
        # Every model of the stack (the gate's baseline twin runs the live one): named by its logical id,
        # as the substitutions render `<logical>.ModelName`.
        for logical in resources_of_type(self.template, "AWS::SageMaker::Model"):
            role = f"arn:aws:iam::{ACCOUNT_ID}:role/live"
            sagemaker.create_model(
                ModelName=logical, ExecutionRoleArn=role, PrimaryContainer={"Image": self.live_image}
            )
            self.owned.add(logical)
        for resource in resources_of_type(self.template, "AWS::SageMaker::Endpoint").values():
            config_logical = resource["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]
            props = render_value(self.template["Resources"][config_logical]["Properties"], subs)
            variants = props["ProductionVariants"] + props.get("ShadowProductionVariants", [])
            if not all("ModelName" in v for v in variants):
                name = render_value(resource["Properties"]["EndpointName"], subs)
                self._create_live_components(name, config_logical, props)
                live[name] = config_logical
                continue
            self.owned.add(config_logical)
            h.baseline_models |= {v["ModelName"] for v in props["ProductionVariants"]}
            request = {
                k: props[k] for k in ("ProductionVariants", "ShadowProductionVariants", "KmsKeyId") if k in props
            }
            sagemaker.create_endpoint_config(EndpointConfigName=config_logical, **request)
            name = render_value(resource["Properties"]["EndpointName"], subs)
            h.create_live_endpoint(name, config_logical)
            self.owned.add(name)
            live[name] = config_logical
        return live

    def _create_live_components(self, name: str, config_logical: str, props: dict[str, Any]) -> None:
        """An endpoint serving inference components, as CloudFormation leaves it: its config (no model, a role),
        the endpoint InService, and its components (the base's model is the baseline) InService."""
        h, subs = self.harness, self.substitutions()
        sagemaker = h.client("sagemaker")
        request = {k: props[k] for k in ("ProductionVariants", "ExecutionRoleArn", "KmsKeyId") if k in props}
        sagemaker.create_endpoint_config(EndpointConfigName=config_logical, **request)
        h.create_live_endpoint(name, config_logical)
        self.owned |= {config_logical, name}
        components = resources_of_type(self.template, "AWS::SageMaker::InferenceComponent")
        # Bases first: an adapter names its base.
        ordered = sorted(components.values(), key=lambda r: "BaseInferenceComponentName" in str(r["Properties"]))
        for resource in ordered:
            props = render_value(resource["Properties"], subs)
            props["EndpointName"] = name
            # CloudFormation applies DeploymentConfig to updates; CreateInferenceComponent has no such member.
            props.pop("DeploymentConfig", None)
            model = (props.get("Specification") or {}).get("ModelName")
            if model:
                h.baseline_models.add(model)
            sagemaker.create_inference_component(**props)
            self.owned.add(props["InferenceComponentName"])

    def live_components(self) -> dict[str, dict[str, Any]]:
        """Each live endpoint's components now: name -> the model or adapter archive it serves and its copies."""
        from optigate.rehearse.sagemaker.components import InferenceComponentOperations

        state = self.harness.sagemaker.region_state(self.harness.sagemaker_backend())
        described = [InferenceComponentOperations.described(c) for c in state.inference_components.values()]
        return {
            c["InferenceComponentName"]: {
                "endpoint": c["EndpointName"],
                "status": c.get("InferenceComponentStatus"),
                "model": (c.get("Specification") or {}).get("ModelName"),
                "artifact": ((c.get("Specification") or {}).get("Container") or {}).get("ArtifactUrl"),
                "base": (c.get("Specification") or {}).get("BaseInferenceComponentName"),
                "copies": (c.get("RuntimeConfig") or {}).get("DesiredCopyCount"),
            }
            for c in sorted(described, key=lambda c: c["InferenceComponentName"])
            if c["EndpointName"] in self.live
        }

    def _create_workload_configs(self) -> None:
        """The stack's AI workload configs (SageMaker's managed benchmark), as its CloudFormation creates them."""
        sagemaker = self.harness.client("sagemaker")
        for resource in resources_of_type(self.template, "AWS::SageMaker::AIWorkloadConfig").values():
            props = render_value(resource["Properties"], self.substitutions())
            sagemaker.create_ai_workload_config(**props)

    def _physical(self, logical: str, attribute: str | None) -> str:
        """Any other token, by its resource's type: a Ref is the physical name (the logical id here), a
        GetAtt an ARN of the resource's kind (IAM roles and KMS keys are what the gate's tokens name)."""
        kind = self.template["Resources"].get(logical, {}).get("Type", "")
        if attribute is None:
            return logical
        if kind == "AWS::KMS::Key":
            return f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/{logical}"
        return f"arn:aws:iam::{ACCOUNT_ID}:role/{logical}"

    def substitutions(self) -> dict[str, Any]:
        """The values CloudFormation would give the template's tokens, offline."""
        subs: dict[str, Any] = {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::URLSuffix": "amazonaws.com",
            "*": self._physical,
        }
        for logical, resource in self.template["Resources"].items():
            kind = resource["Type"]
            if kind == "AWS::S3::Bucket":
                subs[logical] = BUCKET
            elif kind == "AWS::SageMaker::Model":
                subs[f"{logical}.ModelName"] = logical
            elif kind == "AWS::SageMaker::EndpointConfig":
                subs[f"{logical}.EndpointConfigName"] = logical
                subs[logical] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT_ID}:endpoint-config/{logical.lower()}"
            elif kind == "AWS::SNS::Topic":
                subs[logical] = self.topic
            elif kind == "AWS::Lambda::Function":
                # Named by its role, as lambda_handlers keys the in-process handlers.
                subs[f"{logical}.Arn"] = (
                    f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{self.layout.functions.get(logical, logical)}"
                )
            elif logical == self.layout.fleet:
                subs[logical] = self.fleet_arn or f"arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:fleet"
        return subs

    def execute(
        self,
        timeout: float = EXECUTION_TIMEOUT_S,
        execution_input: dict[str, Any] | None = None,
        on_state: Callable[[str], None] | None = None,
        on_history: Callable[[list[dict], bool], None] | None = None,
    ) -> dict[str, Any]:
        """Start the gate, wait for it (telling `on_state` each state entered, `on_history` the history as it grows:
        GateHarness.wait), and collect what happened."""
        h = self.harness
        arn = h.start(self.gate_arn, execution_input or {}, name=f"run-{uuid.uuid4().hex[:12]}")
        execution = h.wait(arn, timeout=timeout, on_state=on_state, on_history=on_history)
        s3 = h.client("s3")
        endpoints = h.sagemaker_resources()["endpoints"]
        packages = h.model_packages(self.group)
        existing = {name for names in h.live_sagemaker_resources().values() for name in names}
        files = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="reports/").get("Contents", [])]
        keys = [key for key in files if key.endswith("report.json")]
        return {
            "execution": execution,
            "states": h.states_entered(arn),
            "history": h.history(arn),  # get_execution_history's events (optigate.rehearse.progress reads them)
            "report": json.loads(report_body) if (report_body := _object(s3, keys)) is not None else None,
            "report_body": report_body,  # report.json's bytes as the decision wrote them (`rehearse --report`)
            # report.html beside it (its plots embedded), as the decision wrote it; None without one.
            "report_html": _object(s3, [key for key in files if key.endswith("report.html")]),
            "report_files": sorted(files),
            # Temporary resources the run left behind (never what CloudFormation owns).
            "left": {
                kind: [n for n in names if n not in self.owned] for kind, names in h.live_sagemaker_resources().items()
            },
            # What CloudFormation owns that the run removed (the live endpoint, its config, the models).
            "owned_missing": sorted(self.owned - existing),
            # The models each live endpoint serves (CloudFormation's), and its inference components.
            "live_models": {name: (h.endpoint_serving(name) or {}).get("models", []) for name in self.live},
            "live_components": self.live_components(),
            # Each benchmark worker's endpoint, as the worker was invoked (see lambda_handlers).
            "benchmarked": list(h.benchmarked),
            "packages": packages,
            "package_details": [
                h.client("sagemaker").describe_model_package(ModelPackageName=p["ModelPackageArn"]) for p in packages
            ],
            "messages": h.sns_messages(self.topic),
            # Each live endpoint's status and config now, and the config it started on.
            "live": {
                name: {
                    "status": endpoints[name]["status"],
                    "config": endpoints[name]["config"],
                    "original_config": config,
                }
                for name, config in self.live.items()
            },
        }


def _object(s3: Any, keys: list[str]) -> bytes | None:
    """The first of `keys` in the rehearsal's bucket, or None without one."""
    return s3.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read() if keys else None
