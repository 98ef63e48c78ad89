"""The tiers' 3-second limit (tests/tiers.py): a seeded test over it fails the run it is in, a fixture it asks for is
not its time, and the rule that decides fails a test only when nothing on the machine explains its time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.tiers import LIMIT_SECONDS, LIMIT_SWITCH, Measured, Span, held_to_limit, over_limit

# The first test spins at least 4 s of CPU, and on a busy machine on until the limit's own reading is over it, so the
# check cannot put it down to the neighbours (the rule's every branch is tested below, without a clock). The second
# spends as long in a module fixture it asks for in its body, which is not its own time.
SEEDED = """
import pytest

from tests.tiers import Measured, clock, load_per_cpu, over_limit


def _spin():
    start = clock()
    while True:
        measured = Measured(clock() - start, load_per_cpu())
        if measured.span.cpu >= 4 and over_limit(measured) or measured.span.wall > 120:
            return


def test_four_seconds_outside_the_slow_tier():
    _spin()


@pytest.fixture(scope="module")
def costly():
    _spin()


def test_a_costly_fixture_asked_for_in_the_body(request):
    request.getfixturevalue("costly")
"""


@pytest.mark.slow  # two seeded 4-second tests in a pytest of their own
def test_a_seeded_four_second_test_outside_the_slow_tier_fails_its_run(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_SWITCH, "off")  # this test waits for the seeded ones: the limit would fail it too
    (tmp_path / "test_seeded.py").write_text(SEEDED)
    env = {name: value for name, value in os.environ.items() if name != LIMIT_SWITCH}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.tiers", "-p", "no:cacheprovider", "test_seeded.py"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout, result.stdout
    assert "FAILED test_seeded.py::test_four_seconds_outside_the_slow_tier" in result.stdout
    assert f"over the {LIMIT_SECONDS:g} s limit outside the slow tier" in result.stdout


def _measured(wall, cpu, stall=None, steal=0.0, load=0.5) -> Measured:
    return Measured(Span(wall=wall, cpu=cpu, stall=stall, steal=steal), load_per_cpu=load)


def test_a_test_over_the_limit_on_a_quiet_machine_fails_whether_it_computes_or_waits():
    assert over_limit(_measured(wall=4, cpu=3.9))  # computes (any kernel)
    assert over_limit(_measured(wall=4, cpu=0.2, stall=0.1))  # waits, and no task waited for a CPU meanwhile
    assert not over_limit(_measured(wall=2.9, cpu=2.9, stall=0.0))


def test_the_machines_load_stretches_the_limit():
    assert not over_limit(_measured(wall=5.9, cpu=5.9, load=2.0))  # twice as busy as it has CPUs: 6 s
    assert over_limit(_measured(wall=6.1, cpu=5.9, load=2.0))


def test_a_machine_that_just_became_busy_fails_no_test_its_neighbours_slowed():
    # the load average has not caught up yet; the test computed 2 s and waited for a CPU or its subprocess the rest
    assert not over_limit(_measured(wall=8, cpu=2, load=0.8))  # no pressure information: its CPU time decides
    assert not over_limit(_measured(wall=8, cpu=2, stall=6.5, load=0.8))  # tasks waited 6.5 s of its 8
    # a hypervisor gave the CPUs to other machines for 2 s of the 4
    assert not over_limit(_measured(wall=4, cpu=3.5, stall=0.0, steal=2.0))


def test_the_slow_tier_is_never_held_to_the_limit_and_the_fuzz_only_in_the_fast_tier():
    assert held_to_limit(set(), fast=False) and held_to_limit({"parametrize"}, fast=True)
    assert not held_to_limit({"slow"}, fast=False) and not held_to_limit({"slow", "fast_tier"}, fast=True)
    assert not held_to_limit({"fuzz"}, fast=False) and held_to_limit({"fuzz"}, fast=True)
