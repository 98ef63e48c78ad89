"""Each invalid team file is refused with one precise message naming file, YAML path and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_team

BASE = textwrap.dedent(
    """\
    team: demo
    model:
      source:
        s3_uri: s3://acme-models/llama-3.1-8b/
      architecture: llama-3.1-8b
    serving:
      instance_type: ml.g6.2xlarge
      max_model_len: 8192
      quantization: fp8
      kv_cache_dtype: fp8
    rollout:
      strategy: canary
    gate:
      benchmark:
        concurrency: [1, 8, 32]
    """
)

# (id, text to replace in BASE, replacement, expected YAML path, fragments the message must contain)
CASES = [
    (
        "unknown-key-with-hint",
        "  max_model_len: 8192",
        "  max_model_length: 8192",
        "serving.max_model_length",
        ["unknown key 'max_model_length'", "did you mean 'max_model_len'?"],
    ),
    (
        "unknown-top-level-key",
        "rollout:",
        "rolout:\n  strategy: canary\nrollout:",
        "rolout",
        ["unknown key 'rolout'", "did you mean 'rollout'?"],
    ),
    (
        "wrong-type",
        "  max_model_len: 8192",
        "  max_model_len: eight-k",
        "serving.max_model_len",
        ["expected a whole number", "'eight-k'"],
    ),
    (
        "fp8-on-a10g",
        "  instance_type: ml.g6.2xlarge",
        "  instance_type: ml.g5.2xlarge",
        "serving.quantization",
        ["FP8 W8A8 needs compute capability >= 8.9", "A10G", "8.6", "weight-only", "allow_weight_only_fp8: true"],
    ),
    (
        "fp8-on-a100",
        "  instance_type: ml.g6.2xlarge",
        "  instance_type: ml.p4d.24xlarge",
        "serving.quantization",
        ["compute capability >= 8.9", "A100", "8.0"],
    ),
    (
        "tp-3-on-8-gpus",
        "  instance_type: ml.g6.2xlarge",
        "  instance_type: ml.p5.48xlarge\n  tensor_parallel_degree: 3",
        "serving.tensor_parallel_degree",
        ["3 does not divide the 8 GPUs of ml.p5.48xlarge", "use one of [1, 2, 4, 8]"],
    ),
    (
        "tp-5-on-24-neuron-cores",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8\n  kv_cache_dtype: fp8",
        "  container:\n    family: lmi-neuronx\n  instance_type: ml.inf2.48xlarge\n  tensor_parallel_degree: 5",
        "serving.tensor_parallel_degree",
        ["5 is not a degree the Neuron runtime runs within the 24 NeuronCores of ml.inf2.48xlarge", "[1, 2, 4, 8, 24]"],
    ),
    (
        "adapter-not-tar-gz",
        "rollout:",
        "adapters:\n  - name: sql\n    s3_uri: s3://acme-adapters/sql/adapter_model.safetensors\nrollout:",
        "adapters[0].s3_uri",
        [".tar.gz archive", "adapter_model.safetensors"],
    ),
    (
        "negative-timeout",
        "  max_model_len: 8192",
        "  max_model_len: 8192\n  model_data_download_timeout_seconds: -5",
        "serving.model_data_download_timeout_seconds",
        ["-5 s is outside SageMaker's range 60-3600 s"],
    ),
    (
        "timeout-over-an-hour",
        "  max_model_len: 8192",
        "  max_model_len: 8192\n  container_startup_health_check_timeout_seconds: 7200",
        "serving.container_startup_health_check_timeout_seconds",
        ["7200 s is outside SageMaker's range 60-3600 s"],
    ),
    (
        "neuron-container-on-gpu",
        "  instance_type: ml.g6.2xlarge",
        "  container:\n    family: lmi-neuronx\n  instance_type: ml.g6.2xlarge",
        "serving.container.family",
        ["lmi-neuronx runs only on Inferentia/Trainium", "ml.g6.2xlarge"],
    ),
    (
        "gpu-container-on-inferentia",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8\n  kv_cache_dtype: fp8",
        "  instance_type: ml.inf2.24xlarge",
        "serving.container.family",
        ["only the lmi-neuronx container can use", "Inferentia2"],
    ),
    (
        "nvfp4-on-hopper",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8",
        "  instance_type: ml.p5.48xlarge\n  max_model_len: 8192\n  quantization: nvfp4",
        "serving.quantization",
        ["NVFP4 needs Blackwell", "H100", "9.0", "ml.p6-b200.48xlarge"],
    ),
    (
        "unknown-instance-type",
        "  instance_type: ml.g6.2xlarge",
        "  instance_type: ml.g6.2xlarg",
        "serving.instance_type",
        ["unknown or unsupported instance type 'ml.g6.2xlarg'", "did you mean 'ml.g6.2xlarge'?"],
    ),
    (
        "unknown-architecture",
        "  architecture: llama-3.1-8b",
        "  architecture: llama-3.1-8",
        "model.architecture",
        ["unknown architecture 'llama-3.1-8'", "did you mean 'llama-3.1-8b'?"],
    ),
    (
        "max-model-len-over-position-embeddings",
        "  max_model_len: 8192",
        "  max_model_len: 200000",
        "serving.max_model_len",
        ["200000 exceeds the model's max_position_embeddings (131072)"],
    ),
    (
        "two-model-sources",
        "    s3_uri: s3://acme-models/llama-3.1-8b/",
        "    s3_uri: s3://acme-models/llama-3.1-8b/\n    hugging_face:\n"
        "      model_id: meta-llama/Llama-3.1-8B\n      s3_uri: s3://acme-models/copy/",
        "model.source",
        ["exactly one of s3_uri, jumpstart, hugging_face", "s3_uri and hugging_face"],
    ),
    (
        "not-an-s3-uri",
        "    s3_uri: s3://acme-models/llama-3.1-8b/",
        "    s3_uri: acme-models/llama-3.1-8b/",
        "model.source.s3_uri",
        ["not an S3 URI", "'acme-models/llama-3.1-8b/'"],
    ),
    (
        "model-kms-key-alias",
        "    s3_uri: s3://acme-models/llama-3.1-8b/",
        "    s3_uri: s3://acme-models/llama-3.1-8b/\n    kms_key_arn: arn:aws:kms:us-east-1:111122223333:alias/models",
        "model.source.kms_key_arn",
        ["'arn:aws:kms:us-east-1:111122223333:alias/models' is not a KMS key ARN", "not an alias"],
    ),
    (
        "model-kms-key-region-placeholder-on-a-single-region-key",
        "    s3_uri: s3://acme-models/llama-3.1-8b/",
        "    s3_uri: s3://acme-models/llama-3.1-8b/\n"
        "    kms_key_arn: arn:aws:kms:{region}:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "model.source.kms_key_arn",
        ["is not a KMS key ARN", "`{region}` as the region only for a multi-Region key"],
    ),
    (
        "adapter-kms-key-id-not-arn",
        "rollout:",
        "adapters:\n  - name: sql\n    s3_uri: s3://acme-adapters/sql.tar.gz\n"
        "    kms_key_arn: 1234abcd-12ab-34cd-56ef-1234567890ab\nrollout:",
        "adapters[0].kms_key_arn",
        ["'1234abcd-12ab-34cd-56ef-1234567890ab' is not a KMS key ARN"],
    ),
    (
        "unknown-speculation-method",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  speculative_decoding:\n    method: medusa",
        "serving.speculative_decoding",
        ["'medusa' is not a known method", "ngram, suffix, draft, eagle3, eagle"],
    ),
    (
        "draft-outside-model-prefix",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  speculative_decoding:\n    method: draft\n    model_s3_uri: s3://other-bucket/llama-3.2-1b/",
        "serving.speculative_decoding.model_s3_uri",
        ["must lie under the model's prefix s3://acme-models/llama-3.1-8b/", "s3://acme-models/llama-3.1-8b/draft/"],
    ),
    (
        "raw-option-for-typed-field",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  environment:\n    OPTION_MAX_MODEL_LEN: '4096'",
        "serving.environment.OPTION_MAX_MODEL_LEN",
        ["rendered from serving.max_model_len; set that field instead"],
    ),
    (
        "volume-size-on-nvme-instance",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  volume_size_gb: 200",
        "serving.volume_size_gb",
        ["NVMe instance storage", "refuses VolumeSizeInGB"],
    ),
    (
        "scale-to-zero-without-components",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  autoscaling:\n    min_capacity: 0\n    max_capacity: 2\n    scale_to_zero: true",
        "serving.autoscaling.scale_to_zero",
        ["scale to zero works only for inference components"],
    ),
    (
        "kv-cache-dtype-not-allowed",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: int4",
        "serving.kv_cache_dtype",
        ["'int4' is not a known value", "expected one of auto, fp8, fp8_e4m3, fp8_e5m2"],
    ),
    (
        "unknown-container-version",
        "  instance_type: ml.g6.2xlarge",
        "  container:\n    version: 0.20.0\n  instance_type: ml.g6.2xlarge",
        "serving.container.version",
        ["lmi has no version 0.20.0", "0.36.0"],
    ),
    (
        "speculation-on-old-lmi",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8\n  kv_cache_dtype: fp8",
        "  container:\n    version: 0.31.0\n  instance_type: ml.g6.2xlarge\n  speculative_decoding:\n    method: ngram",
        "serving.container.version",
        ["needs LMI v15 (container version 0.33.0) or newer, got 0.31.0"],
    ),
    (
        "speculation-on-trtllm",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8\n  kv_cache_dtype: fp8",
        "  container:\n    family: lmi-trtllm\n  instance_type: ml.g6.2xlarge\n"
        "  speculative_decoding:\n    method: ngram",
        "serving.speculative_decoding",
        ["only container family lmi reads (not lmi-trtllm)"],
    ),
    (
        "cpu-loras-below-gpu-loras",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  lora:\n    max_loras: 8\n    max_cpu_loras: 2",
        "serving.lora.max_cpu_loras",
        ["2 is below max_loras (8)"],
    ),
    (
        "lora-rank-not-allowed",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  lora:\n    max_lora_rank: 12",
        "serving.lora.max_lora_rank",
        ["12 is not a known value; expected one of 8, 16, 32, 64, 128, 256"],
    ),
    (
        "duplicate-adapter-names",
        "rollout:",
        "adapters:\n  - name: sql\n    s3_uri: s3://acme-adapters/sql.tar.gz\n  - name: sql\n    s3_uri: s3://acme-adapters/sql2.tar.gz\nrollout:",
        "adapters[1].name",
        ["adapter name 'sql' is used twice"],
    ),
    (
        "shadow-with-adapters",
        "rollout:\n  strategy: canary",
        "adapters:\n  - name: sql\n    s3_uri: s3://acme-adapters/sql.tar.gz\n"
        "rollout:\n  strategy: shadow\n  shadow:\n    sampling_percentage: 10",
        "rollout.strategy",
        ["cannot be shadowed, use canary"],
    ),
    (
        "shadow-without-block",
        "  strategy: canary",
        "  strategy: shadow",
        "rollout.shadow",
        ["strategy shadow needs a shadow block with sampling_percentage"],
    ),
    (
        "shadow-sampling-over-100",
        "  strategy: canary",
        "  strategy: shadow\n  shadow:\n    sampling_percentage: 150",
        "rollout.shadow.sampling_percentage",
        ["must be at most 100 (got 150)"],
    ),
    (
        "shadow-candidate-fp8-on-a10g",
        "  instance_type: ml.g6.2xlarge\n  max_model_len: 8192\n  quantization: fp8",
        # The baseline serves chat's bf16 checkpoint as it is (AWQ would need an AWQ checkpoint: OG112).
        "  instance_type: ml.g5.2xlarge\n  max_model_len: 8192",
        "rollout.shadow.candidate.quantization",
        ["FP8 W8A8 needs compute capability >= 8.9"],
    ),
    (
        "shadow-candidate-unknown-key",
        "  strategy: canary",
        "  strategy: shadow\n  shadow:\n    sampling_percentage: 10\n    candidate:\n      quantisation: fp8",
        "rollout.shadow.candidate.quantisation",
        ["unknown key 'quantisation'", "did you mean 'quantization'?"],
    ),
    (
        "concurrency-not-increasing",
        "    concurrency: [1, 8, 32]",
        "    concurrency: [32, 8]",
        "gate.benchmark.concurrency",
        ["distinct positive levels in increasing order", "[32, 8]"],
    ),
    (
        "gate-candidate-without-evaluation-data",
        "gate:\n  benchmark:",
        "gate:\n  candidate:\n    kv_cache_dtype: auto\n  benchmark:",
        "gate.evaluation.dataset_s3_uri",
        ["needs an evaluation dataset", "nothing is promoted without quality numbers"],
    ),
    (
        "gate-candidate-unknown-key",
        "gate:\n  benchmark:",
        "gate:\n  candidate:\n    quantisation: fp8\n"
        "  evaluation:\n    dataset_s3_uri: s3://acme-eval/demo/\n  benchmark:",
        "gate.candidate.quantisation",
        ["unknown key 'quantisation'", "did you mean 'quantization'?"],
    ),
    (
        "duplicate-yaml-key",
        "  kv_cache_dtype: fp8",
        "  kv_cache_dtype: fp8\n  max_model_len: 4096",
        "serving.max_model_len",
        ["duplicate key"],
    ),
]


def _write_case(tmp_path: Path, case_id: str, old: str, new: str) -> tuple[Path, int]:
    assert old in BASE, f"{case_id}: the text to replace is not in BASE"
    if case_id == "shadow-candidate-fp8-on-a10g":
        text = BASE.replace(old, new).replace(
            "  strategy: canary",
            "  strategy: shadow\n  shadow:\n    sampling_percentage: 10\n    candidate:\n      quantization: fp8",
        )
    else:
        text = BASE.replace(old, new, 1)
    path = tmp_path / f"{case_id}.yaml"
    path.write_text(text)
    return path, text


def _expected_line(text: str, yaml_path: str, case_id: str) -> int:
    """The line the issue should name: where the last key of the path is written (or its parent)."""
    lines = text.splitlines()
    if case_id == "duplicate-yaml-key":
        return max(i for i, line in enumerate(lines, 1) if line.strip().startswith("max_model_len:"))
    parts = yaml_path.replace("[", ".[").split(".")
    # Walk the path's keys in order through the text, each found after the previous one.
    line_index = 0
    found = 1
    for part in parts:
        if part.startswith("["):
            index = int(part.strip("[]"))
            dashes = [i for i in range(line_index, len(lines)) if lines[i].lstrip().startswith("- ")]
            line_index = dashes[index]
            found = line_index + 1
            continue
        for i in range(line_index, len(lines)):
            stripped = lines[i].lstrip("- ").lstrip()
            if stripped.startswith(f"{part}:"):
                line_index, found = i, i + 1
                break
    return found


@pytest.mark.parametrize("case_id, old, new, yaml_path, fragments", CASES, ids=[case[0] for case in CASES])
def test_invalid_team_is_refused_with_file_path_and_line(tmp_path, case_id, old, new, yaml_path, fragments):
    path, text = _write_case(tmp_path, case_id, old, new)
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    issues = caught.value.issues
    assert len(issues) == 1, f"expected one precise message, got:\n{caught.value}"
    issue = issues[0]
    assert issue.path == yaml_path
    assert issue.file.endswith(f"{case_id}.yaml")
    assert issue.line == _expected_line(text, yaml_path, case_id), str(issue)
    rendered = str(issue)
    assert rendered.startswith(f"{issue.file}:{issue.line} {yaml_path}: ")
    for fragment in fragments:
        assert fragment in rendered, f"{fragment!r} missing from: {rendered}"


def test_the_cases_are_at_least_twenty_distinct_refusals():
    assert len({case[0] for case in CASES}) >= 20
    assert len({case[3] for case in CASES}) >= 15  # they hit different places of the schema


def test_base_team_file_is_valid(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text(BASE)
    team = load_resolved_team(path).team
    assert team.serving.quantization == "fp8" and team.serving.instance_type == "ml.g6.2xlarge"


def test_all_problems_of_a_file_are_reported_at_once(tmp_path):
    text = BASE.replace("  max_model_len: 8192", "  max_model_len: -1\n  max_batch: 4").replace(
        "  strategy: canary", "  strategy: blue"
    )
    path = tmp_path / "many.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    paths = sorted(issue.path for issue in caught.value.issues)
    assert paths == ["rollout.strategy", "serving.max_batch", "serving.max_model_len"]


def test_weight_only_fp8_on_a10g_is_accepted_when_asked_for(tmp_path):
    text = BASE.replace(
        "  instance_type: ml.g6.2xlarge", "  instance_type: ml.g5.2xlarge\n  allow_weight_only_fp8: true"
    )
    path = tmp_path / "a10g.yaml"
    path.write_text(text)
    assert load_resolved_team(path).team.serving.allow_weight_only_fp8 is True


def test_not_yaml_is_reported_with_its_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("team: demo\nserving: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    assert "not valid YAML" in str(caught.value)
    assert caught.value.issues[0].line is not None
