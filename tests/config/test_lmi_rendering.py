"""From config to the LMI container environment and image, without synth."""

from __future__ import annotations

import json
import textwrap

import pytest

from optigate.config.loader import load_team
from optigate.deployment.serving import resolve_serving, sized_timeouts
from optigate.plan.catalog import get_instance
from optigate.serving import images
from optigate.serving.lmi import render_environment

BASE = textwrap.dedent(
    """\
    team: demo
    model:
      source:
        s3_uri: s3://acme-models/llama-3.1-8b/
      architecture: llama-3.1-8b
    serving:
      instance_type: ml.g6.2xlarge
    """
)


def _team(tmp_path, serving_extra: str = "", tail: str = ""):
    path = tmp_path / "demo.yaml"
    path.write_text(BASE + textwrap.indent(textwrap.dedent(serving_extra), "  ") + textwrap.dedent(tail))
    return load_team(path)


def _env(team):
    resolved = resolve_serving(team, team.serving, instance=get_instance(team.serving.instance_type))
    return render_environment(resolved, team.model.source.artifact_uri)


def test_fp8_weights_and_kv_cache_render_as_lmi_options(tmp_path):
    env = _env(
        _team(
            tmp_path,
            "max_model_len: 8192\nmax_batch_size: 32\ngpu_memory_utilization: 0.92\n"
            "quantization: fp8\nkv_cache_dtype: fp8\n",
        )
    )
    assert env == {
        # LMI's async mode, the default of the newest LMI (optigate.serving.engine_mode)
        "OPTION_ASYNC_MODE": "true",
        "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.92",
        "OPTION_KV_CACHE_DTYPE": "fp8",
        "OPTION_MAX_MODEL_LEN": "8192",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
        "OPTION_QUANTIZE": "fp8",
        "OPTION_ROLLING_BATCH": "disable",
        "OPTION_TENSOR_PARALLEL_DEGREE": "1",
    }


def test_eagle3_head_under_the_model_prefix_becomes_a_container_path(tmp_path):
    env = _env(
        _team(
            tmp_path,
            "speculative_decoding:\n  method: eagle3\n"
            "  model_s3_uri: s3://acme-models/llama-3.1-8b/heads/eagle3/\n  num_speculative_tokens: 5\n",
        )
    )
    assert json.loads(env["OPTION_SPECULATIVE_CONFIG"]) == {
        "method": "eagle3",
        "model": "/opt/ml/model/heads/eagle3",
        "num_speculative_tokens": 5,
    }
    assert "OPTION_SPECULATIVE_DRAFT_MODEL" not in env  # lmi-dist's option, gone since LMI v15


def test_draft_model_and_ngram_speculation_render_vllm_methods(tmp_path):
    draft = _env(
        _team(tmp_path, "speculative_decoding:\n  method: draft\n  model_s3_uri: s3://acme-models/llama-3.1-8b/draft\n")
    )
    assert json.loads(draft["OPTION_SPECULATIVE_CONFIG"]) == {
        "method": "draft_model",
        "model": "/opt/ml/model/draft",
        "num_speculative_tokens": 4,
    }
    ngram = _env(_team(tmp_path, "speculative_decoding:\n  method: ngram\n  prompt_lookup_max: 5\n"))
    assert json.loads(ngram["OPTION_SPECULATIVE_CONFIG"]) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 5,
        "prompt_lookup_min": 1,
    }


def test_adapters_enable_lora_with_limits_derived_from_their_number(tmp_path):
    tail = "adapters:\n" + "".join(f"  - name: a{i}\n    s3_uri: s3://acme-adapters/a{i}.tar.gz\n" for i in range(3))
    env = _env(_team(tmp_path, tail=tail))
    assert (
        env["OPTION_ENABLE_LORA"],
        env["OPTION_MAX_LORAS"],
        env["OPTION_MAX_CPU_LORAS"],
        env["OPTION_MAX_LORA_RANK"],
    ) == ("true", "3", "3", "16")


def test_explicit_lora_limits_win(tmp_path):
    env = _env(_team(tmp_path, "lora:\n  max_loras: 2\n  max_lora_rank: 64\n  max_cpu_loras: 10\n"))
    assert (env["OPTION_MAX_LORAS"], env["OPTION_MAX_LORA_RANK"], env["OPTION_MAX_CPU_LORAS"]) == ("2", "64", "10")


def test_unset_values_are_filled_and_explained(tmp_path):
    team = _team(tmp_path)
    resolved = resolve_serving(team, team.serving, instance=get_instance(team.serving.instance_type))
    assert resolved.tensor_parallel_degree == 1
    # The gate's default request is 1,024 + 256 tokens; twice that, to a power of two: 4,096,
    # far below the model's 131,072, which a 24 GB L4 could not batch.
    assert resolved.max_model_len == 4096
    assert any(
        note.startswith("max_model_len=4,096: room for 2x the typical 1,280-token request") for note in resolved.notes
    )
    assert any(note.startswith("max_batch_size=") for note in resolved.notes)
    assert any("model_data_download_timeout" in note for note in resolved.notes)


def test_timeouts_grow_with_the_weights_and_stay_in_the_api_range():
    small, large, huge = sized_timeouts(16), sized_timeouts(141), sized_timeouts(810)
    assert small[0] < large[0] and small[1] < large[1]
    assert large[0] > 600 and large[1] > 600  # the API defaults kill 70B start-ups
    assert huge == (3600, 3600)


def test_70b_on_p5_gets_every_gpu_and_long_timeouts(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(BASE.replace("llama-3.1-8b", "llama-3.3-70b").replace("ml.g6.2xlarge", "ml.p5.48xlarge"))
    team = load_team(path)
    resolved = resolve_serving(team, team.serving, instance=get_instance(team.serving.instance_type))
    assert resolved.tensor_parallel_degree == 8
    assert resolved.weights_gb == pytest.approx(141, rel=0.02)  # 70.6e9 parameters in bf16
    assert resolved.model_data_download_timeout_seconds >= 2000
    assert resolved.container_startup_health_check_timeout_seconds >= 2700


def test_neuron_and_trtllm_families_render_their_own_options(tmp_path):
    neuron = _env(
        _team(tmp_path)
        .model_copy(update={})
        .__class__.model_validate(
            {
                **_team(tmp_path).model_dump(exclude_unset=True),
                "serving": {"instance_type": "ml.inf2.24xlarge", "container": {"family": "lmi-neuronx"}},
            }
        )
    )
    assert neuron["OPTION_ROLLING_BATCH"] == "auto" and neuron["OPTION_N_POSITIONS"] == "8192"
    # 12 NeuronCores, but the Neuron runtime runs Inferentia2 at TP 1, 2, 4, 8 or 24: 8 is the largest.
    assert neuron["OPTION_TENSOR_PARALLEL_DEGREE"] == "8"
    trt = _env(_team(tmp_path, "container:\n  family: lmi-trtllm\n"))
    assert trt["OPTION_ROLLING_BATCH"] == "trtllm" and "OPTION_GPU_MEMORY_UTILIZATION" not in trt
    assert "OPTION_KV_CACHE_DTYPE" not in trt


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-southeast-2"])
def test_lmi_image_is_resolved_offline_for_the_region(region):
    uri = images.image_uri("lmi", "0.36.0", region)
    assert uri == f"763104351884.dkr.ecr.{region}.amazonaws.com/djl-inference:{images.image_tag('lmi', '0.36.0')}"
    assert images.image_repository_arn(uri) == f"arn:aws:ecr:{region}:763104351884:repository/djl-inference"


def test_an_unpinned_team_runs_the_newest_version_of_the_sdk_tables_and_says_so(tmp_path):
    """The default is the SDK's `latest` (no hand-written constant); a pinned team is told of a newer one."""
    for family in images.SDK_FRAMEWORK:
        assert images.default_version(family) == images.newest_version(family)
        assert images.image_tag(family, images.default_version(family)) == images.image_tag(family, "latest")
    team = _team(tmp_path, "")
    newest = images.newest_version("lmi")
    resolved = resolve_serving(team, team.serving, instance=get_instance(team.serving.instance_type))
    assert resolved.image_version == newest
    assert f"container: lmi {newest}, the newest in the installed SageMaker SDK's image tables" in resolved.notes
    oldest = images.known_versions("lmi")[-1]
    pinned = _team(tmp_path, f"container:\n  family: lmi\n  version: {oldest}\n")
    assert f"container: lmi {oldest} as pinned; {newest} is the newest" in " ".join(
        resolve_serving(pinned, pinned.serving, instance=get_instance(pinned.serving.instance_type)).notes
    )
