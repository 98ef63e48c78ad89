"""The instance pools of a resolved variant as rows and as a table: `optigate plan` and `optigate summary` show them."""

from __future__ import annotations

from rich.table import Table

POOL_FIGURES = (
    "tensor_parallel",
    "replicas",
    "weights_gib_per_accelerator",
    "kv_capacity_tokens",
    "max_concurrent_sequences_at_typical_length",
    "decode_tpot_ms_batch1",
    "expected_tpot_ms_batch1",
    "cost_per_million_output_tokens",
    "price_per_hour_usd",
)


def pool_rows(resolved) -> list[dict]:
    """One row per instance pool of a resolved variant: its plan's key figures and what it decides."""
    rows = []
    for pool in resolved.pools:
        data = pool.plan.to_dict() if pool.plan is not None else {}
        rows.append(
            {
                "priority": pool.priority,
                "instance_type": pool.instance_type,
                "decides": list(pool.decides),
                "fits": pool.plan.fits if pool.plan is not None else None,
                **{key: data.get(key) for key in POOL_FIGURES},
            }
        )
    return rows


def pool_table(resolved, title: str) -> Table:
    """The pools side by side (fits 100 columns): every pool runs the one environment."""
    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("#", "instance", "TP", "GiB/acc.", "KV tokens", "TPOT b=1", "$/M", "decides"):
        left = column in ("instance", "decides")
        table.add_column(column, justify="left" if left else "right", no_wrap=column != "decides")
    for row in pool_rows(resolved):
        tpot, cost, weights = (
            row["decode_tpot_ms_batch1"],
            row["cost_per_million_output_tokens"],
            row["weights_gib_per_accelerator"],
        )
        table.add_row(
            str(row["priority"]),
            row["instance_type"],
            "-" if row["tensor_parallel"] is None else str(row["tensor_parallel"]),
            "n/a" if weights is None else f"{weights:.1f}",
            "n/a" if row["kv_capacity_tokens"] is None else f"{row['kv_capacity_tokens']:,}",
            "n/a" if tpot is None else f"{tpot:.1f} ms",
            "n/a" if cost is None else f"${cost:.3f}",
            ", ".join(row["decides"]) or "-",
        )
    return table
