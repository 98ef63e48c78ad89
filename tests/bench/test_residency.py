"""The adapter residency probe (`optigate bench residency`) against a loopback server with LRU LoRA slots."""

from __future__ import annotations

import json

import pytest

from optigate.bench.core.client import Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.residency import (
    CANNOT_TELL,
    EVICTED,
    MIN_PAIRS,
    NO_DIFFERENCE,
    RESIDENT,
    SWAP_COST,
    ResidencySpec,
    Trial,
    judge,
    plan_rounds,
    run_probe,
)
from optigate.cli import main
from tests.fixtures.lru_server import LruServer, serving

ADAPTERS = {"triage": "triage-ic", "summarise": "summarise-ic", "reply": "reply-ic", "extract": "extract-ic"}


def _probe(server: LruServer, **spec_options):
    spec = ResidencySpec(
        adapters=ADAPTERS, **{"max_loras": 2, "base_component": "base-ic", "rounds": 24, **spec_options}
    )
    with serving(server) as url:
        trials = run_loop(run_probe(Target("support-dev", endpoint_url=url), spec, timeout=10))
    return spec, trials


def _server(load_ms: float, **options) -> LruServer:
    return LruServer(list(ADAPTERS.values()), max_loras=2, load_ms=load_ms, **options)


@pytest.mark.slow
def test_the_measured_request_is_evicted_in_one_trial_and_resident_in_the_other():
    """Under LRU with max_loras slots, the probe's sequences do what they claim: read from the server's record."""
    server = _server(load_ms=0)
    spec, trials = _probe(server)
    assert all(trial.error is None for trial in trials) and len(trials) == 2 * spec.rounds
    measured = []
    position = 0
    for _, adapter, condition in plan_rounds(spec):
        sequence = spec.trial(adapter, condition)
        position += len(sequence)
        measured.append((condition, server.trace[position - 1]))
    assert position == len(server.trace)
    assert {resident for condition, (_, resident) in measured if condition == EVICTED} == {False}
    assert {resident for condition, (_, resident) in measured if condition == RESIDENT} == {True}
    # both conditions of every round, each in both orders somewhere (interleaved, not blocked)
    orders = {tuple(c for n, _, c in plan_rounds(spec) if n == number) for number in range(spec.rounds)}
    assert orders == {(RESIDENT, EVICTED), (EVICTED, RESIDENT)}


@pytest.mark.slow
def test_a_known_swap_cost_is_found_with_an_interval_around_it():
    _, trials = _probe(_server(load_ms=40))
    result = judge(trials)
    assert result.verdict == SWAP_COST, result.reason
    assert result.pairs == 24 and result.failed_rounds == 0
    # the server's 40 ms load, plus what the loopback and both processes add on a busy machine
    assert 25 < result.swap_ms["low"] <= result.swap_ms["point"] <= result.swap_ms["high"] < 60
    assert 35 < result.swap_ms["point"] < 50
    pairs = {}
    for trial in trials:
        pairs.setdefault(trial.round, {})[trial.condition] = trial.ttft_ms
    differences = sorted(pair[EVICTED] - pair[RESIDENT] for pair in pairs.values())
    assert result.swap_ms["point"] == pytest.approx((differences[11] + differences[12]) / 2)  # the median of 24
    assert set(result.per_adapter_swap_ms) == set(ADAPTERS)


@pytest.mark.slow
def test_no_swap_cost_is_no_difference_never_a_cost():
    """A/A: the same server without a load cost; the probe bounds the cost instead of reporting one."""
    _, trials = _probe(_server(load_ms=0))
    result = judge(trials)
    assert result.verdict == NO_DIFFERENCE, result.reason
    assert result.swap_ms["low"] <= 0 <= result.swap_ms["high"]
    assert abs(result.swap_ms["point"]) < 3
    assert "at most" in result.reason


@pytest.mark.slow
def test_failed_requests_make_it_cannot_tell():
    _, trials = _probe(_server(load_ms=40, fail_every=7))
    result = judge(trials)
    assert result.verdict == CANNOT_TELL
    assert result.errors["ThrottlingException"] > 0 and result.failed_rounds > 0.1 * 24
    assert result.swap_ms is None


def test_too_few_rounds_cannot_tell_and_evicted_faster_cannot_tell():
    few = [
        Trial(n, "triage", c, ttft_ms=10.0 + (50 if c == EVICTED else 0)) for n in range(5) for c in (RESIDENT, EVICTED)
    ]
    assert judge(few).verdict == CANNOT_TELL and f"at least {MIN_PAIRS}" in judge(few).reason
    faster = [
        Trial(n, "triage", c, ttft_ms=(10.0 if c == EVICTED else 30.0) + n % 3)
        for n in range(MIN_PAIRS)
        for c in (RESIDENT, EVICTED)
    ]
    result = judge(faster)
    assert result.verdict == CANNOT_TELL and result.swap_ms["high"] < 0
    assert judge([]).verdict == CANNOT_TELL


def test_the_spec_refuses_what_cannot_evict():
    with pytest.raises(ValueError, match="every adapter stays resident"):
        ResidencySpec(adapters={"a": "a-ic", "b": "b-ic"}, max_loras=2)
    with pytest.raises(ValueError, match="at least 20"):
        ResidencySpec(adapters=ADAPTERS, max_loras=2, rounds=5)
    spec = ResidencySpec(adapters=ADAPTERS, max_loras=2, base_component="base-ic")
    # max_loras others evict; one more when there is one
    assert spec.evictors("summarise") == ["reply", "extract", "triage"]
    assert spec.trial("reply", EVICTED) == ["reply-ic", "extract-ic", "triage-ic", "summarise-ic", "reply-ic"]
    assert spec.trial("reply", RESIDENT) == ["reply-ic", "base-ic", "base-ic", "base-ic", "reply-ic"]
    assert ResidencySpec(adapters=ADAPTERS, max_loras=3).trial("reply", RESIDENT) == ["reply-ic", "reply-ic"]


def _cli(url: str, *extra: str) -> int:
    return main(
        [
            "bench",
            "residency",
            "--endpoint",
            "support-dev",
            "--endpoint-url",
            url,
            "--adapters",
            ",".join(f"{name}={component}" for name, component in ADAPTERS.items()),
            "--base-component",
            "base-ic",
            "--rounds",
            "20",
            *extra,
        ]
    )


@pytest.mark.slow
def test_cli_reports_the_swap_cost_and_writes_every_trial(tmp_path, capsys):
    out = tmp_path / "residency.json"
    with serving(_server(load_ms=40)) as url:
        assert _cli(url, "--max-loras", "2", "--json", str(out)) == 0
    data = json.loads(out.read_text())
    assert data["verdict"] == SWAP_COST and data["pairs"] == 20 and len(data["trials"]) == 40
    assert 35 < data["swap_ms"]["point"] < 50
    assert "longer for its first token" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_exits_3_when_it_cannot_tell_and_2_on_usage(capsys):
    with serving(_server(load_ms=40, fail_every=5)) as url:
        assert _cli(url, "--max-loras", "2") == 3
        assert "cannot tell" in capsys.readouterr().err
        assert _cli(url, "--max-loras", "4") == 2  # four adapters fit in four slots: nothing to evict
        assert "every adapter stays resident" in capsys.readouterr().err
        assert _cli(url) == 2
        assert "--max-loras is required" in capsys.readouterr().err
