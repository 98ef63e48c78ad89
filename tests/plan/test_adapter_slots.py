"""The LoRA slots a mix needs (optigate.plan.adapter_slots), checked against an LRU simulation, and in `plan`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from optigate.cli import main
from optigate.plan.adapter_slots import (
    MixError,
    SlotPlan,
    over_slots_share,
    slots_for_mix,
    swap_share,
    team_slots,
)
from tests.conftest import CONFIG
from tests.fixtures.config_files import minimal_team

MIXES = [
    {"a": 0.4, "b": 0.3, "c": 0.15, "d": 0.1, "e": 0.05},
    {"a": 5, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1},
    {"a": 10, "b": 5, "c": 3, "d": 2, "e": 1, "f": 1, "g": 1, "h": 1},
    {"a": 90, "b": 5, "c": 3, "d": 1, "e": 1},  # one dominant adapter: Che's worst case at one slot
]


def simulated_misses(weights: list[float], requests: int = 100_000, seed: int = 7) -> np.ndarray:
    """Miss share of an LRU cache of every size 0..N on a seeded independent stream (stack distances)."""
    shares = np.asarray(weights, dtype=float) / sum(weights)
    stream = np.random.default_rng(seed).choice(len(shares), requests, p=shares)
    stack: list[int] = []
    distances = np.empty(requests, dtype=int)
    for position, item in enumerate(stream):
        if item in stack:
            depth = stack.index(item)
            stack.pop(depth)
        else:
            depth = len(shares)  # first use: a miss at every size
        distances[position] = depth
        stack.insert(0, item)
    return np.array([np.mean(distances >= size) for size in range(len(shares) + 1)])


def exact_over_slots(mix: dict[str, float], concurrency: int, slots: int) -> float:
    """P(more than `slots` distinct adapters among `concurrency` draws), by inclusion-exclusion over subsets."""
    total = sum(mix.values())
    base = mix.get("base", 0.0) / total
    shares = [weight / total for name, weight in mix.items() if name != "base"]
    within = 0.0
    for size in range(slots + 1):
        for chosen in itertools.combinations(range(len(shares)), size):
            within += sum(
                (-1) ** (size - len(part)) * (base + sum(shares[i] for i in part)) ** concurrency
                for length in range(size + 1)
                for part in itertools.combinations(chosen, length)
            )
    return 1 - within


@pytest.mark.parametrize("mix", MIXES)
def test_swap_share_is_within_two_and_a_half_points_of_an_lru_simulation(mix):
    simulated = simulated_misses(list(mix.values()))
    for slots in range(1, len(mix)):
        assert swap_share(mix, slots) == pytest.approx(simulated[slots], abs=0.025), slots
    assert swap_share(mix, len(mix)) == 0.0


def test_uniform_mix_is_exact_and_base_requests_take_no_slot():
    uniform = {name: 1.0 for name in "abcde"}
    assert [round(swap_share(uniform, k), 6) for k in range(1, 6)] == [0.8, 0.6, 0.4, 0.2, 0.0]
    # Half the requests to the base model: the adapters' LRU is the same, half as many requests pay.
    assert swap_share({**uniform, "base": 5.0}, 3) == pytest.approx(0.2)


def test_over_slots_share_is_the_occupancy_probability():
    assert over_slots_share({"a": 1, "b": 1}, concurrency=2, slots=1) == pytest.approx(0.5, abs=0.01)
    # three uniform adapters, three in flight, all distinct: 3!/3^3
    assert over_slots_share({"a": 1, "b": 1, "c": 1}, concurrency=3, slots=2) == pytest.approx(6 / 27, abs=0.01)
    # with the base model: in flight, two adapters of 1/4 each and base half the time
    expected = 2 * 0.25 * 0.25
    assert over_slots_share({"a": 1, "b": 1, "base": 2}, concurrency=2, slots=1) == pytest.approx(expected, abs=0.01)
    assert over_slots_share({name: 1 for name in "abcdef"}, concurrency=1, slots=1) == 0.0
    for mix in (*MIXES, {"base": 3, "a": 2, "b": 1, "c": 1}):
        for concurrency, slots in ((4, 2), (16, 3), (16, 4)):
            exact = exact_over_slots(mix, concurrency, slots)
            assert over_slots_share(mix, concurrency, slots) == pytest.approx(exact, abs=0.01), (mix, concurrency)


def test_slots_needed_is_the_fewest_meeting_the_bound():
    uniform = slots_for_mix({name: 1.0 for name in "abcde"}, concurrency=1, max_loras=3)
    assert (uniform.slots_needed, uniform.adapters) == (5, 5)  # 4 slots still miss 20 %
    assert uniform.swap_share == pytest.approx(0.4)
    assert uniform.message().startswith("mix needs 5 slots for 95 % resident at concurrency 1; max_loras is 3")
    assert "40.0 % of requests pay a LoRA swap" in uniform.message()
    skewed = {"a": 90, "b": 5, "c": 3, "d": 1, "e": 1}
    simulated = simulated_misses(list(skewed.values()))
    one = slots_for_mix(skewed, concurrency=1, max_loras=3)
    assert one.slots_needed == next(k for k in range(1, 6) if simulated[k] <= 0.05) == 3
    assert one.enough and "the mix needs 3 slots" in one.message()
    # sixteen in flight span more than three adapters 6 % of the time: the scheduler then holds requests back
    many = slots_for_mix(skewed, concurrency=16, max_loras=3)
    assert many.over_slots_share == pytest.approx(exact_over_slots(skewed, 16, 3), abs=0.01)
    assert many.over_slots_share > 0.05
    assert many.slots_needed == 4 and not many.enough


def test_team_slots_without_a_mix_and_with_a_bad_one():
    fits = team_slots(["a", "b", "c"], None, concurrency=16, max_loras=3)
    assert isinstance(fits, SlotPlan) and fits.message() == "3 adapters, max_loras 3: every adapter resident"
    unknown = team_slots(["a", "b", "c", "d"], None, concurrency=16, max_loras=3)
    assert isinstance(unknown, str) and "unknown until the gate reads" in unknown and "CloudWatch" in unknown
    with pytest.raises(MixError, match="rewrite"):
        team_slots(["a", "b", "c", "d"], {"a": 1, "rewrite": 2}, concurrency=1, max_loras=3)
    with pytest.raises(MixError, match="not a non-negative number"):
        slots_for_mix({"a": -1.0, "b": 2.0}, concurrency=1, max_loras=1)
    with pytest.raises(MixError, match="no adapter"):
        slots_for_mix({"a": 0.0, "base": 0.0}, concurrency=1, max_loras=1)


ADAPTER_NAMES = ["triage", "summarise", "reply", "extract", "translate"]


def _adapter_team(folder: Path, mix: str | None) -> Path:
    tail = "adapters:\n" + "".join(f"  - name: {n}\n    s3_uri: s3://acme-ad/{n}.tar.gz\n" for n in ADAPTER_NAMES)
    tail += "gate:\n  benchmark:\n    concurrency: [1, 16]\n" + (f"    adapter_mix: {mix}\n" if mix else "")
    return minimal_team(folder, "qwen2.5-7b", "ml.g6e.2xlarge", "lora:\n  max_loras: 3\n", tail)


def test_plan_shows_the_slots_a_team_mix_needs(tmp_path, capsys):
    assert main(["plan", str(CONFIG / "teams" / "support.yaml")]) == 0
    assert "LoRA slots: 3 adapters, max_loras 3: every adapter resident" in capsys.readouterr().out
    mix = {"base": 2, "triage": 10, "summarise": 5, "reply": 3, "extract": 1, "translate": 0.5}
    team = _adapter_team(tmp_path, json.dumps(mix))
    assert main(["plan", str(team), "--json"]) == 0
    residency = json.loads(capsys.readouterr().out)["adapter_residency"]
    expected = slots_for_mix(mix, concurrency=16, max_loras=3)
    assert residency["slots_needed"] == expected.slots_needed == 5
    assert residency["swap_share"] == pytest.approx(swap_share(mix, 3), abs=1e-4) and residency["swap_share"] > 0.1
    assert residency["message"].startswith("mix needs 5 slots for 95 % resident at concurrency 16; max_loras is 3")


def test_plan_says_the_mix_is_unknown_until_the_gate_reads_cloudwatch(tmp_path, capsys):
    assert main(["plan", str(_adapter_team(tmp_path, None))]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "LoRA slots: 5 adapters, max_loras 3: the slots the mix needs are unknown until the gate reads" in out
