"""SageMaker's managed benchmark (not in moto): AI workload configs and AI benchmark jobs.

As the service behaves where its documentation says (API reference CreateAIBenchmarkJob, DescribeAIBenchmarkJob,
CreateAIWorkloadConfig; https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-benchmark.html):

- a workload config's name is unique; its WorkloadSpec.Inline (JSON or YAML) declares `benchmark.type: aiperf`
  (cfn-lint's AWS::SageMaker::AIWorkloadConfig schema); DeleteAIWorkloadConfig lowercases the name it is given,
  so a config named in capitals cannot be deleted (the same schema's description);
- a job's name is unique; its workload config must exist; its target endpoint must exist and be InService ("A
  SageMaker AI endpoint in InService status"), else ValidationException; listed inference components must exist;
- a job reports InProgress for the scenario's ticks, then Completed or Failed (`Scenario.ai_benchmark_job`);
  StopAIBenchmarkJob makes it Stopping, the next Describe Stopped; a job whose endpoint went away while it ran
  fails. On Completed it writes `output.tar.gz` holding AIPerf's `profile_export_aiperf.json` under its
  S3OutputLocation, built in AIPerf's documented export format (ai-dynamo/aiperf
  docs/tutorials/working-with-profile-exports.md) from the scenario's figures plus its offset.
"""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import yaml

from optigate.rehearse.sagemaker.state import Operations, Progress, SageMakerError, arn_of, now
from optigate.rehearse.scenario import resolve_outcome

_TERMINAL = ("Completed", "Failed", "Stopped")
#: What the emulated AIPerf reports when the scenario gives no figures.
DEFAULT_FIGURES = {"ttft_p99_ms": 120.0, "itl_p99_ms": 12.0, "output_tokens_per_s": 400.0}


def profile_export(figures: dict[str, float], workload: dict[str, Any]) -> dict[str, Any]:
    """A `profile_export_aiperf.json` with `figures` (ttft_p99_ms, itl_p99_ms, output_tokens_per_s) as AIPerf
    writes one: metric entries keyed by tag with unit, avg, percentiles, min, max, std."""
    parameters = workload.get("parameters") or {}
    requests = float(parameters.get("request_count") or 100)
    ttft, itl, rate = figures["ttft_p99_ms"], figures["itl_p99_ms"], figures["output_tokens_per_s"]
    output_tokens = float(parameters.get("output_tokens_mean") or 256)

    def latency(p99: float) -> dict[str, Any]:
        return {
            "unit": "ms",
            "avg": p99 * 0.7,
            "p50": p99 * 0.65,
            "p90": p99 * 0.9,
            "p95": p99 * 0.95,
            "p99": p99,
            "min": p99 * 0.4,
            "max": p99 * 1.05,
            "std": p99 * 0.12,
        }

    duration = requests * output_tokens / rate if rate > 0 else 0.0
    return {
        "request_throughput": {"unit": "requests/sec", "avg": requests / duration if duration else 0.0},
        "request_latency": latency(ttft + itl * (output_tokens - 1)),
        "time_to_first_token": latency(ttft),
        "inter_token_latency": latency(itl),
        "output_token_throughput": {"unit": "tokens/sec", "avg": rate},
        "output_sequence_length": {"unit": "tokens", "avg": output_tokens, "p50": output_tokens},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "request_count": {"unit": "requests", "avg": requests},
        "was_cancelled": False,
        "error_summary": [],
        "error_request_count": None,
        "input_config": {
            "endpoint": {"type": "chat", "streaming": bool(parameters.get("streaming", True))},
            "loadgen": {"concurrency": parameters.get("concurrency"), "request_count": parameters.get("request_count")},
        },
    }


def output_archive(profile: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in (
            ("artifacts/profile_export_aiperf.json", json.dumps(profile).encode()),
            ("artifacts/profile_export.jsonl", b""),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _name_of(identifier: str) -> str:
    """A name from a name-or-ARN identifier."""
    return identifier.rsplit("/", 1)[-1] if identifier.startswith("arn:") else identifier


class AIBenchmarkOperations(Operations):
    """Create/Describe/Delete AIWorkloadConfig; Create/Describe/Stop/Delete AIBenchmarkJob."""

    # -- workload configs ----------------------------------------------------------------------------

    def _op_create_a_i_workload_config(self, backend, state, params):
        name = params["AIWorkloadConfigName"]
        arn = arn_of("ai-workload-config", name, backend)
        if name in state.ai_workload_configs:
            raise SageMakerError("ResourceInUse", f'AI workload config "{arn}" already exists.')
        inline = ((params.get("AIWorkloadConfigs") or {}).get("WorkloadSpec") or {}).get("Inline")
        if inline is not None:
            try:
                spec = yaml.safe_load(inline)
            except yaml.YAMLError as error:
                raise SageMakerError(
                    "ValidationException", f"WorkloadSpec.Inline is not JSON or YAML: {error}"
                ) from error
            kind = ((spec or {}).get("benchmark") or {}).get("type") if isinstance(spec, dict) else None
            if kind != "aiperf":
                raise SageMakerError(
                    "ValidationException", f"WorkloadSpec benchmark.type must be aiperf, got {kind!r}."
                )
        state.ai_workload_configs[name] = {
            **{k: v for k, v in params.items() if k != "Tags"},
            "AIWorkloadConfigArn": arn,
            "CreationTime": now(),
        }
        return {"AIWorkloadConfigArn": arn}

    def _workload_config(self, backend, state, name: str) -> dict:
        if name not in state.ai_workload_configs:
            arn = arn_of("ai-workload-config", name, backend)
            raise SageMakerError("ResourceNotFound", f'Could not find AI workload config "{arn}".')
        return state.ai_workload_configs[name]

    def _op_describe_a_i_workload_config(self, backend, state, params):
        return dict(self._workload_config(backend, state, params["AIWorkloadConfigName"]))

    def _op_delete_a_i_workload_config(self, backend, state, params):
        name = params["AIWorkloadConfigName"].lower()  # the service lowercases the name it deletes
        config = self._workload_config(backend, state, name)
        del state.ai_workload_configs[name]
        return {"AIWorkloadConfigArn": config["AIWorkloadConfigArn"]}

    # -- benchmark jobs ------------------------------------------------------------------------------

    def _ai_benchmark_job(self, backend, state, name: str) -> dict:
        if name not in state.ai_benchmark_jobs:
            arn = arn_of("ai-benchmark-job", name, backend)
            raise SageMakerError("ResourceNotFound", f'Could not find AI benchmark job "{arn}".')
        return state.ai_benchmark_jobs[name]

    def _op_create_a_i_benchmark_job(self, backend, state, params):
        name = params["AIBenchmarkJobName"]
        arn = arn_of("ai-benchmark-job", name, backend)
        if name in state.ai_benchmark_jobs:
            raise SageMakerError("ResourceInUse", f'AI benchmark job "{arn}" already exists.')
        self._workload_config(backend, state, _name_of(params["AIWorkloadConfigIdentifier"]))
        target = params["BenchmarkTarget"]["Endpoint"]
        endpoint = _name_of(target["Identifier"])
        found = backend.endpoints.get(endpoint)
        if found is None or found.endpoint_status != "InService":
            status = "does not exist" if found is None else f"is {found.endpoint_status}"
            raise SageMakerError(
                "ValidationException", f"Endpoint {endpoint} {status}; a benchmark job needs an InService endpoint."
            )
        for component in target.get("InferenceComponents") or []:
            if _name_of(component["Identifier"]) not in state.inference_components:
                raise SageMakerError("ValidationException", f"Inference component {component['Identifier']} not found.")
        created = now()
        state.ai_benchmark_jobs[name] = {
            **{k: v for k, v in params.items() if k != "Tags"},
            "AIBenchmarkJobArn": arn,
            "AIBenchmarkJobStatus": "InProgress",
            "CreationTime": created,
            "StartTime": created,
        }
        outcome = resolve_outcome(self.scenario.ai_benchmark_job, params)
        state.ai_benchmark_progress[name] = Progress(outcome, outcome.after, "create")
        return {"AIBenchmarkJobArn": arn}

    def _op_describe_a_i_benchmark_job(self, backend, state, params):
        name = params["AIBenchmarkJobName"]
        job = self._ai_benchmark_job(backend, state, name)
        progress = state.ai_benchmark_progress[name]
        if progress.remaining is not None and progress.tick():
            self._finish_ai_benchmark_job(backend, state, job, progress)
        out = {k: v for k, v in job.items() if not k.startswith("_")}
        out["OutputConfig"] = {"S3OutputLocation": job["OutputConfig"]["S3OutputLocation"]}
        return out

    def _finish_ai_benchmark_job(self, backend, state, job: dict, progress: Progress) -> None:
        progress.remaining = None
        job["EndTime"] = now()
        if job["AIBenchmarkJobStatus"] == "Stopping":
            job["AIBenchmarkJobStatus"] = "Stopped"
            return
        outcome = progress.outcome
        endpoint = _name_of(job["BenchmarkTarget"]["Endpoint"]["Identifier"])
        found = backend.endpoints.get(endpoint)
        if outcome.status == "Completed" and (found is None or found.endpoint_status != "InService"):
            job.update(AIBenchmarkJobStatus="Failed", FailureReason=f"ClientError: endpoint {endpoint} not InService")
            return
        job["AIBenchmarkJobStatus"] = outcome.status
        if outcome.failure_reason:
            job["FailureReason"] = outcome.failure_reason
        if outcome.status == "Completed":
            self._write_output(state, job)

    def _write_output(self, state, job: dict) -> None:
        """`output.tar.gz` under S3OutputLocation, as the real job leaves it (the SageMaker SDK finds the first key
        ending in output.tar.gz under the location)."""
        config = state.ai_workload_configs[_name_of(job["AIWorkloadConfigIdentifier"])]
        inline = ((config.get("AIWorkloadConfigs") or {}).get("WorkloadSpec") or {}).get("Inline") or "{}"
        workload = yaml.safe_load(inline) or {}
        figures = dict(DEFAULT_FIGURES)
        if self.scenario.ai_benchmark_figures is not None:
            request = json.loads(json.dumps({k: v for k, v in job.items() if k != "CreationTime"}, default=str))
            figures.update(self.scenario.ai_benchmark_figures(request))
        for key, offset in self.scenario.ai_benchmark_offset.items():
            figures[key] += offset
        location = job["OutputConfig"]["S3OutputLocation"]
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        key = f"{prefix.rstrip('/')}/{job['AIBenchmarkJobName']}/output/output.tar.gz".lstrip("/")
        body = output_archive(profile_export(figures, workload))
        self.harness.client("s3").put_object(Bucket=bucket, Key=key, Body=body)

    def _op_stop_a_i_benchmark_job(self, backend, state, params):
        name = params["AIBenchmarkJobName"]
        job = self._ai_benchmark_job(backend, state, name)
        if job["AIBenchmarkJobStatus"] in _TERMINAL or job["AIBenchmarkJobStatus"] == "Stopping":
            raise SageMakerError("ValidationException", f"AI benchmark job is already {job['AIBenchmarkJobStatus']}.")
        job["AIBenchmarkJobStatus"] = "Stopping"
        state.ai_benchmark_progress[name].remaining = 0  # Stopped on the next Describe
        state.ai_benchmark_stops.append(name)
        return {"AIBenchmarkJobArn": job["AIBenchmarkJobArn"]}

    def _op_delete_a_i_benchmark_job(self, backend, state, params):
        name = params["AIBenchmarkJobName"]
        job = self._ai_benchmark_job(backend, state, name)
        if job["AIBenchmarkJobStatus"] not in _TERMINAL:
            raise SageMakerError("ValidationException", "Cannot delete an AI benchmark job that is running; stop it.")
        del state.ai_benchmark_jobs[name]
        state.ai_benchmark_progress.pop(name, None)
        return {"AIBenchmarkJobArn": job["AIBenchmarkJobArn"]}


def ai_benchmark_jobs(harness) -> dict[str, dict[str, Any]]:
    """The emulated managed benchmark jobs now: name -> status, failure reason, target endpoint, creation order."""
    state = harness.sagemaker.region_state(harness.sagemaker_backend())
    return {
        name: {
            "status": job["AIBenchmarkJobStatus"],
            "failure_reason": job.get("FailureReason"),
            "endpoint": job["BenchmarkTarget"]["Endpoint"]["Identifier"],
            "workload_config": job["AIWorkloadConfigIdentifier"],
            "output": job["OutputConfig"]["S3OutputLocation"],
            "stopped_by_request": name in state.ai_benchmark_stops,
        }
        for name, job in state.ai_benchmark_jobs.items()
    }
