"""Compare the planner's KV-cache capacity with vLLM start-up logs published on GitHub.

Each row of data/published_vllm_kv.csv is one vLLM start-up whose model, GPU, tensor
parallelism, gpu_memory_utilization, max_model_len and KV dtype are known, with the
KV capacity vLLM printed ("# GPU blocks: N" x block size, or "GPU KV cache size: N
tokens"). The planner is run with the same settings and the engine-version defaults
recorded in the row (max_num_batched_tokens, whether the engine subtracts CUDA-graph
memory); no per-case constant is fitted.

Run:  python benchmarks/planner_vs_published.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optigate.plan import Instance, get_instance, plan

DATA = Path(__file__).resolve().parent / "data" / "published_vllm_kv.csv"


def instance_for(row: dict[str, str]) -> Instance:
    """Catalog instance when the case ran on one; otherwise an ad-hoc GPU box whose
    memory total is the one vLLM logged."""
    if row["instance_type"].strip():
        return get_instance(row["instance_type"])
    gpu = row["gpu"].strip()
    accelerator = "A100-80GB" if gpu.startswith("A100-80GB") else gpu
    memory = float(row["gpu_visible_memory_gib"])
    return Instance(
        instance_type=f"adhoc:{gpu}",
        platform="gpu",
        accelerator=accelerator,
        accelerator_count=int(row["tensor_parallel"]),
        memory_gib_per_accelerator=memory,
        runtime_visible_memory_gib_per_accelerator=memory,
    )


def run() -> list[tuple[str, int, int, float]]:
    results = []
    with DATA.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            result = plan(
                row["model"],
                instance_for(row),
                weight_precision=row["weight_precision"],
                kv_cache_dtype=row["kv_cache_dtype"],
                tensor_parallel=int(row["tensor_parallel"]),
                gpu_memory_utilization=float(row["gpu_memory_utilization"]),
                max_model_len=int(row["max_model_len"]),
                max_num_batched_tokens=int(row["max_num_batched_tokens"]),
                max_num_seqs=int(row["max_num_seqs"]),
                engine_subtracts_cuda_graphs=row["engine_subtracts_cuda_graphs"].strip().lower() == "true",
                suggest_fixes=False,
            )
            published = int(row["published_tokens"])
            predicted = result.kv_capacity_tokens
            results.append((row["case"], published, predicted, 100.0 * (predicted - published) / published))
    return results


def main() -> None:
    results = run()
    width = max(len(case) for case, *_ in results)
    print(f"{'case':<{width}}  {'published':>10}  {'predicted':>10}  {'error %':>8}")
    for case, published, predicted, error in results:
        print(f"{case:<{width}}  {published:>10,}  {predicted:>10,}  {error:>+8.1f}")
    errors = [abs(e) for *_, e in results]
    within = sum(e <= 10 for e in errors)
    print(f"\n{within}/{len(errors)} cases within 10 %; median |error| {sorted(errors)[len(errors) // 2]:.1f} %")


if __name__ == "__main__":
    main()
