"""An adapter archive checked the way vLLM will load it, before any endpoint exists: real .tar.gz files built here,
each refusal by its named reason, and hostile archives (hypothesis) refused or passed, never crashing."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optigate.deployment import adapter_archive as aa
from optigate.deployment.adapter_archive import AdapterLimits, AdapterRefused, check_archive
from tests.fixtures.adapter_archives import (
    BASE,
    LIMITS,
    QWEN,
    TINY,
    adapter,
    adapter_config,
    archive,
    lora_tensors,
    safetensors,
)

#: Llama-3.1-8B's widths (optigate/plan/data/models.yaml llama-3.1-8b): another base than Qwen2.5-7B.
LLAMA = {"hidden": 4096, "intermediate": 14336, "kv": 1024}
QWEN_CONFIG = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584}
QWEN_CONFIG |= {"num_hidden_layers": 28, "intermediate_size": 18944}


def _refusal(data: bytes, limits: AdapterLimits = LIMITS) -> str:
    with pytest.raises(AdapterRefused) as refused:
        check_archive(data, limits)
    return refused.value.reason


def test_a_well_formed_adapter_passes_and_says_what_it_is():
    facts = check_archive(adapter(), LIMITS)
    assert (facts.rank, facts.lora_alpha, facts.base_model, facts.base_model_check) == (16, 32, BASE, aa.SAME)
    assert facts.architecture_checked == (aa.SAFETENSORS,) and facts.base_model_why == ""
    assert facts.tensor_modules == {"q_proj", "k_proj", "v_proj", "o_proj"}
    # A stream reads the same as bytes (the stager streams the S3 body), and a folder prefix ./ is the top level.
    assert check_archive(io.BytesIO(adapter()), LIMITS) == facts
    files = {"./adapter_config.json": json.dumps(adapter_config()).encode(), "./adapter_model.bin": b"pickle"}
    assert check_archive(archive(files), LIMITS).rank == 16


@pytest.mark.parametrize(
    ("config", "tensors", "reason"),
    [
        (adapter_config(r=64), lora_tensors(64), aa.RANK),  # over the candidate's max_lora_rank 32
        (adapter_config(rank_pattern={"model.layers.0.self_attn.q_proj": 64}), None, aa.RANK),
        (adapter_config(), lora_tensors(48), aa.RANK),  # the weights are wider than the config says
        (adapter_config(base_model_name_or_path="Qwen/Qwen2.5-7B"), None, aa.BASE_MODEL),  # the base, not -Instruct
        (adapter_config(target_modules=["q_proj", "lm_head"]), None, aa.TARGET_MODULE),
        (adapter_config(target_modules=["embed_tokens"]), None, aa.TARGET_MODULE),
        (adapter_config(target_modules=r".*\.(q_proj|conv1d)$"), None, aa.TARGET_MODULE),
        (adapter_config(), lora_tensors(modules=["q_proj", "dense_h_to_4h"]), aa.TARGET_MODULE),
        (adapter_config(modules_to_save=["lm_head"]), None, aa.MODULES_TO_SAVE),  # vLLM: even lm_head
        (adapter_config(use_dora=True), None, aa.DORA),
        (adapter_config(), {**lora_tensors(), "base_model.model.x.q_proj.lora_magnitude_vector": [1, 8]}, aa.DORA),
        (adapter_config(bias="all"), None, aa.BIAS),
        (adapter_config(peft_type="IA3"), None, aa.NOT_LORA),
        ({k: v for k, v in adapter_config().items() if k != "lora_alpha"}, None, aa.BAD_CONFIG),
        (adapter_config(r="16"), None, aa.BAD_CONFIG),
        (adapter_config(), {}, aa.NO_WEIGHTS),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_what_vllm_would_refuse_is_refused_by_name(config, tensors, reason):
    assert _refusal(adapter(config, tensors)) == reason


def test_target_modules_as_vllm_reads_them():
    for targets in (["model.layers.0.self_attn.q_proj", "down_proj"], r".*\.(q_proj|v_proj)$", "all-linear"):
        assert check_archive(adapter(adapter_config(target_modules=targets)), LIMITS).target_modules in (
            tuple(targets) if isinstance(targets, list) else targets,
        )
    # An MoE's experts: only the attention projections are served there.
    moe = AdapterLimits(32, (BASE,), aa.ATTENTION_MODULES, QWEN)
    assert _refusal(adapter(adapter_config(target_modules=["q_proj", "gate_proj"])), moe) == aa.TARGET_MODULE
    expert = {"base_model.model.model.layers.0.mlp.experts.0.q_proj.lora_A.weight": [16, 8]}
    assert _refusal(adapter(tensors=expert)) == aa.TARGET_MODULE


def test_a_team_whose_model_names_no_hugging_face_id_compares_the_architecture_only():
    no_id = AdapterLimits(32, (), aa.DENSE_DECODER_MODULES, QWEN)
    for base in (BASE, "/opt/ml/input/data/model"):
        facts = check_archive(adapter(adapter_config(base_model_name_or_path=base)), no_id)
        assert facts.base_model_check == aa.UNKNOWN and facts.architecture_checked == (aa.SAFETENSORS,)
    assert "set model.source.hugging_face" in check_archive(adapter(), no_id).base_model_why
    assert _refusal(adapter(tensors=lora_tensors(**LLAMA)), no_id) == aa.ARCHITECTURE
    # Hugging Face ids are case-insensitive.
    assert check_archive(adapter(adapter_config(base_model_name_or_path=BASE.lower())), LIMITS).rank == 16


@pytest.mark.parametrize(
    "base", ["/opt/ml/input/data/model", "./base", "/home/x/llama", "s3://acme/models/qwen/", "~/qwen", "", None]
)
def test_a_base_recorded_as_a_local_path_passes_as_unknown_with_why(base):
    """SageMaker training and in-house scripts record where they loaded the base from; vLLM never reads it."""
    facts = check_archive(adapter(adapter_config(base_model_name_or_path=base)), LIMITS)
    assert facts.base_model_check == aa.UNKNOWN and facts.architecture_checked == (aa.SAFETENSORS,)
    assert ("is not a Hugging Face id" if base else "names no base_model_name_or_path") in facts.base_model_why
    # Nothing else tells the base: said, not refused.
    files = {"adapter_config.json": json.dumps(adapter_config(base_model_name_or_path=base)).encode()}
    facts = check_archive(archive({**files, "adapter_model.bin": b"pickle"}), LIMITS)
    assert facts.architecture_checked == () and "nor does the archive show its base's architecture" in (
        facts.base_model_why
    )


@pytest.mark.parametrize("base", ["Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B-Instruct", "gpt2"])
def test_another_hugging_face_id_is_still_refused(base):
    with pytest.raises(AdapterRefused) as refused:
        check_archive(adapter(adapter_config(base_model_name_or_path=base)), LIMITS)
    assert refused.value.reason == aa.BASE_MODEL and BASE in refused.value.detail


@pytest.mark.parametrize(
    ("value", "is_id"),
    [
        # huggingface_hub's validate_repo_id docstring: valid, then not valid.
        *[(v, True) for v in ("foo", "foo/bar", "123", "Foo-BAR_foo.bar123", BASE)],
        *[(v, False) for v in ("datasets/foo/bar", ".repo_id", "foo--bar", "foo.git", "a/" + "x" * 97)],
        *[(v, False) for v in ("/opt/ml/model", "./base", "../base", "C:\\models\\llama", "s3://b/k", "hf://a/b")],
    ],
)
def test_hugging_face_ids_as_huggingface_hub_validates_them(value, is_id):
    assert aa.is_hugging_face_id(value) is is_id


def test_tensor_shapes_of_another_base_are_refused_with_both_values():
    with pytest.raises(AdapterRefused) as refused:
        check_archive(adapter(tensors=lora_tensors(**LLAMA)), LIMITS)
    assert refused.value.reason == aa.ARCHITECTURE
    assert "hidden_size 4096" in refused.value.detail and "hidden_size 3584" in refused.value.detail
    # The MLP's width: gate/up_proj give intermediate_size out, down_proj takes it in.
    mlp = ["gate_proj", "up_proj", "down_proj"]
    config = adapter_config(target_modules=mlp)
    assert check_archive(adapter(config, lora_tensors(modules=mlp, layers=1)), LIMITS).tensor_modules == set(mlp)
    with pytest.raises(AdapterRefused, match="intermediate_size 14336; the team's base has intermediate_size 18944"):
        check_archive(adapter(config, lora_tensors(modules=mlp, layers=1, intermediate=14336)), LIMITS)


def test_a_layer_the_base_does_not_have_is_refused():
    beyond = {**lora_tensors(layers=1), **lora_tensors(layers=1, first_layer=QWEN.num_hidden_layers)}
    with pytest.raises(AdapterRefused) as refused:
        check_archive(adapter(tensors=beyond), LIMITS)
    assert refused.value.reason == aa.ARCHITECTURE
    assert "adapts layer 28; the team's base has 28 layers" in refused.value.detail
    last = lora_tensors(layers=1, first_layer=QWEN.num_hidden_layers - 1)
    assert check_archive(adapter(tensors=last), LIMITS).architecture_checked == (aa.SAFETENSORS,)


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        (QWEN_CONFIG, None),
        ({**QWEN_CONFIG, "model_type": "Qwen2"}, None),  # model_type is compared as a name
        ({"architectures": ["Qwen2VLForConditionalGeneration"], "text_config": QWEN_CONFIG}, None),
        ({**QWEN_CONFIG, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "model_type 'llama'"),
        ({**QWEN_CONFIG, "hidden_size": 4096}, "hidden_size 4096"),
        ({**QWEN_CONFIG, "num_hidden_layers": 32}, "num_hidden_layers 32"),
        ({**QWEN_CONFIG, "intermediate_size": 14336}, "intermediate_size 14336"),
        ({**QWEN_CONFIG, "hidden_size": "3584"}, "hidden_size '3584'"),
    ],
)
def test_a_config_json_in_the_archive_is_compared_with_the_base(config, refused):
    unknown = adapter_config(base_model_name_or_path="/opt/ml/input/data/model")
    data = adapter(unknown, **{"config.json": json.dumps(config).encode()})
    if refused is None:
        assert check_archive(data, LIMITS).architecture_checked == (aa.SAFETENSORS, aa.BASE_CONFIG)
        return
    with pytest.raises(AdapterRefused) as caught:
        check_archive(data, LIMITS)
    assert caught.value.reason == aa.ARCHITECTURE and refused in caught.value.detail
    # Also beside .bin weights, where the config.json is all that tells the base.
    files = {"adapter_config.json": json.dumps(unknown).encode(), "config.json": json.dumps(config).encode()}
    assert _refusal(archive({**files, "adapter_model.bin": b"pickle"})) == aa.ARCHITECTURE


def test_an_unreadable_config_json_is_refused():
    assert _refusal(adapter(**{"config.json": b"{not json"})) == aa.BAD_CONFIG
    assert _refusal(adapter(**{"config.json": b"[]"})) == aa.BAD_CONFIG


def test_the_archive_itself_is_checked():
    config = json.dumps(adapter_config()).encode()
    weights = safetensors(lora_tensors())
    assert _refusal(archive({"adapter_model.safetensors": weights})) == aa.NO_CONFIG
    assert _refusal(archive({"nested/adapter_config.json": config, "nested/adapter_model.safetensors": weights})) == (
        aa.NO_CONFIG  # LMI loads the archive's top level as the adapter
    )
    assert _refusal(archive({"adapter_config.json": config})) == aa.NO_WEIGHTS
    assert _refusal(archive({"adapter_config.json": b"{not json", "adapter_model.bin": b"x"})) == aa.BAD_CONFIG
    assert _refusal(archive({"adapter_config.json": b"[1]", "adapter_model.bin": b"x"})) == aa.BAD_CONFIG
    assert _refusal(b"PK\x03\x04 a zip, not a tar.gz") == aa.UNREADABLE
    assert _refusal(adapter()[:200]) == aa.UNREADABLE  # truncated
    bad_header = b"\xff" * 8 + b"{}"
    assert _refusal(archive({"adapter_config.json": config, "adapter_model.safetensors": bad_header})) == aa.UNREADABLE


@pytest.mark.parametrize("name", ["../adapter_config.json", "/etc/adapter_config.json", "a/../../x", "a/../b"])
def test_paths_that_leave_the_folder_are_refused(name):
    files = {"adapter_config.json": json.dumps(adapter_config()).encode(), name: b"x"}
    assert _refusal(archive(files)) == aa.UNSAFE_MEMBER


def test_links_are_refused():
    files = {"adapter_config.json": json.dumps(adapter_config()).encode()}
    assert _refusal(archive(files, links={"adapter_model.safetensors": "/etc/passwd"})) == aa.UNSAFE_MEMBER


def test_oversize_members_and_tar_bombs_are_refused_without_unpacking_them(monkeypatch):
    monkeypatch.setattr(aa, "MAX_CONFIG_BYTES", 100)
    assert _refusal(adapter(adapter_config(padding="x" * 200))) == aa.TOO_LARGE
    monkeypatch.setattr(aa, "MAX_CONFIG_BYTES", 1024**2)
    monkeypatch.setattr(aa, "MAX_MEMBER_BYTES", 8000)
    tiny = lora_tensors(**TINY)
    assert _refusal(adapter(tensors=tiny, **{"big.bin": b"\0" * 8001})) == aa.TOO_LARGE
    monkeypatch.setattr(aa, "MAX_TOTAL_BYTES", 12000)
    # Zeros compress ~1000:1: each member is under the member limit, together over the total.
    assert _refusal(adapter(tensors=tiny, **{f"pad{i}.bin": b"\0" * 7000 for i in range(2)})) == aa.TAR_BOMB
    monkeypatch.setattr(aa, "MAX_MEMBERS", 5)
    assert _refusal(adapter(tensors=tiny, **{f"f{i}": b"" for i in range(6)})) == aa.TAR_BOMB


def test_a_declared_size_is_trusted_only_as_far_as_the_limit():
    """A tar header may declare a huge member over a short stream: refused by its size before any read."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("adapter_model.bin")
        info.size = aa.MAX_MEMBER_BYTES + 1
        tar.addfile(info)  # no content follows: a lie
    assert _refusal(buffer.getvalue()) == aa.TOO_LARGE


def test_limits_travel_in_the_event_and_a_malformed_event_is_no_pass():
    assert AdapterLimits.from_event(LIMITS.event()) == LIMITS
    event = LIMITS.event()
    without_architecture = {key: value for key, value in event.items() if key != "architecture"}
    wide = {**event["architecture"], "hidden_size": 0}
    for broken in (
        {},
        {**event, "max_lora_rank": "32"},
        {**event, "modules": []},
        without_architecture,
        {**event, "architecture": None},
        {**event, "architecture": wide},
        {**event, "architecture": {**event["architecture"], "intermediate_size": "18944"}},
        {**event, "architecture": {**event["architecture"], "model_type": ""}},
    ):
        with pytest.raises(ValueError):
            AdapterLimits.from_event(broken)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.text(alphabet=st.sampled_from("ab./\\:-_ "), min_size=1, max_size=12), min_size=1, max_size=4),
    config=st.one_of(
        st.binary(max_size=64),
        st.dictionaries(
            st.sampled_from(["r", "lora_alpha", "target_modules", "base_model_name_or_path", "use_dora", "bias"]),
            st.one_of(st.none(), st.booleans(), st.integers(-2, 1024), st.text(max_size=8), st.lists(st.text())),
        ).map(lambda d: json.dumps(d).encode()),
    ),
    cut=st.integers(0, 4000),
)
def test_hostile_archives_are_refused_by_name_or_pass_with_a_rank_in_limits(names, config, cut):
    files = {name: b"x" for name in names}
    files["adapter_config.json"] = config
    data = archive(files)
    data = data[:cut] if cut < len(data) else data
    try:
        facts = check_archive(data, LIMITS)
    except AdapterRefused as refusal:
        assert refusal.reason in {
            getattr(aa, name) for name in dir(aa) if name.isupper() and isinstance(getattr(aa, name), str)
        }
    else:
        assert 1 <= facts.rank <= LIMITS.max_lora_rank
        assert facts.base_model_check == aa.UNKNOWN or facts.base_model.lower() == BASE.lower()
