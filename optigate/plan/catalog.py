"""SageMaker instance catalog: accelerator counts, memory, bandwidth, peak FLOPs, price.

The figures live in ``data/instances.csv`` (shipped as package data) with a
``sources`` column per row; this module only parses them into frozen dataclasses.

Vocabulary used throughout the planner:

* accelerator  -- one GPU, or one Neuron *chip* (Inferentia2 / Trainium).
* tp unit      -- what one tensor-parallel rank runs on: a GPU, or one NeuronCore
                  (a Neuron chip has ``cores_per_accelerator`` NeuronCores that share
                  the chip's memory and bandwidth).
"""

from __future__ import annotations

import csv
import difflib
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

GIB = 1024**3

#: Fraction of nominal memory the CUDA runtime reports as total when no observed
#: figure is recorded. HBM parts lose ~1 % (A100-80GB 79.15/80, H100 79.22/80,
#: H200 139.81/141); GDDR6 parts ~8 % (A10 22.07/24, L40S 44.4/48).
_VISIBLE_FRACTION_HBM = 0.99
_VISIBLE_FRACTION_GDDR = 0.92
_GDDR_ACCELERATORS = frozenset({"A10G", "L4", "L40S"})

#: Accelerators whose multi-GPU instances connect GPUs with NVLink/NVSwitch (SXM
#: parts). g5/g6/g6e multi-GPU instances are PCIe only. Matters for the runtime
#: reserve: vLLM's custom all-reduce allocates extra buffers only with NVLink.
# Instance families with NVMe instance storage. SageMaker puts the model there, encrypts those volumes
# with a hardware module and fails CreateEndpointConfig if KmsKeyId or VolumeSizeInGB is set for them.
INSTANCE_STORAGE_FAMILIES = frozenset(
    {"g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1"}
)
_NVLINK_ACCELERATORS = frozenset({"A100-40GB", "A100-80GB", "H100", "H200", "B200"})


def has_instance_storage(instance_type: str) -> bool:
    """Whether the instance type's family stores models on NVMe instance storage (no EBS, no KmsKeyId)."""
    return instance_type.split(".")[1] in INSTANCE_STORAGE_FAMILIES


def _optional_float(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


@dataclass(frozen=True)
class Instance:
    """One SageMaker instance type; per-accelerator figures are per GPU / per Neuron chip."""

    instance_type: str
    platform: str  # 'gpu' | 'neuron'
    accelerator: str
    accelerator_count: int
    memory_gib_per_accelerator: float
    compute_capability: float | None = None
    cores_per_accelerator: int = 1
    memory_bandwidth_gbps_per_accelerator: float | None = None
    bf16_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    fp4_dense_tflops: float | None = None
    supported_precisions: tuple[str, ...] = ("bf16", "fp16")
    price_per_hour_usd: float | None = None
    runtime_visible_memory_gib_per_accelerator: float | None = None
    sources: str = ""

    # --- derived figures -------------------------------------------------

    @property
    def tp_units(self) -> int:
        """Number of tensor-parallel ranks the instance offers (GPUs, or NeuronCores)."""
        return self.accelerator_count * self.cores_per_accelerator

    @property
    def is_neuron(self) -> bool:
        return self.platform == "neuron"

    @property
    def has_instance_storage(self) -> bool:
        return has_instance_storage(self.instance_type)

    @property
    def has_nvlink(self) -> bool:
        return self.accelerator_count > 1 and self.accelerator in _NVLINK_ACCELERATORS

    @property
    def usable_memory_gib_per_accelerator(self) -> float:
        """Memory the runtime reports as the device total (what vLLM multiplies by
        gpu_memory_utilization). Observed value when recorded, otherwise nominal
        memory scaled by the typical driver reservation for the memory type."""
        if self.runtime_visible_memory_gib_per_accelerator is not None:
            return self.runtime_visible_memory_gib_per_accelerator
        if self.is_neuron:
            return self.memory_gib_per_accelerator
        fraction = _VISIBLE_FRACTION_GDDR if self.accelerator in _GDDR_ACCELERATORS else _VISIBLE_FRACTION_HBM
        return self.memory_gib_per_accelerator * fraction

    @property
    def usable_memory_is_observed(self) -> bool:
        return self.runtime_visible_memory_gib_per_accelerator is not None

    @property
    def usable_memory_bytes_per_tp_unit(self) -> float:
        return self.usable_memory_gib_per_accelerator * GIB / self.cores_per_accelerator

    @property
    def memory_bandwidth_bytes_per_s_per_tp_unit(self) -> float | None:
        if self.memory_bandwidth_gbps_per_accelerator is None:
            return None
        return self.memory_bandwidth_gbps_per_accelerator * 1e9 / self.cores_per_accelerator

    def dense_tflops(self, compute_precision: str) -> float | None:
        """Dense (non-sparse) tensor TFLOPS of one accelerator at a compute precision."""
        return {
            "bf16": self.bf16_dense_tflops,
            "fp16": self.bf16_dense_tflops,
            "fp8": self.fp8_dense_tflops,
            "int8": self.fp8_dense_tflops,
            "fp4": self.fp4_dense_tflops,
        }.get(compute_precision)

    def peak_flops_per_tp_unit(self, compute_precision: str) -> float | None:
        tflops = self.dense_tflops(compute_precision)
        return None if tflops is None else tflops * 1e12 / self.cores_per_accelerator

    def supports(self, precision: str) -> bool:
        return precision in self.supported_precisions

    @property
    def price_per_second_usd(self) -> float | None:
        return None if self.price_per_hour_usd is None else self.price_per_hour_usd / 3600.0

    @classmethod
    def from_csv_row(cls, row: dict[str, str]) -> Instance:
        precisions = tuple(p.strip() for p in (row.get("supported_precisions") or "").split(";") if p.strip())
        return cls(
            instance_type=row["instance_type"].strip(),
            platform=row["platform"].strip(),
            accelerator=row["accelerator"].strip(),
            accelerator_count=int(row["accelerator_count"]),
            memory_gib_per_accelerator=float(row["memory_gib_per_accelerator"]),
            compute_capability=_optional_float(row.get("compute_capability", "")),
            cores_per_accelerator=int(row.get("cores_per_accelerator") or 1),
            memory_bandwidth_gbps_per_accelerator=_optional_float(row.get("memory_bandwidth_gbps_per_accelerator", "")),
            bf16_dense_tflops=_optional_float(row.get("bf16_dense_tflops", "")),
            fp8_dense_tflops=_optional_float(row.get("fp8_dense_tflops", "")),
            fp4_dense_tflops=_optional_float(row.get("fp4_dense_tflops", "")),
            supported_precisions=precisions or ("bf16", "fp16"),
            price_per_hour_usd=_optional_float(row.get("price_per_hour_usd", "")),
            runtime_visible_memory_gib_per_accelerator=_optional_float(
                row.get("runtime_visible_memory_gib_per_accelerator", "")
            ),
            sources=row.get("sources", ""),
        )


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Instance]:
    text = resources.files("optigate.plan").joinpath("data/instances.csv").read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO(text))
    return {inst.instance_type: inst for inst in (Instance.from_csv_row(r) for r in rows)}


def all_instances() -> tuple[Instance, ...]:
    """Every catalog instance, in file order."""
    return tuple(_catalog().values())


def get_instance(name: str) -> Instance:
    """Look up an instance type; accepts 'ml.g6.xlarge' or 'g6.xlarge'.

    Raises KeyError with close matches, so a typo in a config file is easy to fix.
    """
    catalog = _catalog()
    key = name.strip()
    if key in catalog:
        return catalog[key]
    if f"ml.{key}" in catalog:
        return catalog[f"ml.{key}"]
    close = difflib.get_close_matches(key if key.startswith("ml.") else f"ml.{key}", list(catalog), n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise KeyError(f"Unknown instance type {name!r}.{hint}")
