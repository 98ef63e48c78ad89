"""tests/fixtures/once.py: a value is made by the first asker of a run and read back by the others; a failure to make
it fails every asker."""

from __future__ import annotations

import pytest

from tests.fixtures.once import once, run_directory


def test_the_second_asker_reads_the_first_ones_value_without_making_it(tmp_path_factory):
    made = []

    def make() -> dict:
        made.append(1)
        return {"templates": ["a", "b"]}

    first = once(tmp_path_factory, "test_once-value", make)
    second = once(tmp_path_factory, "test_once-value", make)
    assert made == [1]
    assert first == second == {"templates": ["a", "b"]}
    assert (run_directory(tmp_path_factory) / "once" / "test_once-value.pickle").exists()


def test_a_failure_to_make_it_fails_every_asker(tmp_path_factory):
    def broken() -> None:
        raise RuntimeError("synth failed")

    with pytest.raises(RuntimeError, match="synth failed"):
        once(tmp_path_factory, "test_once-broken", broken)
    with pytest.raises(
        pytest.fail.Exception,
        match=r"making it failed earlier in this run \(in this worker or another\): RuntimeError: synth failed",
    ):
        once(tmp_path_factory, "test_once-broken", lambda: "made again")
