"""Catalog parsing and the facts the planner relies on."""

import csv
from importlib import resources

import pytest

from optigate.plan import all_instances, get_instance

ORIGINAL_COLUMNS = [
    "instance_type",
    "platform",
    "accelerator",
    "accelerator_count",
    "memory_gib_per_accelerator",
    "compute_capability",
    "cores_per_accelerator",
]
ALLOWED_PRECISIONS = {"bf16", "fp16", "fp8", "int8", "int4", "fp4"}


def _rows():
    text = resources.files("optigate.plan").joinpath("data/instances.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_original_columns_kept_first_and_in_order():
    header = list(_rows()[0].keys())
    assert header[: len(ORIGINAL_COLUMNS)] == ORIGINAL_COLUMNS
    assert header[-1] == "sources"


def test_every_row_has_sources_and_empty_prices_are_explained():
    for row in _rows():
        assert row["sources"].strip(), row["instance_type"]
        if not row["price_per_hour_usd"].strip():
            assert "NOT FOUND" in row["sources"], row["instance_type"]


def test_required_families_are_present():
    names = {i.instance_type for i in all_instances()}
    for family in ("ml.g5.", "ml.g6.", "ml.g6e.", "ml.inf2.", "ml.trn1."):
        assert any(n.startswith(family) for n in names), family
    for name in (
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p6-b200.48xlarge",
    ):
        assert name in names


def test_supported_precisions_use_the_documented_vocabulary():
    for inst in all_instances():
        assert set(inst.supported_precisions) <= ALLOWED_PRECISIONS, inst.instance_type
        assert {"bf16", "fp16"} <= set(inst.supported_precisions)


def test_fp8_throughput_only_where_fp8_is_supported():
    for inst in all_instances():
        assert (inst.fp8_dense_tflops is not None) == inst.supports("fp8"), inst.instance_type
        assert (inst.fp4_dense_tflops is not None) == inst.supports("fp4"), inst.instance_type


def test_dense_is_half_of_datasheet_sparse_for_h100_and_l4():
    h100 = get_instance("ml.p5.48xlarge")
    assert h100.bf16_dense_tflops == pytest.approx(1979 / 2)
    assert h100.fp8_dense_tflops == pytest.approx(3958 / 2)
    l4 = get_instance("ml.g6.xlarge")
    assert l4.bf16_dense_tflops == pytest.approx(242 / 2, rel=0.01)
    assert l4.memory_bandwidth_gbps_per_accelerator == 300


def test_lookup_accepts_short_names_and_suggests_on_typo():
    assert get_instance("g6.xlarge").instance_type == "ml.g6.xlarge"
    with pytest.raises(KeyError, match=r"ml\.g6\.xlarge"):
        get_instance("ml.g6.xlarg")


def test_tp_units_and_neuron_fields():
    inf2 = get_instance("ml.inf2.48xlarge")
    assert inf2.tp_units == 24
    assert inf2.compute_capability is None
    assert inf2.is_neuron
    # one NeuronCore gets half of the chip's 32 GiB
    assert inf2.usable_memory_bytes_per_tp_unit == pytest.approx(16 * 1024**3)
    assert get_instance("ml.g5.48xlarge").tp_units == 8
    assert get_instance("ml.p5.48xlarge").compute_capability == 9.0


def test_usable_memory_is_below_nominal_and_nvlink_only_on_sxm():
    for inst in all_instances():
        assert inst.usable_memory_gib_per_accelerator <= inst.memory_gib_per_accelerator
    assert get_instance("ml.p4d.24xlarge").has_nvlink
    assert not get_instance("ml.g6e.48xlarge").has_nvlink
    assert not get_instance("ml.p5.48xlarge").usable_memory_gib_per_accelerator > 80
