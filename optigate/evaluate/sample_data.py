"""A synthetic evaluation set made here, never downloaded: QA slices of different difficulty
(arithmetic, multi-step word problems, key lookup, long-context retrieval) and a sentiment
classification slice. Deterministic for a seed; used by the tests and the demo."""

from __future__ import annotations

import json
import random
from pathlib import Path

NAMES = ("Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan", "Kendall", "Logan")
POSITIVE = ("works perfectly", "exceeded my expectations", "is a delight to use", "arrived early and works great")
NEGATIVE = ("broke after a day", "is a waste of money", "stopped charging within a week", "arrived damaged")
PRODUCTS = ("kettle", "headset", "charger", "backpack", "lamp", "keyboard", "blender", "router")
FILLER = (
    "The committee reviewed the quarterly logistics report and noted steady progress across all regional depots. "
    "Shipments were consolidated, routes were rebalanced, and the maintenance schedule was updated accordingly. "
)


def generate(counts: dict[str, int] | None = None, seed: int = 0) -> list[dict]:
    counts = counts or {"arithmetic": 80, "multi_step": 50, "lookup": 60, "long_context": 30, "sentiment": 100}
    rng = random.Random(seed)
    records: list[dict] = []

    def add(category: str, question: str, answer: str, task: str = "qa") -> None:
        records.append(
            {
                "id": f"{category}-{sum(r['category'] == category for r in records):03d}",
                "category": category,
                "task": task,
                "model_input": question,
                "target_output": answer,
            }
        )

    for _ in range(counts.get("arithmetic", 0)):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        add("arithmetic", f"What is {a} plus {b}? Answer with the number only.", str(a + b))
    for _ in range(counts.get("multi_step", 0)):
        name, start, sold, bought = rng.choice(NAMES), rng.randint(20, 90), rng.randint(1, 19), rng.randint(5, 40)
        add(
            "multi_step",
            f"{name} has {start} apples, sells {sold}, then buys {bought} more and gives away half "
            f"of the rest rounded down. How many apples does {name} keep? Answer with the number only.",
            str((start - sold + bought) - (start - sold + bought) // 2),
        )
    for _ in range(counts.get("lookup", 0)):
        pairs = {f"k{rng.randint(100, 999)}": rng.randint(1000, 9999) for _ in range(12)}
        key = rng.choice(sorted(pairs))
        listing = ", ".join(f"{k}={v}" for k, v in pairs.items())
        add("lookup", f"Given {listing}, what is the value of {key}? Answer with the number only.", str(pairs[key]))
    for index in range(counts.get("long_context", 0)):
        code, vault = rng.randint(100000, 999999), f"vault-{index:03d}"
        before, after = FILLER * rng.randint(60, 80), FILLER * rng.randint(60, 80)
        add(
            "long_context",
            f"{before}The access code for {vault} is {code}. {after}What "
            f"is the access code for {vault}? Answer with the number only.",
            str(code),
        )
    for _ in range(counts.get("sentiment", 0)):
        positive = rng.random() < 0.5
        review = f"This {rng.choice(PRODUCTS)} {rng.choice(POSITIVE if positive else NEGATIVE)}."
        add(
            "sentiment",
            f"Review: {review} Is the review positive or negative? Answer with one word.",
            "positive" if positive else "negative",
            task="classification",
        )
    return records


def write(path: str | Path, records: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
