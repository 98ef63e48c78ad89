"""Jobs: processing jobs (moto has them, but Completed at once) and optimization jobs (not in moto).
Each runs through its in-progress status as the scenario says; the scenario's hook "runs" the job."""

from __future__ import annotations

import json

from optigate.rehearse.sagemaker.state import Operations, Progress, SageMakerError, arn_of, not_found, now, snake
from optigate.rehearse.scenario import DEFAULT_IMAGE, resolve_outcome

_OPTIMIZATION_RUNNING = ("STARTING", "INPROGRESS", "STOPPING")

#: The emulated layouts of an EAGLE-training job's output (Scenario.trained_head_layout; the real one is
#: undocumented). The head's files are Scenario.eagle_head_files; the registered model (OutputConfig.SageMakerModel)
#: names the head by container path, without a method (the head's config.json says EAGLE or EAGLE-3).
#: - "job_output": the head at `<S3OutputLocation>eagle_head/`, read as the AdditionalModelDataSources channel
#:   `eagle_head` named by OPTION_SPECULATIVE_CONFIG; the weights are the job's output.
#: - "sdk": as the SageMaker Python SDK builds a speculative-decoding model (aws/sagemaker-python-sdk
#:   sagemaker-serve/src/sagemaker/serve/model_builder_utils.py at a24812666d258d9d19c9a82d0c9385ca0bd3ba01): the head
#:   in channel `draft_model` (_generate_channel_name), here `<S3OutputLocation>draft_model/`, named by
#:   OPTION_SPECULATIVE_DRAFT_MODEL=/opt/ml/additional-model-data-sources/draft_model/ (_set_additional_model_source);
#:   the weights are the job's output after a quantization, compilation or sharding (_generate_optimized_core_model
#:   points the model at S3OutputLocation), else the model's own source, the job's ModelSource (_optimize_for_hf
#:   runs no job for speculative decoding alone).
TRAINED_HEAD_LAYOUTS = ("job_output", "sdk")
EAGLE_HEAD_CHANNEL = "eagle_head"
SDK_DRAFT_CHANNEL = "draft_model"
_REWRITES_WEIGHTS = ("ModelQuantizationConfig", "ModelCompilationConfig", "ModelShardingConfig")


def _prefix(uri: str, channel: str | None = None) -> dict:
    return {"S3Uri": uri + (f"{channel}/" if channel else ""), "S3DataType": "S3Prefix", "CompressionType": "None"}


def _training_data_problem(region: str, source: dict | None) -> str | None:
    """Why the emulated job cannot read its TrainingDataSource (None: it can, or SageMaker's own data is used).
    Missing data fails the job; SSE-KMS objects fail it too (optigate's reading of "unencrypted captured data",
    unverified: see optigate.config.rules.cross_file.capture_training_refusals)."""
    if source is None:
        return None
    import boto3

    uri = source["S3Uri"]
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", region_name=region)
    try:
        if source["S3DataType"] == "ManifestFile":
            keys = [key] if s3.head_object(Bucket=bucket, Key=key) else []
        else:
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=5).get("Contents", [])]
    except Exception:  # a missing bucket or object: nothing to train from
        keys = []
    if not keys:
        return f"ClientError: no training data found at {uri}"
    for found in keys:
        if s3.head_object(Bucket=bucket, Key=found).get("ServerSideEncryption") == "aws:kms":
            return f"ClientError: training data s3://{bucket}/{found} is KMS-encrypted; use unencrypted data"
    return None


def _compilation(configs: list[dict]) -> dict | None:
    return next((c["ModelCompilationConfig"] for c in configs if "ModelCompilationConfig" in c), None)


#: The emulated output of a compiling optimization job, modelled on djl-serving's compile steps (an assumption until
#: a live run records it): the container picks the compiler by its features (serving/docker/partition/
#: sm_neo_dispatcher.py); TensorRT-LLM writes its engines (tensorrt_llm_toolkit.create_model_repo, one per rank) and a
#: serving.properties of `engine=MPI` and every option it read (sm_neo_trt_llm_partition.py); Neuron puts the compiled
#: model under optimized_model/, copies the input beside it and names it in serving.properties
#: (sm_neo_neuron_partition.py), and refuses to compile without a tensor-parallel degree.
TRTLLM_ENGINE_DIR = "tensorrt_llm/1"
NEURON_MODEL_DIR = "optimized_model"


def _compiler(image: str | None) -> str | None:
    tag = (image or "").rsplit(":", 1)[-1]
    return "trtllm" if "tensorrtllm" in tag else "neuron" if "neuronx" in tag else None


def _compilation_problem(compilation: dict) -> str | None:
    """Why the emulated compile step fails (None: it compiles), as the LMI container's compile step would say it."""
    compiler = _compiler(compilation.get("Image"))
    if compiler is None:
        return (
            f"ClientError: {compilation.get('Image')} compiles nothing: only the LMI TensorRT-LLM and Neuron "
            "containers run a compilation (emulated)"
        )
    if compiler == "neuron" and "OPTION_TENSOR_PARALLEL_DEGREE" not in compilation.get("OverrideEnvironment", {}):
        return "InputConfiguration: Tensor parallel degree not specified. This is required for Neuron compilation"
    return None


def _write_compiled(region: str, output: str, configs: list[dict], compilation: dict) -> None:
    import boto3

    options: dict[str, str] = {}
    for config in configs:
        for settings in config.values():
            options |= dict(settings.get("OverrideEnvironment", {}))
    properties = {f"option.{k.removeprefix('OPTION_').lower()}": v for k, v in sorted(options.items())}
    tp = int(options.get("OPTION_TENSOR_PARALLEL_DEGREE", "1"))
    files: dict[str, bytes]
    if _compiler(compilation.get("Image")) == "trtllm":
        build = {
            "tensor_parallel": tp,
            "max_input_len": int(options.get("OPTION_MAX_INPUT_LEN", "0")),
            "max_batch_size": int(options.get("OPTION_MAX_ROLLING_BATCH_SIZE", "0")),
        }
        files = {f"{TRTLLM_ENGINE_DIR}/rank{rank}.engine": b"engine" for rank in range(tp)}
        files[f"{TRTLLM_ENGINE_DIR}/config.json"] = json.dumps({"build_config": build}).encode()
        lines = ["engine=MPI", *(f"{k}={v}" for k, v in properties.items())]
    else:
        files = {f"{NEURON_MODEL_DIR}/model.pt": b"neff", "config.json": b"{}"}
        lines = [*(f"{k}={v}" for k, v in properties.items()), f"option.model_id=./{NEURON_MODEL_DIR}"]
    files["serving.properties"] = ("\n".join(lines) + "\n").encode()
    bucket, _, key = output.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", region_name=region)
    for name, body in files.items():
        s3.put_object(Bucket=bucket, Key=f"{key}{name}", Body=body)


class JobOperations(Operations):
    """Create/Describe/StopProcessingJob; Create/Describe/Stop/Delete/ListOptimizationJobs."""

    # -- processing jobs -----------------------------------------------------------------------------

    def _op_create_processing_job(self, backend, state, params):
        name = params["ProcessingJobName"]
        if name in backend.processing_jobs:
            raise SageMakerError(
                "ValidationException",
                "Job name must be unique within an AWS account and region, and a job with this name already "
                f"exists ({backend.processing_jobs[name].arn})",
            )
        job = backend.create_processing_job(
            app_specification=params["AppSpecification"],
            experiment_config=params.get("ExperimentConfig"),
            network_config=params.get("NetworkConfig"),
            processing_inputs=params.get("ProcessingInputs"),
            processing_job_name=name,
            processing_output_config=params.get("ProcessingOutputConfig"),
            role_arn=params["RoleArn"],
            tags=params.get("Tags"),
            stopping_condition=params.get("StoppingCondition"),
        )
        self._stash(job, params)
        job.processing_job_status = "InProgress"
        job.processing_end_time = None
        job.processing_start_time = now()
        outcome = resolve_outcome(self.scenario.processing_job, params)
        state.processing_jobs[name] = Progress(outcome, outcome.after, "create")
        state.processing_requests[name] = params
        return {"ProcessingJobArn": job.arn}

    def _op_describe_processing_job(self, backend, state, params):
        name = params["ProcessingJobName"]
        progress = state.processing_jobs.get(name)
        if name not in backend.processing_jobs or progress is None or progress.remaining is None or not progress.tick():
            return
        job = backend.processing_jobs[name]
        fields = {"ProcessingJobStatus": progress.outcome.status}
        if progress.outcome.failure_reason:
            fields["FailureReason"] = progress.outcome.failure_reason
        if self.scenario.on_processing_job is not None:
            request = state.processing_requests[name]
            fields.update(self._run_hook(self.scenario.on_processing_job, request, "ProcessingJobStatus", "Failed"))
        if fields["ProcessingJobStatus"] == "Failed" and "FailureReason" not in fields:
            fields["FailureReason"] = "AlgorithmError: the processing container exited with a non-zero code"
        for key, value in fields.items():
            setattr(job, snake(key), value)
        job.processing_end_time = job.last_modified_time = now()
        progress.remaining = None

    def _op_stop_processing_job(self, backend, state, params):
        state.processing_jobs.pop(params["ProcessingJobName"], None)

    # -- optimization jobs (not in moto) -------------------------------------------------------------

    def _optimization_job(self, backend, state, name: str) -> dict:
        if name not in state.optimization_jobs:
            arn = arn_of("optimization-job", name, backend)
            raise SageMakerError("ResourceNotFound", f'Could not find optimization job "{arn}".')
        return state.optimization_jobs[name]

    def _op_create_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        arn = arn_of("optimization-job", name, backend)
        if name in state.optimization_jobs:
            raise SageMakerError("ResourceInUse", f'Optimization job "{arn}" already exists.')
        source_model = params["ModelSource"].get("SageMakerModel", {}).get("ModelName")
        if source_model is not None and source_model not in backend._models:
            raise not_found("model", arn_of("model", source_model, backend))
        if not params["ModelSource"].get("S3") and source_model is None:
            raise SageMakerError("ValidationException", "ModelSource must specify S3 or SageMakerModel.")
        created = now()
        job = {k: v for k, v in params.items() if k != "Tags"}
        job.update(
            OptimizationJobArn=arn, OptimizationJobStatus="STARTING", CreationTime=created, LastModifiedTime=created
        )
        state.optimization_jobs[name] = job
        outcome = resolve_outcome(self.scenario.optimization_job, params)
        state.optimization_progress[name] = Progress(outcome, outcome.after, "create")
        state.optimization_requests[name] = params
        return {"OptimizationJobArn": arn}

    def _op_describe_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        job = self._optimization_job(backend, state, name)
        progress = state.optimization_progress[name]
        if progress.remaining is None:
            if job["OptimizationJobStatus"] == "STARTING":  # never finishes: STARTING, then INPROGRESS
                self._optimization_running(job)
        elif progress.tick():
            self._finish_optimization_job(backend, state, job, progress)
        elif job["OptimizationJobStatus"] != "STOPPING":
            # The first Describe may still see STARTING when more in-progress Describes follow.
            first_look = job["OptimizationJobStatus"] == "STARTING" and name not in state.optimization_seen
            if first_look and progress.remaining > 0:
                state.optimization_seen.add(name)
            else:
                self._optimization_running(job)
        return dict(job)

    @staticmethod
    def _optimization_running(job: dict) -> None:
        job["OptimizationJobStatus"] = "INPROGRESS"
        job.setdefault("OptimizationStartTime", now())

    def _finish_optimization_job(self, backend, state, job: dict, progress: Progress) -> None:
        outcome, finished = progress.outcome, now()
        progress.remaining = None
        job.setdefault("OptimizationStartTime", finished)
        job["LastModifiedTime"] = job["OptimizationEndTime"] = finished
        if job["OptimizationJobStatus"] == "STOPPING":
            job["OptimizationJobStatus"] = "STOPPED"
            return
        fields = {"OptimizationJobStatus": outcome.status}
        if outcome.failure_reason:
            fields["FailureReason"] = outcome.failure_reason
        eagle = next(
            (
                c["ModelSpeculativeDecodingConfig"]
                for c in job["OptimizationConfigs"]
                if "ModelSpeculativeDecodingConfig" in c
            ),
            None,
        )
        if outcome.status == "COMPLETED" and eagle is not None:
            problem = _training_data_problem(backend.region_name, eagle.get("TrainingDataSource"))
            if problem:
                fields = {"OptimizationJobStatus": "FAILED", "FailureReason": problem}
        compilation = _compilation(job["OptimizationConfigs"])
        if fields["OptimizationJobStatus"] == "COMPLETED" and compilation is not None:
            problem = _compilation_problem(compilation)
            if problem:
                fields = {"OptimizationJobStatus": "FAILED", "FailureReason": problem}
        if fields["OptimizationJobStatus"] == "COMPLETED" and self.scenario.on_optimization_job is not None:
            request = state.optimization_requests[job["OptimizationJobName"]]
            fields.update(self._run_hook(self.scenario.on_optimization_job, request, "OptimizationJobStatus", "FAILED"))
        job.update(fields)
        if job["OptimizationJobStatus"] == "FAILED":
            job.setdefault("FailureReason", "ClientError: optimization failed")
        if job["OptimizationJobStatus"] == "COMPLETED":
            image = self.scenario.recommended_inference_image
            if image is not None:
                job["OptimizationOutput"] = {"RecommendedInferenceImage": image}
            else:  # what the job ran (a config's Image), else a default: only the registered model uses it
                ran = [c.get("Image") for config in job["OptimizationConfigs"] for c in config.values()]
                image = next((i for i in ran if i), DEFAULT_IMAGE)
            output = job["OutputConfig"]["S3OutputLocation"]
            if compilation is not None:
                _write_compiled(backend.region_name, output, job["OptimizationConfigs"], compilation)
            container = {"Image": image, "ModelDataUrl": output}
            if eagle is not None:
                container = self._write_eagle_head(backend, image, job)
            output_model = job["OutputConfig"].get("SageMakerModel", {}).get("ModelName")
            if output_model and output_model not in backend._models:
                # The real job registers the optimized model under that name.
                backend.create_model(
                    model_name=output_model,
                    execution_role_arn=job["RoleArn"],
                    primary_container=container,
                    vpc_config=None,
                    containers=None,
                    tags=None,
                )

    def _write_eagle_head(self, backend, image: str, job: dict) -> dict:
        """The trained head, in the scenario's layout (TRAINED_HEAD_LAYOUTS), and the container registered for it."""
        import boto3

        layout = self.scenario.trained_head_layout
        if layout not in TRAINED_HEAD_LAYOUTS:
            raise ValueError(f"unknown trained-head layout {layout!r}; one of {TRAINED_HEAD_LAYOUTS}")
        output = job["OutputConfig"]["S3OutputLocation"]
        channel = SDK_DRAFT_CHANNEL if layout == "sdk" else EAGLE_HEAD_CHANNEL
        bucket, _, key = output.removeprefix("s3://").partition("/")
        s3 = boto3.client("s3", region_name=backend.region_name)
        for name, body in self.scenario.eagle_head_files.items():
            s3.put_object(Bucket=bucket, Key=f"{key}{channel}/{name}", Body=body)
        path = f"/opt/ml/additional-model-data-sources/{channel}"
        weights = output
        if layout == "sdk":
            default = {"OPTION_SPECULATIVE_DRAFT_MODEL": f"{path}/"}
            if not any(kind in config for config in job["OptimizationConfigs"] for kind in _REWRITES_WEIGHTS):
                weights = job["ModelSource"]["S3"]["S3Uri"]
        else:
            default = {"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": path})}
        environment = self.scenario.eagle_model_environment
        return {
            "Image": image,
            "Environment": default if environment is None else environment,
            "ModelDataSource": {"S3DataSource": _prefix(weights)},
            "AdditionalModelDataSources": [{"ChannelName": channel, "S3DataSource": _prefix(output, channel)}],
        }

    def _op_stop_optimization_job(self, backend, state, params):
        job = self._optimization_job(backend, state, params["OptimizationJobName"])
        if job["OptimizationJobStatus"] in ("COMPLETED", "FAILED", "STOPPED"):
            raise SageMakerError("ValidationException", f"Optimization job is already {job['OptimizationJobStatus']}.")
        job["OptimizationJobStatus"] = "STOPPING"
        progress = state.optimization_progress[params["OptimizationJobName"]]
        progress.remaining = 0  # STOPPED on the next Describe
        return {}

    def _op_delete_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        job = self._optimization_job(backend, state, name)
        if job["OptimizationJobStatus"] in _OPTIMIZATION_RUNNING:
            raise SageMakerError(
                "ValidationException", "Cannot delete an optimization job that is in progress; stop it first."
            )
        del state.optimization_jobs[name]
        state.optimization_progress.pop(name, None)
        return {}

    def _op_list_optimization_jobs(self, backend, state, params):
        contains = params.get("NameContains", "")
        jobs = [j for j in state.optimization_jobs.values() if contains in j["OptimizationJobName"]]
        if "StatusEquals" in params:
            jobs = [j for j in jobs if j["OptimizationJobStatus"] == params["StatusEquals"]]
        keys = (
            "OptimizationJobName",
            "OptimizationJobArn",
            "CreationTime",
            "OptimizationJobStatus",
            "OptimizationStartTime",
            "OptimizationEndTime",
            "LastModifiedTime",
            "DeploymentInstanceType",
        )
        summaries = [
            {k: j[k] for k in keys if k in j} | {"OptimizationTypes": [next(iter(c)) for c in j["OptimizationConfigs"]]}
            for j in jobs
        ]
        return {"OptimizationJobSummaries": summaries}
