# Over 400 lines: the one config schema, every key with its reference description, in the order the files nest.
"""The configuration schema: what a team says in `config/teams/<team>.yaml` and what
`config/environments.yaml` says about each environment.

The pydantic models *are* the schema: `optigate schema` writes them as JSON schema for editors.
Field names follow the SageMaker SDK and the LMI container documentation so that users coming from
a notebook recognise them. Shape and type checks live here; rules over several fields live in
`optigate.config.rules` (each registered with its ID), and rules that need the instance catalog, the image
tables or the capacity plan in `optigate.deployment.rules`, so each problem is reported at its own YAML path and line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)

from optigate.config.instance_names import INSTANCE_TYPE_PATTERN
from optigate.config.limits import (
    ADAPTER_VERSION_MARGIN_PCT,
    MAX_BUDGET_MS,
    MAX_CAPACITY,
    MAX_GAIN_PCT,
    MAX_HEADS,
    MAX_NON_INFERIORITY_PCT,
    MAX_TOKENS,
    MAX_WIDTH,
)
from optigate.config.lmi_options import VllmEngineSwitches
from optigate.config.rule_registry import Found, raise_first, rule_check

S3_URI_PATTERN = r"^s3://[a-z0-9{][a-z0-9.\-{}]{1,80}[a-z0-9}](/.*)?$"
S3Uri = Annotated[
    str,
    StringConstraints(pattern=S3_URI_PATTERN),
    Field(description="An S3 URI, s3://bucket/key. `{region}` is replaced by the environment's region."),
]


#: A KMS key's ARN (IAM authorizes kms:Decrypt on the key, never on an alias). `{region}` stands for the region only
#: with a multi-Region key (mrk-...), the one key ID that is the same in every region it is replicated to.
KMS_KEY_ARN_PATTERN = (
    r"^arn:aws[a-z-]*:kms:(?:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:key/(?:mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-"
    r"[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})|\{region\}:\d{12}:key/mrk-[0-9a-f]{32})$"
)
KmsKeyArn = Annotated[
    str,
    StringConstraints(pattern=KMS_KEY_ARN_PATTERN),
    Field(
        description="A KMS key ARN, arn:aws:kms:<region>:<account>:key/<key id> (not an alias). `{region}` as the "
        "region is replaced by the environment's, for a multi-Region key (mrk-...) only."
    ),
]


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`; the key is "" for a bare bucket."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


ResourceName = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$"),
    Field(description="Lower-case letters, digits and hyphens; at most 32 characters."),
]

# SageMaker's documented range for both timeouts (ProductionVariant API reference).
TIMEOUT_MIN_SECONDS = 60
TIMEOUT_MAX_SECONDS = 3600


class Strict(BaseModel):
    """Base for every config model: unknown keys are errors and parsed config is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- model


class HuggingFaceSource(Strict):
    model_id: str = Field(
        description="Hugging Face repository id, e.g. meta-llama/Llama-3.1-8B-Instruct.",
        pattern=r"^[\w.\-]+/[\w.\-]+$",
    )
    revision: str = Field("main", description="Branch, tag or commit to copy.")
    s3_uri: S3Uri = Field(
        description="Where the weights are copied to before deployment; endpoints read from here, never from the hub."
    )


class JumpStartSource(Strict):
    model_id: str = Field(description="JumpStart model id, e.g. meta-textgeneration-llama-3-1-8b-instruct.")
    model_version: str = Field("*", description="JumpStart model version.")
    s3_uri: S3Uri = Field(
        description="The model's uncompressed artifact prefix in the JumpStart bucket "
        "(`JumpStartModel(...).model_data`). Synth is offline, so it is not looked up."
    )
    accept_eula: bool = Field(False, description="Accept the model's EULA (gated models need it).")


class ModelSource(Strict):
    """Exactly one of `s3_uri`, `jumpstart`, `hugging_face`."""

    s3_uri: S3Uri | None = Field(
        None, description="Uncompressed model artifacts (a Hugging Face layout) under this prefix."
    )
    jumpstart: JumpStartSource | None = Field(
        None, description="A SageMaker JumpStart model, served from its uncompressed artifacts in the JumpStart bucket."
    )
    hugging_face: HuggingFaceSource | None = Field(
        None,
        description="A Hugging Face Hub model, served from the copy of its weights at s3_uri (synth never contacts "
        "the hub); its model_id is also the managed cross-check's default tokenizer.",
    )
    kms_key_arn: KmsKeyArn | None = Field(
        None,
        description="The customer-managed KMS key that encrypts the objects under the model's S3 prefix (SSE-KMS), "
        "draft and EAGLE-3 heads under it included. optigate grants kms:Decrypt of it, through S3 only, to the "
        "roles that read the prefix: the model's execution role (the live model, the gate's baseline twin and "
        "candidate, its optimization job), a shadow model's role and the gate's staging function's role. The key's "
        "own policy must allow those roles too. Unset: the prefix is not encrypted with a customer-managed key.",
    )

    @property
    def artifact_uri(self) -> str:
        """The S3 prefix the endpoint downloads, whichever form the source took."""
        if self.s3_uri:
            return self.s3_uri
        chosen = self.jumpstart or self.hugging_face
        if chosen is None:  # the config rules refuse this before anything reads the prefix
            raise ValueError("model.source: give exactly one of s3_uri, jumpstart, hugging_face")
        return chosen.s3_uri


class ArchitectureFields(Strict):
    """The fields of a Hugging Face `config.json` the planner needs (names as in config.json)."""

    num_hidden_layers: int = Field(
        gt=0,
        le=1024,
        description="Decoder layers, as in the model's config.json; the weights and KV cache scale with it.",
    )
    hidden_size: int = Field(gt=0, le=MAX_WIDTH, description="The model's width, as in the model's config.json.")
    num_attention_heads: int = Field(
        gt=0,
        le=MAX_HEADS,
        description="Query heads per layer, as in the model's config.json; tensor_parallel_degree must divide it.",
    )
    num_key_value_heads: int | None = Field(
        None, gt=0, le=MAX_HEADS, description="Defaults to num_attention_heads (no GQA)."
    )
    head_dim: int | None = Field(
        None,
        gt=0,
        le=8192,
        description="Defaults to hidden_size / num_attention_heads, which must then be a whole number.",
    )
    intermediate_size: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        description="MLP width of a layer, as in the model's config.json; derived from num_parameters when omitted "
        "(give one of the two).",
    )
    vocab_size: int = Field(
        gt=0,
        le=MAX_TOKENS,
        description="Vocabulary size, as in the model's config.json: sizes the embeddings, lm_head and the logits.",
    )
    max_position_embeddings: int = Field(
        gt=0,
        le=MAX_TOKENS,
        description="The longest context the model takes, as in the model's config.json: serving.max_model_len may "
        "not exceed it, and a derived one is capped by it.",
    )
    tie_word_embeddings: bool = Field(
        False,
        description="As in the model's config.json: true when lm_head shares the embedding's weights (counted once).",
    )
    num_local_experts: int | None = Field(
        None, gt=0, le=MAX_HEADS, description="MoE: experts per layer (give num_experts_per_tok with it)."
    )
    num_experts_per_tok: int | None = Field(
        None, gt=0, le=MAX_HEADS, description="MoE: experts routed per token (give num_local_experts with it)."
    )
    moe_intermediate_size: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        description="MoE: one expert's MLP width, as in the model's config.json; defaults to intermediate_size.",
    )
    num_parameters: int | None = Field(
        None, gt=0, le=10**14, description="Published parameter count; computed from the fields when omitted."
    )


#: The weights as stored: a dtype, or the quantization a pre-quantized checkpoint carries (its config.json's
#: quantization_config). Names as in `serving.quantization` where they are the same format.
StoredWeights = Literal["bf16", "fp16", "fp32", "fp8", "awq", "gptq", "nvfp4"]
#: The stored weights that are a dtype, not a quantization: the only ones an engine or a job quantizes.
UNQUANTIZED_WEIGHTS = frozenset({"bf16", "fp16", "fp32"})


class ModelSpec(Strict):
    source: ModelSource = Field(
        description="Where the weights are: exactly one of s3_uri, jumpstart, hugging_face. `{region}` in any of "
        "its S3 URIs becomes the environment's region."
    )
    architecture: str | ArchitectureFields = Field(
        description="A known architecture name (see `optigate plan --list-models`) or the fields of the "
        "model's config.json."
    )
    weights: StoredWeights | None = Field(
        None,
        description="The weights as stored at the source (what the endpoint downloads): a dtype (bf16, fp16, fp32) "
        "or a quantization (fp8, awq, gptq, nvfp4). Known without it for a Hugging Face id in optigate's catalog "
        "and from local_dir's config.json; otherwise give it (unknown weights are taken as bf16, and said so). It "
        "decides which serving.quantization the engine can apply at start-up, the precision served and planned when "
        "quantization is unset (a quantized checkpoint as stored, else 16 bit), and sizes the timeouts.",
    )
    local_dir: str | None = Field(
        None,
        min_length=1,
        description="A folder on this machine with the model's config.json (the checkpoint itself need not be "
        "there), relative to the team file's folder: optigate reads the weights as stored from its "
        "quantization_config (quant_method) and torch_dtype. Nothing is fetched from a hub.",
    )


# --------------------------------------------------------------------------- serving

ContainerFamily = Literal["lmi", "lmi-trtllm", "lmi-neuronx"]


class Container(Strict):
    family: ContainerFamily = Field(
        "lmi", description="lmi: LMI with the vLLM backend; lmi-trtllm: TensorRT-LLM; lmi-neuronx: Inferentia/Trainium."
    )
    version: str | None = Field(
        None,
        pattern=r"^\d+\.\d+\.\d+$",
        description="DJL/LMI container version as the SageMaker SDK names it (e.g. 0.36.0); "
        "default: the newest in the installed SDK's image tables.",
    )


SPECULATIVE_TOKENS = (
    "Tokens the drafter proposes per step, which the model verifies in one pass "
    "(vLLM's num_speculative_tokens in OPTION_SPECULATIVE_CONFIG)."
)


class NgramSpeculation(Strict):
    method: Literal["ngram", "suffix"] = Field(
        description="Drafts without a draft model: ngram is vLLM's prompt lookup (n-grams of the prompt), suffix "
        "vLLM's suffix decoding (suffix trees of prompts and earlier outputs)."
    )
    num_speculative_tokens: int = Field(
        4,
        ge=1,
        le=16,
        description=SPECULATIVE_TOKENS,
    )
    prompt_lookup_max: int = Field(4, ge=1, le=16, description="ngram only: longest n-gram to match.")
    prompt_lookup_min: int = Field(1, ge=1, le=16, description="ngram only: shortest n-gram to match.")


class DraftModelSpeculation(Strict):
    method: Literal["draft"] = Field(
        description="A smaller draft model proposes the tokens (vLLM's method draft_model)."
    )
    model_s3_uri: S3Uri = Field(
        description="Draft model weights. Must lie under the main model's S3 prefix: CloudFormation's "
        "AWS::SageMaker::Model has no AdditionalModelDataSources, so the draft is shipped with the model."
    )
    num_speculative_tokens: int = Field(
        4,
        ge=1,
        le=16,
        description=SPECULATIVE_TOKENS,
    )


class Eagle3Speculation(Strict):
    method: Literal["eagle3"] = Field(
        description="An EAGLE-3 head trained for the model proposes the tokens (vLLM's method eagle3)."
    )
    model_s3_uri: S3Uri = Field(description="EAGLE-3 head weights, under the main model's S3 prefix.")
    num_speculative_tokens: int = Field(
        3,
        ge=1,
        le=16,
        description=SPECULATIVE_TOKENS,
    )


#: EagleTraining.min_training_records's default: the smallest of the built-in sets SageMaker trains EAGLE heads on
#: (gsm8k_training.jsonl, magicoder.jsonl, opencodeinstruct.jsonl, swebench_oracle_train.jsonl,
#: ultrachat_0_8k_515292.jsonl: https://aws.amazon.com/blogs/machine-learning/amazon-sagemaker-ai-introduces-eagle-based-adaptive-speculative-decoding-to-accelerate-generative-ai-inference,
#: 2025-11-26) is GSM8K's training split, 7,473 records (https://huggingface.co/datasets/openai/gsm8k). AWS, botocore
#: and the SageMaker Python SDK state no minimum.
MIN_TRAINING_RECORDS = 7_473


class EagleTraining(Strict):
    """An EAGLE head the gate's SageMaker optimization job trains (CreateOptimizationJob's
    ModelSpeculativeDecodingConfig, Technique EAGLE): a gate candidate only. Whether the service trains an
    EAGLE-2 or an EAGLE-3 head depends on the model's architecture; the gate reads which from the trained head
    and renders vLLM's `method` from it."""

    method: Literal["eagle"] = Field(
        description="A head the gate's optimization job trains (only under gate.candidate)."
    )
    train_from: Literal["data_capture"] | S3Uri = Field(
        description="data_capture: the environment's own endpoint data capture (which must be readable by the job: "
        "see the environment's data_capture settings); or an S3 prefix (ending in /) or manifest file of ShareGPT, "
        "OpenAI Completions or OpenAI Chat Completions data."
    )
    data_type: Literal["S3Prefix", "ManifestFile"] | None = Field(
        None,
        description="TrainingDataSource.S3DataType; derived when unset: ManifestFile for a key ending in .manifest "
        "or manifest.json, else S3Prefix.",
    )
    num_speculative_tokens: int = Field(
        3,
        ge=1,
        le=16,
        description="Tokens the trained head proposes per step (vLLM's num_speculative_tokens in the candidate's "
        "OPTION_SPECULATIVE_CONFIG).",
    )
    min_training_records: int = Field(
        MIN_TRAINING_RECORDS,
        ge=1,
        description="With train_from: data_capture (an S3 URI's data is not counted): the least number of readable "
        "chat records (OpenAI chat or completions, ShareGPT; JSON-encoded) the capture prefix must hold, checked "
        "before the optimization job is created; fewer fail the gate run as TrainingDataUnavailable. AWS states no "
        "minimum; the default is the smallest set SageMaker itself trains EAGLE heads on: GSM8K's training split, "
        "7,473 records (gsm8k_training.jsonl, the AWS launch blog of 2025-11-26; the openai/gsm8k dataset card).",
    )

    @property
    def s3_data_type(self) -> str:
        if self.data_type is not None:
            return self.data_type
        if self.train_from == "data_capture":
            return "S3Prefix"
        return "ManifestFile" if self.train_from.endswith((".manifest", "manifest.json")) else "S3Prefix"


SpeculativeDecoding = Annotated[
    NgramSpeculation | DraftModelSpeculation | Eagle3Speculation | EagleTraining,
    Field(discriminator="method"),
]


class LoraLimits(Strict):
    max_loras: int = Field(4, ge=1, le=64, description="Adapters resident on the GPU at once (OPTION_MAX_LORAS).")
    max_lora_rank: Literal[8, 16, 32, 64, 128, 256] = Field(16, description="OPTION_MAX_LORA_RANK.")
    max_cpu_loras: int | None = Field(
        None, ge=1, le=256, description="Adapters cached in host memory (OPTION_MAX_CPU_LORAS)."
    )


class Autoscaling(Strict):
    min_capacity: int = Field(
        1, ge=0, le=MAX_CAPACITY, description="Instances (or base-model copies with adapters); 0 needs scale_to_zero."
    )
    max_capacity: int = Field(
        1,
        ge=1,
        le=MAX_CAPACITY,
        description="The scalable target's MaxCapacity: most instances (copies with adapters) scaling may reach; an "
        "environment's autoscaling_max_capacity replaces it.",
    )
    target_invocations_per_instance: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="Target of SageMakerVariantInvocationsPerInstance; with adapters, of concurrent requests per copy "
        "(SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution).",
    )
    scale_to_zero: bool = Field(
        False, description="Inference components only: scale copies to zero when idle and back on demand."
    )
    managed_instance_scaling: bool | None = Field(
        None,
        description="Inference components only: the endpoint adds instances as copies need them and removes idle ones "
        "(ProductionVariant ManagedInstanceScaling); off, copies beyond the instances' accelerators stay pending. "
        "Unset: on with scale_to_zero, else off.",
    )
    scale_in_cooldown_seconds: int = Field(
        300, ge=0, le=86_400, description="Target tracking's ScaleInCooldown: seconds after a scale-in before the next."
    )
    scale_out_cooldown_seconds: int = Field(
        60,
        ge=0,
        le=86_400,
        description="Target tracking's ScaleOutCooldown: seconds after a scale-out before the next (also the "
        "cooldown of the step that scales copies out from zero).",
    )

    @property
    def instances_follow_copies(self) -> bool:
        """Whether the endpoint emits ManagedInstanceScaling: as set, else with scale_to_zero."""
        return self.scale_to_zero if self.managed_instance_scaling is None else self.managed_instance_scaling


#: VariantInstanceProvisionTimeoutInSeconds' range (ProductionVariant in the SageMaker API reference).
PROVISION_TIMEOUT_MIN_SECONDS = 300
PROVISION_TIMEOUT_MAX_SECONDS = 3600
#: A production variant takes at most five instance pools (InstancePoolList in botocore's SageMaker model).
MAX_INSTANCE_POOLS = 5


class InstancePool(Strict):
    """One instance type of a heterogeneous production variant (ProductionVariant.InstancePools):
    SageMaker provisions priority 1 first and falls back in priority order when a type has no capacity.
    https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html"""

    instance_type: str = Field(pattern=INSTANCE_TYPE_PATTERN, description="e.g. ml.g6e.2xlarge")
    priority: int = Field(ge=1, le=MAX_INSTANCE_POOLS, description="1 (tried first) to 5; each priority once.")


Quantization = Literal["fp8", "awq", "gptq", "nvfp4"]
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]


class ServingCore(Strict):
    """The serving fields listed before the vLLM engine switches: `Serving` is this, then the switches
    (optigate.config.lmi_options, one table), then its own fields, in that order."""

    container: Container = Field(
        Container(), description="The LMI container: its family (the engine) and its version (the image)."
    )
    instance_type: str = Field(pattern=INSTANCE_TYPE_PATTERN, description="e.g. ml.g6.2xlarge")
    instance_count: int = Field(
        1,
        ge=1,
        le=100,
        description="ProductionVariant InitialInstanceCount (autoscaling, when set, moves it afterwards); an "
        "environment's overrides.instance_count replaces it.",
    )
    instance_pools: list[InstancePool] | None = Field(
        None,
        max_length=MAX_INSTANCE_POOLS,
        description="Instance types SageMaker falls back to, in priority order, when one has no capacity "
        "(ProductionVariant.InstancePools): serving.instance_type first as priority 1, 2-5 pools in all. Every "
        "pool runs the one container environment, so each must pass every rule; unset lengths and batch are "
        "derived for the smallest pool.",
    )
    instance_provision_timeout_seconds: int | None = Field(
        None,
        ge=PROVISION_TIMEOUT_MIN_SECONDS,
        le=PROVISION_TIMEOUT_MAX_SECONDS,
        description="VariantInstanceProvisionTimeoutInSeconds (300-3600): how long SageMaker tries to find capacity "
        "across the pools; only with instance_pools. SageMaker's default when unset.",
    )
    max_model_len: int | None = Field(
        None, gt=0, le=MAX_TOKENS, description="OPTION_MAX_MODEL_LEN; derived by the planner when unset."
    )
    max_batch_size: int | None = Field(
        None, ge=1, le=1024, description="OPTION_MAX_ROLLING_BATCH_SIZE; derived by the planner when unset."
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0.0,
        le=0.99,
        description="OPTION_GPU_MEMORY_UTILIZATION; 0.9 when unset. Not with lmi-trtllm, whose KV cache takes a "
        "share of the memory left after the weights.",
    )
    tensor_parallel_degree: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Defaults to the largest degree the instance and the model's attention heads allow "
        "(every GPU when the heads divide; the Neuron runtime's degrees on inf2/trn1).",
    )
    kv_cache_dtype: KvCacheDtype = Field(
        "auto", description="OPTION_KV_CACHE_DTYPE; fp8 halves the KV cache. Only with container family lmi."
    )
    quantization: Quantization | None = Field(
        None,
        description="The precision served: 16-bit weights are quantized to it at start-up (OPTION_QUANTIZE); weights "
        "stored in it (model.weights) are served as stored, with no OPTION_QUANTIZE; none serves the checkpoint as "
        "stored.",
    )
    allow_weight_only_fp8: bool = Field(
        False,
        description="Accept FP8 on GPUs without FP8 tensor cores (A10G, A100), where vLLM runs it weight-only "
        "(container family lmi only).",
    )
    speculative_decoding: SpeculativeDecoding | None = Field(
        None,
        description="vLLM speculative decoding by `method`, rendered as OPTION_SPECULATIVE_CONFIG JSON (LMI v15, "
        "0.33.0, or newer; container family lmi only). Method eagle (a head the gate trains) only under "
        "gate.candidate.",
    )
    compile: bool = Field(
        False,
        description="gate.candidate only: the gate's SageMaker optimization job compiles the candidate ahead of time "
        "for its container family (ModelCompilationConfig: TensorRT-LLM engines with lmi-trtllm on NVIDIA, Neuron "
        "artifacts with lmi-neuronx on inf2/trn1) for its instance type, tensor-parallel degree, maximum length and "
        "batch; the candidate serves the compiled artifacts. Not with family lmi (vLLM takes no compiled engine).",
    )


class Serving(VllmEngineSwitches, ServingCore):  # fields: ServingCore's, the switches, these (pydantic: reversed MRO)
    lora: LoraLimits | None = Field(None, description="LoRA limits; defaults derived from `adapters` when omitted.")
    model_data_download_timeout_seconds: int | None = Field(
        None,
        description="Sized to the model when unset (a 70B needs far more than 600 s); "
        "a value below the model's minimum is refused.",
    )
    container_startup_health_check_timeout_seconds: int | None = Field(
        None, description="Sized to the model when unset; a value below the model's minimum is refused."
    )
    volume_size_gb: int | None = Field(
        None, ge=1, le=512, description="EBS volume; only for instances without NVMe instance storage."
    )
    routing_strategy: Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM"] = Field(
        "LEAST_OUTSTANDING_REQUESTS",
        description="ProductionVariant RoutingConfig.RoutingStrategy: LEAST_OUTSTANDING_REQUESTS sends each request to "
        "the instance with the fewest in flight (suits long, uneven LLM requests); RANDOM picks one at random.",
    )
    detailed_metrics: bool = Field(
        True,
        description="EndpointConfig MetricsConfig.EnableDetailedObservability: SageMaker publishes per-GPU (DCGM) and "
        "node metrics to CloudWatch, and the container's own Prometheus series where it exports them (vLLM's DLC does; "
        "no LMI container does: docs/container-surfaces.md). The gate's temporary endpoints publish them only where "
        "the candidate's container exports series the verdict reads; false turns them off for this team's endpoints.",
    )
    autoscaling: Autoscaling | None = Field(
        None,
        description="Application Auto Scaling target tracking of the variant's instances (with adapters, of the base "
        "inference component's copies). Unset: the instance count stays fixed.",
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="Extra container environment (OPTION_*), applied last."
    )


# --------------------------------------------------------------------------- adapters, rollout, gate


class AdapterEvaluation(Strict):
    dataset_s3_uri: S3Uri = Field(
        description="S3 prefix holding this adapter's evaluation dataset (one .jsonl file, the records of "
        "gate.evaluation.dataset_s3_uri): the gate evaluates the adapter's component on the baseline twin and the "
        "candidate with it. `{region}` becomes the environment's region."
    )


class Adapter(Strict):
    """One LoRA adapter. Its archives' KMS key is set per adapter (`kms_key_arn`), not once for the team: adapters may
    sit in different buckets under different keys, and each role is granted only the keys of what it reads. A new
    version in `gate.candidate.adapters` is named by its adapter and read with that adapter's key, so keep an
    adapter's versions under one key."""

    name: ResourceName
    s3_uri: S3Uri = Field(description="The adapter as a .tar.gz (adapter_config.json + weights).")
    kms_key_arn: KmsKeyArn | None = Field(
        None,
        description="The customer-managed KMS key that encrypts this adapter's archives (SSE-KMS): s3_uri and any "
        "new version of it in gate.candidate.adapters. optigate grants kms:Decrypt of it, through S3 only, to the "
        "model's execution role (SageMaker reads each inference component's ArtifactUrl as that role) and, when "
        "the gate checks a new version, to the gate's staging function's role. The key's own policy must allow "
        "those roles too. Unset: the archives are not encrypted with a customer-managed key.",
    )
    evaluation: AdapterEvaluation | None = Field(
        None,
        description="The adapter's own evaluation dataset for the gate; without it the adapter is judged on "
        "gate.evaluation.dataset_s3_uri.",
    )


#: Where the inference-component settings below come from (botocore 1.44 InferenceComponentSpecification; the
#: SageMaker SDK's sagemaker-core shapes name them data_cache_config and scheduling_config).
COMPONENT_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSpecification.html"


class DataCacheConfig(Strict):
    """InferenceComponentSpecification.DataCacheConfig of the base component."""

    enable_caching: bool = Field(
        description="EnableCaching: each instance provisioned for the base component keeps its model artifacts and "
        "container image, so copies added by scale-out (and from zero) deploy without downloading them again."
    )


class AvailabilityZoneBalance(Strict):
    """InferenceComponentSchedulingConfig.AvailabilityZoneBalance."""

    enforcement_mode: Literal["PERMISSIVE"] = Field(
        description="PERMISSIVE (the only value the API has): balance copies across Availability Zones, but place "
        "them anyway when capacity does not allow it."
    )
    max_imbalance: int | None = Field(
        None, ge=0, le=100, description="Largest difference of copies between two zones; SageMaker's default is 0."
    )


class SchedulingConfig(Strict):
    """InferenceComponentSpecification.SchedulingConfig of the base component."""

    placement_strategy: Literal["SPREAD", "BINPACK"] = Field(
        description="SPREAD: copies spread over the instances (resilience); BINPACK: packed onto fewer instances "
        "(utilization). Within each zone when availability_zone_balance is set."
    )
    availability_zone_balance: AvailabilityZoneBalance | None = Field(
        None,
        description="Required by CloudFormation's AWS::SageMaker::InferenceComponent schema beside placement_strategy "
        "(the API alone takes placement_strategy without it).",
    )


class InferenceComponents(Strict):
    """How the base inference component is cached and placed (teams with `adapters` only). Adapter components
    reserve no compute and run in their base's copies, so the settings are the base's."""

    data_cache_config: DataCacheConfig | None = Field(
        None,
        description="Unset: caching is enabled when the base component autoscales (serving.autoscaling with "
        "max_capacity above min_capacity, or scale_to_zero), and left to SageMaker otherwise (which caches on "
        "instances with more than 232 GiB of NVMe storage by itself, per the CloudFormation schema).",
    )
    scheduling_config: SchedulingConfig | None = Field(
        None, description="Copy placement; unset: SageMaker's default placement."
    )


class ShadowRollout(Strict):
    sampling_percentage: int = Field(
        ge=1, le=100, description="Share of live requests mirrored to the shadow variant (1-100)."
    )
    window_minutes: int = Field(60, ge=5, le=1440, description="How long the gate mirrors traffic.")
    candidate: dict[str, object] = Field(
        default_factory=dict,
        description="Overrides of `serving` that the shadow variant runs (e.g. quantization: fp8).",
    )


class CanaryRollout(Strict):
    traffic_percentage: int = Field(10, ge=1, le=50, description="Share of capacity shifted first (1-50).")
    wait_minutes: int = Field(10, ge=1, le=60, description="Bake time before shifting the rest.")


class Rollout(Strict):
    strategy: Literal["none", "canary", "shadow"] = Field(
        "canary",
        description="How a new model reaches the live endpoint (CloudFormation's blue/green update). canary: "
        "canary.traffic_percentage of the instances first, the rest after canary.wait_minutes; shadow: the same, "
        "plus a shadow variant running shadow.candidate on mirrored live requests, and the gate mirrors live traffic "
        "to its own candidate too; none: no small canary (half the instances first, a single one at once), the same "
        "bake time. With adapters, an update of the base inference component rolls (RollingUpdatePolicy): canary "
        "replaces canary.traffic_percentage of its copies per batch (5-50), each batch baking canary.wait_minutes; "
        "none, half the copies per batch; shadow is refused. An adapter component has no copies of its own (it uses "
        "the base's), so its archive changes in place, without a rolling policy.",
    )
    canary: CanaryRollout = Field(
        CanaryRollout(),
        description="The blue/green update's canary size (strategies canary and shadow) and bake time (every "
        "strategy).",
    )
    shadow: ShadowRollout | None = Field(
        None, description="With strategy shadow only, and required then: what the shadow variant runs and receives."
    )
    auto_rollback: bool = Field(
        True, description="Roll back on 5XX / model-latency alarms during a blue/green or rolling update."
    )


class CrossCheckTolerance(Strict):
    """How far SageMaker's managed benchmark (NVIDIA AIPerf) may read from optigate's own before the report
    flags a disagreement. A latency differs beyond tolerance when |AIPerf − optigate| exceeds the larger of
    its absolute and its relative allowance (relative to optigate's figure); throughput by percent only.

    Why these defaults: AIPerf's client adds its own time to every TTFT (it starts the clock before it
    builds the request and stamps chunks when a coroutine resumes); beside a server that records its own
    send times optigate's client read p99 TTFT within +18 ms at concurrency 256 where AIPerf read +450 to
    +2,200 ms (issue 16). That overhead is additive queueing, hundreds of ms at high concurrency, so TTFT
    gets 500 ms or 50 %. AIPerf's `inter_token_latency` is a per-request mean, (latency − TTFT) / (output
    tokens − 1) (AIPerf docs/metrics_reference.md), i.e. optigate's TPOT, compared at p99: 5 ms or 25 %.
    AIPerf's `output_token_throughput` divides all output tokens by the whole benchmark's duration,
    ramp-up and drain included, while optigate counts tokens in its steady window: 20 %."""

    ttft_p99_ms: float = Field(500.0, gt=0, le=MAX_BUDGET_MS, description="Absolute allowance on p99 TTFT (ms).")
    ttft_p99_pct: float = Field(50.0, gt=0, le=MAX_GAIN_PCT, description="Relative allowance on p99 TTFT (%).")
    itl_p99_ms: float = Field(
        5.0,
        gt=0,
        le=MAX_BUDGET_MS,
        description="Absolute allowance on p99 TPOT (AIPerf's per-request inter-token latency), ms.",
    )
    itl_p99_pct: float = Field(25.0, gt=0, le=MAX_GAIN_PCT, description="Relative allowance on p99 ITL (%).")
    throughput_pct: float = Field(20.0, gt=0, le=MAX_GAIN_PCT, description="Allowance on output tokens/s (%).")


#: Keys of `gate.benchmark` that configure the managed cross-check, not optigate's benchmark or decision: they
#: stay out of the gate's thresholds and fingerprint (a cross-check never decides, so it proves nothing).
CROSS_CHECK_KEYS = frozenset({"cross_check", "cross_check_tolerance", "cross_check_tokenizer"})
#: Keys of `gate.benchmark` that size the benchmark's rounds, not what the decision judges (a look's confidence
#: follows from them: optigate.gate.decision.looks).
ROUNDS_KEYS = frozenset({"requests_per_stream", "max_rounds", "min_rounds", "max_minutes"})


class LengthPercentiles(Strict):
    """A length distribution given by two percentiles: lengths are drawn from the log-normal distribution with
    this median and 90th percentile (request lengths are right-skewed; a log-normal is the simplest such shape)."""

    p50: int = Field(ge=1, le=MAX_TOKENS, description="Median length (tokens).")
    p90: int = Field(ge=1, le=MAX_TOKENS, description="90th percentile (tokens), at least p50.")

    @model_validator(mode="after")
    def _ordered(self) -> LengthPercentiles:
        raise_first(percentiles_in_order(self))
        return self


PERCENTILES_ORDERED = "p90 must be at least p50"


@rule_check(
    "OG461", "a length distribution's p90 is at least its p50 (model validator)", model_message=PERCENTILES_ORDERED
)
def percentiles_in_order(percentiles: LengthPercentiles) -> Iterator[Found]:
    """A synthetic length distribution given as percentiles (`{p50: .., p90: ..}` under gate.benchmark.synthetic)
    has a p90 at least its p50.

    Why: lengths are drawn from the log-normal with that median and 90th percentile, whose spread is
    ln(p90 / p50) / z(0.9); a p90 below the median has no such distribution (the spread would be negative), and is
    most often the two values swapped. Checked by LengthPercentiles' model validator while the file is read, so it
    is reported at the distribution's path like a schema error.
    """
    if percentiles.p90 < percentiles.p50:
        yield (), PERCENTILES_ORDERED


def _length_form(value: object) -> str:
    """Which form a length distribution takes, so that a wrong one is reported once, in its own terms."""
    if isinstance(value, list):
        return "list"
    return "percentiles" if isinstance(value, dict | LengthPercentiles) else "one"


LengthDistribution = Annotated[
    Annotated[int, Field(ge=1, le=MAX_TOKENS), Tag("one")]
    | Annotated[list[Annotated[int, Field(ge=1, le=MAX_TOKENS)]], Field(min_length=1, max_length=1000), Tag("list")]
    | Annotated[LengthPercentiles, Tag("percentiles")],
    Discriminator(_length_form),
    Field(
        description="One length (every request), a list of lengths (each request draws one, uniformly), or "
        "{p50, p90} (log-normal with that median and 90th percentile)."
    ),
]


class SyntheticWorkload(Strict):
    """The synthetic benchmark with lengths that vary from request to request, and a share of requests that start
    with one common prefix, so that vLLM's prefix caching is measured rather than assumed away."""

    prompt_tokens: LengthDistribution | None = Field(
        None, description="Prompt lengths of the benchmark requests; unset: gate.benchmark.prompt_tokens."
    )
    max_new_tokens: LengthDistribution | None = Field(
        None, description="Requested output lengths; unset: gate.benchmark.max_new_tokens."
    )
    shared_prefix_pct: float = Field(
        0.0, ge=0, le=100, description="Share of requests (%) that begin with the same prefix of prefix_tokens."
    )
    prefix_tokens: int = Field(
        0, ge=0, le=MAX_TOKENS, description="Length of the shared prefix; required (> 0) with shared_prefix_pct."
    )


CaptureKind = Literal["replay", "sessions", "distribution"]


class CaptureWorkload(Strict):
    """The team's own captured traffic as the gate's benchmark workload (optigate.bench.core.capture reads SageMaker's
    data-capture records: LMI {inputs, parameters} and OpenAI chat/completions bodies, JSON or base64). The
    benchmark workers read it inside the account, with read access to that prefix only; reports show its shape
    (counts, lengths, rate), never text."""

    model_config = ConfigDict(populate_by_name=True)

    source: Literal["data_capture"] | S3Uri = Field(
        alias="from",
        description="data_capture: the environment's own endpoint data capture (captured by the endpoint in that "
        "environment: see its data_capture settings); or an S3 URI of a .jsonl file or a prefix (ending in /) of "
        "capture files in SageMaker's layout.",
    )
    kind: CaptureKind = Field(
        "replay",
        description="replay: the recorded arrival times, an open loop (sped up by `speedup`); sessions: whole "
        "sessions sampled, sent by the gate's closed loop at each level; distribution: synthetic prompts with the "
        "captured prompt and output length distributions.",
    )
    window_days: float = Field(
        7.0, gt=0, le=90, description="Records of the last this many days (the capture bucket keeps 90)."
    )
    max_requests: int = Field(2000, ge=1, le=100_000, description="At most this many captured requests are used.")
    speedup: float = Field(1.0, gt=0, le=1000, description="replay: the recorded schedule runs this many times faster.")


class BenchmarkGate(Strict):
    concurrency: list[Annotated[int, Field(le=4096)]] = Field(
        default_factory=lambda: [1, 16, 64],
        min_length=1,
        max_length=64,
        description="Concurrent streams (distinct, increasing) at which the gate benchmarks the baseline twin and the "
        "candidate, one level after the other; every check is judged at each level, and a level not measured fails. "
        "Above 64 streams every level is split over several benchmark workers, rounded up to a multiple of them.",
    )
    prompt_tokens: int = Field(
        1024,
        ge=1,
        le=MAX_TOKENS,
        description="Prompt tokens of every benchmark request; with max_new_tokens, the typical request the planner "
        "sizes an unset max_model_len and max_batch_size for.",
    )
    max_new_tokens: int = Field(
        256,
        ge=1,
        le=MAX_TOKENS,
        description="Output tokens of every benchmark request; with both latency budgets it also sizes the rollback "
        "alarm (see p99_ttft_ms_budget).",
    )
    p99_ttft_ms_budget: float | None = Field(
        None,
        gt=0,
        le=MAX_BUDGET_MS,
        description="p99 TTFT (ms; request sent to first token) the candidate must keep at every level: passes when "
        "the 95 % interval lies within it, fails when beyond, inconclusive in between; a level without a successful "
        "request fails. Unset: no TTFT check. With p99_itl_ms_budget it also sets the rollback alarm on p99 "
        "ModelLatency: 2 x (this + p99_itl_ms_budget x max_new_tokens); without both, 60 s.",
    )
    p99_itl_ms_budget: float | None = Field(
        None,
        gt=0,
        le=MAX_BUDGET_MS,
        description="p99 ITL (ms; inter-token latency, per token) the candidate must keep at every level, judged like "
        "p99_ttft_ms_budget (whole requests resampled). Unset: no ITL check.",
    )
    min_throughput_gain_pct: float = Field(
        10.0,
        ge=-MAX_NON_INFERIORITY_PCT,
        le=MAX_GAIN_PCT,
        description="Gain (%) of the candidate's output tokens/s over the baseline twin's required at every level: "
        "passes when the 95 % interval's lower end reaches it, fails when its upper end is below, else inconclusive; "
        "too few one-second buckets, or no successful request, fail. Negative: a non-inferiority margin (the "
        "candidate may be that much slower); a candidate that only brings new adapter versions is held to "
        f"{ADAPTER_VERSION_MARGIN_PCT:g} unless this is set.",
    )
    max_error_rate: float = Field(
        0.01,
        ge=0,
        le=1,
        description="Largest share of the candidate's benchmark requests that may fail, at every level; with a shadow "
        "rollout also the largest 5XX share of the requests mirrored to the shadow.",
    )
    blocks: int = Field(
        3,
        ge=1,
        le=10,
        description="Interleaved blocks per level: the baseline twin then the candidate, this many times "
        "(A B A B ...); the intervals resample blocks, so drift between runs widens them instead of deciding. "
        "Without max_rounds the benchmark is this many rounds and the gate judges once, after the last.",
    )
    requests_per_stream: int = Field(
        4,
        ge=1,
        le=64,
        description="Requests each stream sends in one block (one round) at each level; a level's block sends at "
        "least 32, or 8 times this many when that is fewer. Smaller rounds let the gate stop sooner once the "
        "evidence is clear.",
    )
    max_rounds: int | None = Field(
        None,
        ge=2,
        le=50,
        description="Benchmark in rounds (at every level a block of the twin, then one of the candidate) and judge "
        "after each from min_rounds on, stopping when every benchmark check is decided or one fails; at most this "
        "many rounds, then INCONCLUSIVE with the interval reached and what more would decide. Each look's intervals "
        "spend an equal share of the 5 % (optigate.gate.decision.looks). Unset: `blocks` rounds, judged once.",
    )
    min_rounds: int = Field(
        4,
        ge=2,
        le=50,
        description="With max_rounds: the rounds before the first look (fewer blocks cannot show their drift).",
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=24 * 60,
        description="With max_rounds: also stop before a round that would end past this many minutes of benchmark "
        "(each round taken to last as long as the mean round so far).",
    )
    min_tokens_per_chunk_gain_pct: float = Field(
        20.0, ge=0, le=MAX_GAIN_PCT, description="With speculative decoding: minimum gain in tokens per streamed chunk."
    )
    min_shadow_requests: int = Field(
        100,
        ge=1,
        le=10**9,
        description="With a shadow rollout: live requests the shadow must receive in the window to be judged.",
    )
    equivalence_margin_pct: float = Field(
        3.0,
        gt=0,
        le=50,
        description=(
            "Practical margin (percent of the baseline): a change whose estimate lies inside it is never "
            "better or worse."
        ),
    )
    metric_margins_pct: dict[
        Literal["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s"], Annotated[float, Field(gt=0, le=50)]
    ] = Field(
        default_factory=dict, description="A metric's own margin, overriding equivalence_margin_pct (e.g. itl_ms: 5)."
    )
    cross_check: Literal["none", "sagemaker"] = Field(
        "none",
        description="sagemaker: after optigate's own benchmark of each level, SageMaker's managed benchmark "
        "(CreateAIBenchmarkJob, NVIDIA AIPerf) loads the same two endpoints with the same workload; the report "
        "shows both side by side. optigate's numbers decide; the cross-check never passes or fails the gate.",
    )
    cross_check_tolerance: CrossCheckTolerance = Field(
        default_factory=CrossCheckTolerance, description="When the two benchmarks disagree (see CrossCheckTolerance)."
    )
    adapter_mix: dict[str, float] | None = Field(
        None,
        description="Teams with adapters: the share of benchmark requests each inference component gets, by adapter "
        "name (`base`: the base model itself), e.g. {base: 1, reply: 3}; weights are relative. Default: the shares "
        "CloudWatch recorded per component of the live endpoint over the last 7 days (the gate refuses to run "
        "without either).",
    )
    cross_check_tokenizer: str | None = Field(
        None,
        pattern=r"^[\w.\-]+/[\w.\-]+$",
        description="Hugging Face id of the tokenizer AIPerf downloads to size prompts and count tokens; defaults "
        "to model.source.hugging_face.model_id. It must be downloadable without a token (an ungated repository).",
    )
    workload: CaptureWorkload | None = Field(
        None,
        description="Benchmark with the team's own captured traffic instead of synthetic requests, e.g. {from: "
        "data_capture, kind: replay, window_days: 7, max_requests: 2000}. Both sides of a block and every worker "
        "send the same requests; a missing or empty capture fails the run before anything is paid for.",
    )
    synthetic: SyntheticWorkload | None = Field(
        None,
        description="The synthetic workload's length distributions and shared-prefix share (without `workload`); "
        "unset: every request has prompt_tokens and max_new_tokens.",
    )

    # Goodput and capacity at the SLO (the latency budgets above): kept as one block at the end of the class.
    max_goodput_loss_pct: float = Field(
        2.0,
        ge=0,
        le=100,
        description="With a latency budget set: how many percentage points the candidate's goodput (its share of "
        "requests within the budgets: TTFT within p99_ttft_ms_budget, time per output token within "
        "p99_itl_ms_budget, failed requests never) may fall below the baseline twin's at every level: passes when "
        "the 95 % interval's lower end of candidate minus baseline stays above minus this, fails when its upper "
        "end is below, else inconclusive; runs without per-request outcomes fail.",
    )


class EvaluationGate(Strict):
    dataset_s3_uri: S3Uri | None = Field(
        None,
        description="S3 prefix holding the evaluation dataset, one .jsonl file of records (model_input, target_output, "
        "optional category and prompt_tokens) the baseline twin and the candidate both answer; required with "
        "gate.candidate. `{region}` becomes the environment's region.",
    )
    max_metric_drop_abs: float = Field(0.01, ge=0, le=1, description="Every task metric within this absolute drop.")
    max_refusal_rate_increase: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Largest rise of the refusal rate (a fraction, candidate over baseline) in the whole dataset and "
        "every slice; 0: it may not rise. A pass needs the pessimistic end of the interval within it.",
    )
    long_context_prompt_tokens: int = Field(
        4096,
        ge=1,
        le=MAX_TOKENS,
        description="Records whose prompts are longer than this form the long-context slice, judged on its own like "
        "each category.",
    )


class Gate(Strict):
    candidate: dict[str, object] = Field(
        default_factory=dict,
        description="The change the gate proves: overrides of `serving` (e.g. quantization: fp8, or a "
        "speculative_decoding block), and for a team with adapters new adapter versions, `adapters: {<adapter name>: "
        "s3://.../<name>.tar.gz}` (checked before any endpoint exists; promoted through the lock). Empty: no gate "
        "for this team.",
    )
    benchmark: BenchmarkGate = Field(
        BenchmarkGate(),
        description="How the gate benchmarks the baseline twin and the candidate, and the thresholds its checks apply.",
    )
    evaluation: EvaluationGate = Field(
        EvaluationGate(),
        description="The quality evaluation (fmeval) of the twin and the candidate on the same records, and its "
        "tolerances.",
    )


class Calibration(Strict):
    """A bandwidth efficiency measured by a team's own gate run (`optigate plan --calibrate <gate-report.json>`):
    the planner's expected batch-1 decode time for this accelerator, weight precision and engine is then the
    bound at this efficiency instead of the literature estimate (optigate.plan.expected)."""

    instance_type: str = Field(description="The instance the gate measured on.")
    accelerator: str = Field(description="Its accelerator (the catalog's name, e.g. L4); the efficiency applies to it.")
    weight_precision: str = Field(description="The planner's weight precision (bf16, fp8, awq, ...).")
    engine: Literal["vllm", "trtllm", "neuron"] = Field(
        description="The engine it was measured with: vllm (container family lmi), trtllm (lmi-trtllm), neuron "
        "(lmi-neuronx)."
    )
    bandwidth_efficiency: float = Field(gt=0, le=1, description="Fraction of the datasheet bandwidth reached.")
    measured_tpot_ms: float = Field(gt=0, description="The candidate's p50 TPOT at concurrency 1.")
    bound_tpot_ms: float = Field(gt=0, description="The roofline bound of that plan at batch 1.")
    source: str = Field(min_length=1, description="The gate report it came from (path or S3 URI) and its run.")


#: The layout of config/calibration.yaml this optigate writes and reads. A file without `format_version` was written
#: before versioning, in the same layout, and is read; a file of another version is refused, naming both.
CALIBRATION_FORMAT_VERSION = 1


class CalibrationFile(Strict):
    """`config/calibration.yaml`: what the team's own gate runs measured, newest last."""

    format_version: int = Field(
        CALIBRATION_FORMAT_VERSION,
        description=f"The file's layout, written by `optigate plan --calibrate` ({CALIBRATION_FORMAT_VERSION}). A "
        "file without it was written before versioning, in the same layout, and is read; another version is "
        "refused, naming both.",
    )
    calibrations: list[Calibration] = Field(
        default_factory=list,
        description="Written by `optigate plan --calibrate`, newest last: the planner uses the newest for an "
        "accelerator, weight format and engine.",
    )

    @field_validator("format_version", mode="before")
    @classmethod
    def _a_version_this_optigate_reads(cls, version: Any) -> Any:
        if type(version) is int and version != CALIBRATION_FORMAT_VERSION:  # true is no version (though true == 1)
            newer = "by a newer optigate: upgrade optigate, or " if version > CALIBRATION_FORMAT_VERSION else ""
            raise ValueError(
                f"this file is format version {version} and this optigate reads version {CALIBRATION_FORMAT_VERSION}"
                f" (written {newer or 'by another optigate: '}recalibrate with `optigate plan --calibrate`)"
            )
        if type(version) is not int:
            raise ValueError(
                f"expected format version {CALIBRATION_FORMAT_VERSION} (a whole number), got {version!r:.40}; "
                "`optigate plan --calibrate` writes it"
            )
        return version


# --------------------------------------------------------------------------- files


class Acknowledgement(Strict):
    """A note the team has read and accepts, as cdk-nag's suppressions: `optigate validate` no longer prints it.
    Only a note can be acknowledged, never a refusal (docs/rules.md lists which rule is which)."""

    id: str = Field(description="The note's rule ID as `optigate validate` prints it, e.g. OG424.")
    reason: str = Field(
        description="Why the team accepts the note, for the next reader: at least 40 characters, e.g. what was "
        "tested and where."
    )


class TeamConfig(Strict):
    """One team's endpoint: `config/teams/<team>.yaml`."""

    team: ResourceName = Field(description="Used in stack and resource names: optigate-<env>-<team>.")
    description: str = Field("", description="Free text for readers of the file; optigate does not use it.")
    model: ModelSpec = Field(description="The model served: where its weights are and its architecture.")
    serving: Serving = Field(
        description="The live endpoint's instances, LMI container and engine options: the baseline that a gate or "
        "shadow candidate overrides."
    )
    adapters: list[Adapter] = Field(
        default_factory=list,
        description="LoRA adapters on the one base model: the endpoint then serves through inference components (a "
        "base component and one per adapter) and serving.lora is derived from them; container family lmi only, one "
        "instance type, no shadow rollout. A gate candidate is staged on inference components too.",
    )
    inference_components: InferenceComponents | None = Field(
        None,
        description=f"Caching and placement of the base inference component (only with adapters); see {COMPONENT_API}.",
    )
    rollout: Rollout = Field(Rollout(), description="How CloudFormation rolls a new model out to the live endpoint.")
    gate: Gate = Field(Gate(), description="The change the gate proves and the thresholds it judges it by.")
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Tags on every resource of the team's stacks, beside optigate:team and optigate:environment.",
    )
    acknowledge: list[Acknowledgement] = Field(
        default_factory=list,
        description="Notes of `optigate validate` the team accepts, each by rule ID with a reason; an acknowledged "
        "note is not printed (validate says how many were).",
    )
    # config/calibration.yaml beside the team's file, set by the loader: the planner's expected figures use it.
    _calibrations: tuple[Calibration, ...] = PrivateAttr(default=())

    # The folder of the team's file, set by the loader: model.local_dir is relative to it.
    _folder: str | None = PrivateAttr(default=None)

    @property
    def calibrations(self) -> tuple[Calibration, ...]:
        return self._calibrations

    @property
    def folder(self) -> str | None:
        return self._folder

    def located_in(self, folder: str) -> TeamConfig:
        """This team as read from a file in `folder` (the loader sets it once per file)."""
        self._folder = folder
        return self

    def with_calibrations(self, calibrations: tuple[Calibration, ...]) -> TeamConfig:
        """This team with the project's calibrations (the loader reads them once per config folder)."""
        self._calibrations = tuple(calibrations)
        return self

    def shadow_serving(self) -> Serving | None:
        """What the shadow variant runs: `serving` with the shadow candidate's overrides, when shadowing."""
        if self.rollout.strategy != "shadow" or self.rollout.shadow is None:
            return None
        return serving_with(self.serving, self.rollout.shadow.candidate)

    def gate_serving(self) -> Serving | None:
        """What the gate proves: `serving` with `gate.candidate`'s overrides; None without a gate."""
        return serving_with(self.serving, self.gate.candidate) if self.gate.candidate else None


#: The key of a candidate that is not a serving override: new adapter versions by adapter name (gate.candidate only;
#: config/rules/adapter_candidate_rules.py).
CANDIDATE_ADAPTERS = "adapters"


def serving_with(serving: Serving, overrides: Mapping[str, object]) -> Serving:
    """`serving` with a candidate's overrides: the one place a candidate is merged (raises ValidationError). A
    candidate's `adapters` (new adapter versions) is no serving key and is taken out first."""
    merged = serving.model_dump(exclude_unset=True)
    merged.update({key: value for key, value in overrides.items() if key != CANDIDATE_ADAPTERS})
    return Serving.model_validate(merged)


CaptureEncryption = Literal["kms", "s3_managed"]
RequestFormat = Literal["openai_chat", "openai_completions", "sharegpt", "lmi"]


class DataCapture(Strict):
    """The endpoint's data capture in one environment (EndpointConfig DataCaptureConfig), for model-backed and
    adapter teams alike. On an endpoint serving adapters every component's traffic is captured under the one
    variant, and the documented capture record names no inference component: a record does not say which adapter
    (or the base) answered (docs/inference-components.md)."""

    percentage: int = Field(ge=0, le=100, description="InitialSamplingPercentage; 0 disables data capture.")
    encryption: CaptureEncryption = Field(
        "kms",
        description="kms: an SSL-only bucket encrypted with the endpoint's KMS key, and DataCaptureConfig.KmsKeyId. "
        "s3_managed: a separate SSL-only bucket with SSE-S3 and no KMS key, the 'unencrypted captured data' a "
        "SageMaker optimization job can train an EAGLE head from.",
    )
    json_content_types: list[Annotated[str, StringConstraints(pattern=r"^[a-zA-Z0-9*.+/-]{1,256}$")]] = Field(
        default_factory=list,
        max_length=10,
        description="CaptureContentTypeHeader.JsonContentTypes: requests of these content types are captured as "
        "JSON text; anything else is base64-encoded.",
    )
    request_format: RequestFormat | None = Field(
        None,
        description="What the endpoint's clients send: openai_chat (messages), openai_completions (prompt), "
        "sharegpt, or lmi ({inputs, parameters}). optigate cannot see the clients; training an EAGLE head from "
        "the capture needs this stated.",
    )


class EnvironmentOverrides(Strict):
    instance_count: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Replaces serving.instance_count here; at most the autoscaling maximum of an autoscaled endpoint.",
    )
    autoscaling_max_capacity: int | None = Field(
        None,
        ge=1,
        le=MAX_CAPACITY,
        description="Replaces serving.autoscaling.max_capacity here; only for a team with serving.autoscaling, and at "
        "least its min_capacity.",
    )
    suspend_autoscaling: bool | None = Field(
        None,
        description="Deploy once with this to change serving.instance_type of an autoscaled endpoint, then again "
        "without: SageMaker refuses an instance-type change of a variant registered with Application Auto Scaling. "
        "The instance count stays where autoscaling left it.",
    )
    data_capture_percentage: int | None = Field(
        None, ge=0, le=100, description="0 disables data capture; KMS-encrypted. Same as data_capture: {percentage}."
    )
    data_capture: DataCapture | None = Field(
        None, description="The endpoint's data capture in full (instead of data_capture_percentage)."
    )

    @property
    def capture(self) -> DataCapture | None:
        """The data capture this environment configures: `data_capture`, else `data_capture_percentage` (KMS,
        no content-type header); None when neither is set or the percentage is 0."""
        capture = self.data_capture
        if capture is None and self.data_capture_percentage is not None:
            capture = DataCapture(percentage=self.data_capture_percentage)
        return capture if capture is not None and capture.percentage > 0 else None


class Environment(Strict):
    name: ResourceName
    account: str = Field(
        pattern=r"^\d{12}$",
        description="The AWS account the environment lives in; stacks get an explicit env, so synth makes no lookups.",
    )
    region: str = Field(
        pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$",
        description="The region the environment lives in (one botocore lists SageMaker in); `{region}` in a team's S3 "
        "URIs becomes it.",
    )
    requires_approval: bool = Field(False, description="A manual approval precedes promotion into this environment.")
    overrides: EnvironmentOverrides = Field(
        EnvironmentOverrides(), description="Overrides for every team in this environment (`teams` for one team)."
    )
    teams: dict[str, EnvironmentOverrides] = Field(
        default_factory=dict, description="Per-team overrides in this environment, by team name."
    )


PIPELINE_NEEDS_REPOSITORY = "source.repository is required"
PIPELINE_NEEDS_ONE_SOURCE = "set either connection_arn (a CodeStar connection) or codecommit: true"


class PipelineSource(Strict):
    """Where the pipeline takes the repository from: a CodeStar (CodeConnections) connection to
    GitHub/GitLab/Bitbucket, or a CodeCommit repository."""

    connection_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:connection/[\w-]+$",
        description="A CodeStar (CodeConnections) connection to GitHub, GitLab or Bitbucket, authorised in the "
        "console once; give it or codecommit: true.",
    )
    repository: str | None = Field(
        None, description="owner/name with a connection; the repository name with CodeCommit."
    )
    codecommit: bool = Field(
        False, description="true: `repository` is a CodeCommit repository in the pipeline account."
    )
    branch: str = Field("main", description="The branch the pipeline builds and deploys.")

    @model_validator(mode="after")
    def _one_kind(self) -> PipelineSource:
        raise_first(pipeline_names_repository(self))
        raise_first(pipeline_one_source(self))
        return self


@rule_check("OG611", "pipeline.source names a repository (model validator)", model_message=PIPELINE_NEEDS_REPOSITORY)
def pipeline_names_repository(source: PipelineSource) -> Iterator[Found]:
    """pipeline.source in environments.yaml gives `repository`: `owner/name` with a connection, the repository's
    name with CodeCommit.

    Why: the pipeline stack's source action needs it: CDK Pipelines' `CodePipelineSource.connection(repo_string,
    branch, connection_arn=...)` takes `owner/name` and `CodePipelineSource.code_commit(repository, branch)` a
    repository (optigate.stacks.pipeline_stack). Checked by PipelineSource's model validator while the file is read.
    """
    if not source.repository:
        yield (), PIPELINE_NEEDS_REPOSITORY


@rule_check(
    "OG612", "pipeline.source is a connection or CodeCommit (model validator)", model_message=PIPELINE_NEEDS_ONE_SOURCE
)
def pipeline_one_source(source: PipelineSource) -> Iterator[Found]:
    """pipeline.source gives exactly one kind of source: `connection_arn` (a CodeStar/CodeConnections connection to
    GitHub, GitLab or Bitbucket) or `codecommit: true`, not both and not neither.

    Why: a CodePipeline source action reads one repository from one provider; with both the pipeline's source would
    be a guess, with neither there is nothing to read. Checked by PipelineSource's model validator while the file is
    read, after OG611.
    """
    if source.codecommit == (source.connection_arn is not None):
        yield (), PIPELINE_NEEDS_ONE_SOURCE


#: The rules pydantic's model validators check while a file is read (each also called by its validator).
RULES = (percentiles_in_order, pipeline_names_repository, pipeline_one_source)


class Pipeline(Strict):
    """The CDK Pipelines stack that promotes through the environments in order."""

    account: str = Field(pattern=r"^\d{12}$", description="The tools account that runs the pipeline.")
    region: str = Field(
        pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$", description="The region of the tools account the pipeline runs in."
    )
    source: PipelineSource = Field(description="The repository the pipeline takes the config and code from.")


class EnvironmentsFile(Strict):
    """`config/environments.yaml`: the environments in promotion order."""

    environments: list[Environment] = Field(
        min_length=1,
        description="In promotion order: the pipeline deploys and gates them one after the other, as its stages.",
    )
    pipeline: Pipeline | None = Field(
        None,
        description="Optional: the promotion pipelines (optigate-pipeline-<team> per team, and optigate-platform).",
    )
