"""vLLM engine switches as typed serving settings (issue 17 part 2): rendering, refusals, the planner's account of
them, and a gate candidate that changes one."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import get_args

import pytest

from optigate.config.lmi_options import LMI_OPTIONS, NOT_READ_BY, reference_rows, version_text
from optigate.config.loader import ConfigError, load_team
from optigate.config.models import ContainerFamily, Serving, serving_with
from optigate.config.rules import RENDERED_OPTIONS
from optigate.deployment import load_resolved_team
from optigate.deployment.serving import resolve_serving
from optigate.plan import plan
from optigate.plan.architecture import ModelArchitecture, load_architecture
from optigate.plan.catalog import get_instance
from optigate.plan.expected import eager_overhead
from optigate.plan.memory import GIB, weight_footprint
from optigate.serving import images

DENSE = textwrap.dedent(
    """\
    team: demo
    model:
      source:
        s3_uri: s3://acme-models/llama-3.1-8b/
      architecture: llama-3.1-8b
    serving:
      instance_type: ml.g6.2xlarge
      max_model_len: 8192
    """
)
MOE = textwrap.dedent(
    """\
    team: demo
    model:
      source:
        s3_uri: s3://acme-models/mixtral/
      architecture: mixtral-8x7b
    serving:
      instance_type: ml.g6e.12xlarge
      max_model_len: 8192
    """
)
GATE = textwrap.dedent(
    """\
    gate:
      candidate:
        enforce_eager: true
      evaluation:
        dataset_s3_uri: s3://acme-eval/chat.jsonl
    """
)


def _file(tmp_path, base: str, serving_extra: str = "", tail: str = ""):
    path = tmp_path / "demo.yaml"
    path.write_text(base + textwrap.indent(textwrap.dedent(serving_extra), "  ") + tail)
    return path


def _env(tmp_path, base: str, serving_extra: str) -> dict[str, str]:
    return load_resolved_team(_file(tmp_path, base, serving_extra)).baseline.environment


def _refusal(tmp_path, base: str, serving_extra: str, tail: str = "") -> str:
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(_file(tmp_path, base, serving_extra, tail))
    return str(caught.value)


# --------------------------------------------------------------------------- the option table, one row per option


@dataclass(frozen=True)
class Row:
    """What a team writes under `serving` for one option, what the newest LMI renders for it, and the first LMI
    version that reads it as LMI or vLLM documents it (optigate.config.lmi_options cites where)."""

    setting: str
    rendered: dict[str, str]
    since: str
    base: str = DENSE


#: One row per option of optigate.config.lmi_options (a new option fails test_every_option_has_a_row until added).
ROWS = {
    "enforce_eager": Row("enforce_eager: true", {"OPTION_ENFORCE_EAGER": "true"}, "0.27.0"),
    "attention_backend": Row("attention_backend: FLASHINFER", {"OPTION_ATTENTION_BACKEND": "FLASHINFER"}, "0.34.0"),
    "enable_expert_parallel": Row(
        "enable_expert_parallel: true",
        {"OPTION_ENABLE_EXPERT_PARALLEL": "true", "OPTION_TENSOR_PARALLEL_DEGREE": "4"},
        "0.33.0",
        MOE,
    ),
    "max_num_batched_tokens": Row(
        "max_num_batched_tokens: 4096", {"OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS": "4096"}, "0.24.0"
    ),
    "enable_prefix_caching": Row("enable_prefix_caching: false", {"OPTION_ENABLE_PREFIX_CACHING": "false"}, "0.29.0"),
}


def test_every_option_has_a_row():
    assert list(ROWS) == list(LMI_OPTIONS)


@pytest.mark.parametrize("name", list(ROWS))
def test_an_option_renders_under_the_name_lmi_reads(tmp_path, name):
    row = ROWS[name]
    env = _env(tmp_path, row.base, row.setting + "\n")
    assert {key: env.get(key) for key in row.rendered} == row.rendered
    others = set(LMI_OPTIONS[name].environment_names) - set(row.rendered)
    assert not others & set(env)  # one variable per option: never two names LMI reads for one setting


@pytest.mark.parametrize("name", list(ROWS))
def test_an_option_is_read_from_its_documented_lmi_version(tmp_path, name):
    row = ROWS[name]
    assert version_text(LMI_OPTIONS[name].since) == row.since
    older = [v for v in images.known_versions("lmi") if images.version_tuple(v) < LMI_OPTIONS[name].since]
    if not older:  # every LMI image in the SDK's tables reads it
        return
    message = _refusal(tmp_path, row.base, f"container: {{version: {older[0]}}}\n{row.setting}\n")
    assert (
        f"serving.{name}: the vLLM of LMI {older[0]} does not read {name}; pin container.version {row.since} or "
        "newer, or remove it" in message
    )


def test_enforce_eager_false_is_vllms_default_and_renders_nothing(tmp_path):
    assert "OPTION_ENFORCE_EAGER" not in _env(tmp_path, DENSE, "enforce_eager: false\n")


def test_attention_backend_is_the_engine_argument_on_lmi_036_and_the_variable_before(tmp_path):
    new = _env(tmp_path, DENSE, "container: {version: 0.36.0}\nattention_backend: FLASHINFER\n")
    old = _env(tmp_path, DENSE, "container: {version: 0.35.0}\nattention_backend: FLASHINFER\n")
    assert new["OPTION_ATTENTION_BACKEND"] == "FLASHINFER" and "VLLM_ATTENTION_BACKEND" not in new
    assert old["VLLM_ATTENTION_BACKEND"] == "FLASHINFER" and "OPTION_ATTENTION_BACKEND" not in old


def test_max_num_batched_tokens_renders_under_lmis_own_name(tmp_path):
    env = _env(tmp_path, DENSE, "max_num_batched_tokens: 4096\n")
    assert "OPTION_MAX_NUM_BATCHED_TOKENS" not in env  # vLLM's name, which LMI also reads


def test_unset_switches_render_nothing(tmp_path):
    env = _env(tmp_path, DENSE, "")
    switches = {
        "OPTION_ENFORCE_EAGER",
        "OPTION_ATTENTION_BACKEND",
        "VLLM_ATTENTION_BACKEND",
        "OPTION_ENABLE_EXPERT_PARALLEL",
        "OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS",
    }
    every_name = {name for option in LMI_OPTIONS.values() for name in option.environment_names}
    assert switches <= every_name
    assert not every_name & set(env)


def test_the_table_names_only_known_families_and_says_why_the_others_read_nothing():
    families = set(get_args(ContainerFamily))
    for option in LMI_OPTIONS.values():
        assert option.families and set(option.families) <= families
        assert families - set(option.families) <= set(NOT_READ_BY)


def test_the_reference_rows_come_from_the_table():
    rows = reference_rows()
    assert len(rows) == len(LMI_OPTIONS)
    backend = next(row for row in rows if row.startswith("| `serving.attention_backend` |"))
    assert "`VLLM_ATTENTION_BACKEND` (LMI 0.34.0 to before 0.36.0), `OPTION_ATTENTION_BACKEND` (LMI 0.36.0+)" in backend
    assert "| lmi | vLLM's attention kernels" in backend
    for name, row in zip(LMI_OPTIONS, rows, strict=True):
        assert Serving.model_fields[name].description in row


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("family", "instance", "reason"),
    [
        ("lmi-trtllm", "ml.g6.2xlarge", "TensorRT-LLM builds its engine"),
        ("lmi-neuronx", "ml.inf2.24xlarge", "Neuron compiler"),
    ],
)
@pytest.mark.parametrize("name", list(ROWS))
def test_switches_are_refused_on_containers_that_do_not_run_vllm(tmp_path, family, instance, reason, name):
    base = DENSE.replace("ml.g6.2xlarge", instance)
    message = _refusal(tmp_path, base, f"container: {{family: {family}}}\n{ROWS[name].setting}\n")
    assert f"serving.{name}: {name} is vLLM's" in message
    assert f"container family {family} does not read" in message and reason in message
    assert "use container family lmi" in message


def test_expert_parallel_is_refused_on_a_dense_model(tmp_path):
    message = _refusal(tmp_path, DENSE.replace("ml.g6.2xlarge", "ml.g6.12xlarge"), "enable_expert_parallel: true\n")
    assert "serving.enable_expert_parallel: llama-3.1-8b is a dense model (no experts)" in message
    assert "remove it" in message


def test_expert_parallel_is_refused_on_one_gpu(tmp_path):
    base = MOE.replace("ml.g6e.12xlarge", "ml.p4de.24xlarge")
    message = _refusal(tmp_path, base, "tensor_parallel_degree: 1\nenable_expert_parallel: true\n")
    assert "serving.enable_expert_parallel: with tensor_parallel_degree 1" in message
    assert "places nothing" in message


def test_expert_parallel_on_a_dense_model_is_refused_in_a_gate_candidate_too(tmp_path):
    tail = GATE.replace("enforce_eager: true", "enable_expert_parallel: true")
    message = _refusal(tmp_path, DENSE.replace("ml.g6.2xlarge", "ml.g6.12xlarge"), "", tail)
    assert "gate.candidate.enable_expert_parallel: llama-3.1-8b is a dense model" in message


def test_attention_backend_is_refused_where_the_lmi_vllm_does_not_take_it(tmp_path):
    message = _refusal(tmp_path, DENSE, "container: {version: 0.33.0}\nattention_backend: FLASHINFER\n")
    assert "serving.attention_backend: the vLLM of LMI 0.33.0 does not read attention_backend" in message
    assert "pin container.version 0.34.0 or newer" in message
    triton = _refusal(tmp_path, DENSE, "container: {version: 0.34.0}\nattention_backend: TRITON_ATTN\n")
    assert "TRITON_ATTN_VLLM_V1" in triton and "0.35.0 or newer" in triton


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("OPTION_ENFORCE_EAGER", "enforce_eager"),
        ("OPTION_ATTENTION_BACKEND", "attention_backend"),
        ("VLLM_ATTENTION_BACKEND", "attention_backend"),
        ("OPTION_ENABLE_EXPERT_PARALLEL", "enable_expert_parallel"),
        ("OPTION_MAX_NUM_BATCHED_TOKENS", "max_num_batched_tokens"),
        ("OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS", "max_num_batched_tokens"),
    ],
)
def test_a_switch_set_raw_in_the_environment_is_refused_for_its_typed_field(tmp_path, raw, field):
    message = _refusal(tmp_path, DENSE, f"environment:\n  {raw}: 'true'\n")
    assert f"serving.environment.{raw}: {raw} is rendered from serving.{field}; set that field instead" in message


@pytest.mark.parametrize("name", list(ROWS))
def test_every_name_lmi_reads_for_an_option_is_refused_raw(name):
    for raw in LMI_OPTIONS[name].environment_names:
        assert RENDERED_OPTIONS[raw] == f"serving.{name}"


def test_fewer_batched_tokens_than_sequences_is_refused(tmp_path):
    message = _refusal(tmp_path, DENSE, "max_batch_size: 64\nmax_num_batched_tokens: 32\n")
    assert "serving.max_num_batched_tokens: 32 is below max_batch_size (64)" in message
    assert "use at least 64" in message


# --------------------------------------------------------------------------- the planner


def test_eager_mode_frees_the_cuda_graph_reserve_for_the_kv_cache():
    graphs = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192)
    eager = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192, enforce_eager=True)
    assert graphs.cuda_graph_reserve_gib > 0 and eager.cuda_graph_reserve_gib == 0
    per_token = graphs.kv_bytes_per_token
    freed = (eager.kv_capacity_tokens - graphs.kv_capacity_tokens) * per_token / GIB
    assert freed == pytest.approx(graphs.cuda_graph_reserve_gib, abs=16 * per_token / GIB)


def test_eager_mode_costs_its_launch_overhead_at_batch_1():
    graphs = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192)
    eager = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192, enforce_eager=True)
    layers = load_architecture("llama-3.1-8b").num_hidden_layers
    extra = eager.expected_tpot_ms_batch1 - graphs.expected_tpot_ms_batch1
    assert extra == pytest.approx(layers * eager_overhead().us_per_layer / 1000)
    assert eager.decode_tpot_ms_batch1 == graphs.decode_tpot_ms_batch1  # the roofline bound stays the bound
    assert "enforce_eager: no CUDA graphs" in eager.setting_notes[0]
    assert (
        f"{eager.expected_tpot_ms_batch1:.1f} ms instead of {graphs.expected_tpot_ms_batch1:.1f}"
        in (eager.setting_notes[0])
    )


def test_the_eager_cost_reproduces_the_published_enforce_eager_measurements():
    """The two Qwen2.5 rows measured with enforce_eager (benchmarks/data/published_decode_latency.csv)."""
    for model, tp, tokens_per_s in (("qwen2.5-32b", 1, 22.13), ("qwen2.5-72b", 2, 18.19)):
        result = plan(
            model,
            "ml.p4de.24xlarge",
            tensor_parallel=tp,
            max_model_len=4096,
            prompt_tokens=1,
            output_tokens=2048,
            max_batch_size=1,
            suggest_fixes=False,
            enforce_eager=True,
        )
        assert result.expected_tpot_ms_batch1 == pytest.approx(1000 / tokens_per_s, rel=0.01)


def _six_expert_moe() -> ModelArchitecture:
    return ModelArchitecture.from_config(
        {
            "num_hidden_layers": 4,
            "hidden_size": 1024,
            "num_attention_heads": 8,
            "num_key_value_heads": 8,
            "intermediate_size": 2048,
            "vocab_size": 1000,
            "max_position_embeddings": 4096,
            "num_local_experts": 6,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 512,
        },
        name="six-experts",
    )


def test_expert_parallel_holds_whole_experts_per_gpu():
    arch = _six_expert_moe()
    one_expert = arch.expert_parameters() * 2 * arch.num_moe_layers
    sliced = weight_footprint(arch, "bf16", tp=4)
    whole = weight_footprint(arch, "bf16", tp=4, expert_parallel=True)
    assert sliced.experts_total == pytest.approx(6 * one_expert / 4)  # 1/4 of each of 6 experts
    assert whole.experts_total == pytest.approx(2 * one_expert)  # the busiest GPU holds ceil(6/4) = 2 whole experts
    assert whole.attention == sliced.attention and whole.shared_experts == sliced.shared_experts


def test_expert_parallel_reads_whole_experts_at_batch_1_and_keeps_kv_tensor_parallel():
    sliced = plan("mixtral-8x7b", "ml.g6e.12xlarge", max_model_len=8192)
    whole = plan("mixtral-8x7b", "ml.g6e.12xlarge", max_model_len=8192, expert_parallel=True)
    assert whole.tensor_parallel == sliced.tensor_parallel == 4
    assert whole.kv_bytes_per_token == sliced.kv_bytes_per_token
    assert whole.weights_gib_per_accelerator == pytest.approx(sliced.weights_gib_per_accelerator)  # 8 / 4 divides
    assert whole.decode_tpot_ms_batch1 > sliced.decode_tpot_ms_batch1  # top-2: one whole expert vs 2 quarter slices
    assert "enable_expert_parallel: 2 whole expert(s) of 8 per accelerator" in whole.setting_notes[0]


def test_expert_parallel_changes_nothing_on_a_dense_model():
    assert not plan("llama-3.1-8b", "ml.g6.12xlarge", max_model_len=8192, expert_parallel=True).expert_parallel


def test_smaller_prefill_chunks_take_more_steps_and_say_so():
    default = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192, prompt_tokens=4096)
    chunked = plan("llama-3.1-8b", "ml.g6.2xlarge", max_model_len=8192, prompt_tokens=4096, max_num_batched_tokens=512)
    assert (default.expected.prefill_steps, chunked.expected.prefill_steps) == (2, 8)
    assert chunked.expected.ttft_ms > default.expected.ttft_ms
    assert "max_num_batched_tokens=512" in chunked.setting_notes[0] and "8 step(s)" in chunked.setting_notes[0]


def test_a_team_plan_accounts_for_its_switches(tmp_path):
    plain = load_resolved_team(_file(tmp_path, DENSE)).baseline.plan
    eager = load_resolved_team(_file(tmp_path, DENSE, "enforce_eager: true\n")).baseline.plan
    assert eager.enforce_eager and eager.kv_capacity_tokens > plain.kv_capacity_tokens
    assert eager.expected_tpot_ms_batch1 > plain.expected_tpot_ms_batch1


# --------------------------------------------------------------------------- a gate candidate


def test_a_gate_candidate_changes_a_switch_like_any_serving_setting(tmp_path):
    resolved = load_resolved_team(_file(tmp_path, DENSE, "", GATE))
    assert resolved.candidate.serving.enforce_eager and not resolved.baseline.serving.enforce_eager
    assert resolved.candidate.environment["OPTION_ENFORCE_EAGER"] == "true"
    assert "OPTION_ENFORCE_EAGER" not in resolved.baseline.environment
    assert resolved.optimization_configs is None  # no optimization job: the candidate only runs differently
    assert resolved.candidate.plan.kv_capacity_tokens > resolved.baseline.plan.kv_capacity_tokens


def test_serving_with_carries_a_switch_into_the_candidate(tmp_path):
    team = load_team(_file(tmp_path, DENSE.replace("ml.g6.2xlarge", "ml.g6.12xlarge")))
    candidate = serving_with(team.serving, {"attention_backend": "FLASHINFER", "max_num_batched_tokens": 4096})
    assert (candidate.attention_backend, candidate.max_num_batched_tokens) == ("FLASHINFER", 4096)
    env = resolve_serving(team, candidate, instance=get_instance(candidate.instance_type)).environment
    assert env["OPTION_ATTENTION_BACKEND"] == "FLASHINFER"
    assert env["OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS"] == "4096"
