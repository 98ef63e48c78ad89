"""The gate's optimization job: its bounds, what it writes into the candidate's serving.properties, and the EAGLE
head it trains (no CDK here; optigate.deployment.gate puts them in the gate's plan)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from optigate.config.models import MIN_TRAINING_RECORDS, split_s3_uri
from optigate.serving.images import FIRST_COMPRESSED_TENSORS_LMI, lmi_version

#: The optimization job's bounds: at most 10 h of work (its StoppingCondition's MaxRuntimeInSeconds, which SageMaker
#: enforces), and at most 2 h waiting for capacity (a p5 may not be free). The job is sent no pending bound: the
#: SageMaker SDK's optimize() sends MaxRuntimeInSeconds only and no reference documents MaxPendingTimeInSeconds for an
#: optimization job (tests/template_rules/rules/optimization_stopping_condition.py). The gate polls for runtime plus
#: pending plus a grace for the stop, and stops a job still queued or running when its polls run out.
OPTIMIZATION_MAX_RUNTIME_SECONDS = 36_000
OPTIMIZATION_MAX_PENDING_SECONDS = 7_200
OPTIMIZATION_STOP_GRACE_SECONDS = 1_800
OPTIMIZATION_POLL_SECONDS = 300
OPTIMIZATION_MAX_POLLS = math.ceil(
    (OPTIMIZATION_MAX_RUNTIME_SECONDS + OPTIMIZATION_MAX_PENDING_SECONDS + OPTIMIZATION_STOP_GRACE_SECONDS)
    / OPTIMIZATION_POLL_SECONDS
)


@cache
def configs_with_image() -> frozenset[str]:
    """The members of SageMaker's OptimizationConfig that name the image their job runs (botocore's model):
    quantization, compilation and sharding do; speculative decoding has no Image."""
    import botocore.session

    union = botocore.session.get_session().get_service_model("sagemaker").shape_for("OptimizationConfig")
    return frozenset(name for name, shape in union.members.items() if "Image" in getattr(shape, "members", {}))


def job_serving_options(optimization_configs: list[dict[str, Any]] | None, image: str) -> dict[str, str]:
    """The `OPTION_*` values an optimization job run on `image` freezes into its output's serving.properties,
    which the candidate then serves with, over its environment ("Configurations specified in the
    serving.properties files will override configurations specified in environment variables":
    djl-serving serving/docs/lmi/deployment_guide/configurations.md).

    The job's container writes every `OPTION_*` variable it saw as `option.*` (djl-serving
    serving/docker/partition/properties_manager.py and utils.update_kwargs_with_env_vars), and since LMI
    0.35.0 `option.quantize=fp8` as `compressed-tensors` (:data:`FIRST_COMPRESSED_TENSORS_LMI`). The gate
    passes only each config's OverrideEnvironment, so those are the options. A compiling job (ModelCompilationConfig:
    TensorRT-LLM or Neuron) writes its options as it read them (sm_neo_trt_llm_partition.py generate_properties_file,
    sm_neo_neuron_partition.py write_properties): an fp8 engine stays `fp8`; the llm-compressor rewrite is the vLLM
    container's quantization step only."""
    options: dict[str, str] = {}
    for config in optimization_configs or []:
        for settings in config.values():
            options |= {
                k: str(v) for k, v in settings.get("OverrideEnvironment", {}).items() if k.startswith("OPTION_")
            }
    compiles = any("ModelCompilationConfig" in config for config in optimization_configs or [])
    if options.get("OPTION_QUANTIZE") == "fp8" and not compiles:
        version = lmi_version(image)
        if version is None:
            raise ValueError(
                f"cannot tell which quantize option an fp8 optimization job on {image} writes (not an LMI DLC tag)"
            )
        if version >= FIRST_COMPRESSED_TENSORS_LMI:
            options["OPTION_QUANTIZE"] = "compressed-tensors"
    return options


#: Where the gate puts a trained head the optimization job left outside its optimized model's prefix, under the
#: candidate's prefix (the head must be under the model prefix: AWS::SageMaker::Model has no
#: AdditionalModelDataSources, so CloudFormation can deploy one prefix only).
TRAINED_HEAD_DIR = "speculative_head"


@dataclass(frozen=True)
class TrainedHead:
    """An EAGLE head the gate's optimization job trains (ModelSpeculativeDecodingConfig, Technique EAGLE).

    :param train_from: what the team configured, region resolved: "data_capture" or an S3 URI. Part of the
        fingerprint; from data capture, the data's URI is the capture bucket's (a CloudFormation token, which
        the constructs add: GateResources.training_data_uri).
    :param s3_data_type: TrainingDataSource's S3DataType (S3Prefix or ManifestFile).
    :param num_speculative_tokens: vLLM's num_speculative_tokens in OPTION_SPECULATIVE_CONFIG.
    :param method: "eagle", as configured; vLLM's method (eagle or eagle3) is read from the trained head, because
        the service chooses EAGLE-2 or EAGLE-3 per architecture.
    :param min_training_records: from data capture, the readable chat records the capture must hold before the job
        is created (the gate's check: optigate.bench.core.shard_workload.check_training_data). Not part of the
        fingerprint: it decides whether a run starts, not what is proven.
    """

    train_from: str
    s3_data_type: str = "S3Prefix"
    num_speculative_tokens: int = 3
    method: str = "eagle"
    min_training_records: int = MIN_TRAINING_RECORDS

    @property
    def from_capture(self) -> bool:
        return self.train_from == "data_capture"

    @property
    def data_location(self) -> tuple[str, str] | None:
        """(bucket, key pattern) of the records the job reads from an S3 source, None from data capture: a
        manifest's objects are read from its folder (its `prefix` entry must lie there)."""
        if self.from_capture:
            return None
        bucket, key = split_s3_uri(self.train_from)
        folder = key if self.s3_data_type == "S3Prefix" else key.rpartition("/")[0]
        folder = folder if self.s3_data_type == "S3Prefix" or not folder else folder + "/"
        return bucket, f"{folder}*"

    def training_data(self, uri: str | None = None) -> dict[str, str]:
        """TrainingDataSource as the job gets it; `uri`: the capture's prefix when it trains from data capture."""
        source = uri if self.from_capture else self.train_from
        if source is None:
            raise ValueError("an EAGLE head trained from data capture needs the capture's S3 URI")
        return {"S3Uri": source, "S3DataType": self.s3_data_type}

    def training_check(self, uri: str | None = None) -> dict[str, Any] | None:
        """What the gate's check reads before the job is created ({source, min_records}: the capture's prefix,
        `uri`, which the job gets whole), None when the head trains from an S3 URI (not capture: not counted)."""
        if not self.from_capture:
            return None
        if uri is None:
            raise ValueError("an EAGLE head trained from data capture needs the capture's S3 URI")
        return {"source": uri, "min_records": self.min_training_records}

    @property
    def proof(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "train_from": self.train_from,
            "data_type": self.s3_data_type,
            "num_speculative_tokens": self.num_speculative_tokens,
        }
