"""The suite's two tiers and its time limit, a pytest plugin (tests/conftest.py loads it).

The full suite (`bash scripts/test.sh`, what `.ci/run` runs) runs every test, each property test at its full size.
The fast tier (`bash scripts/test.sh --fast`) leaves out the tests marked `slow` (over LIMIT_SECONDS: the executed
gates, the emulator benchmarks, the commands run in a subprocess), except those also marked `fast_tier` (an executed
happy-path gate, the checks that read every template), and runs each test marked `fuzz` at its small size
(`fuzz_settings`).

The limit: a test that is not `slow` (nor, in the full suite, `fuzz`) and whose call takes over LIMIT_SECONDS fails
with what was measured. What a session or module fixture costs is not the test's, even when the test asks for the
fixture in its body (`request.getfixturevalue`). The suite runs on shared machines, so a busy machine must never fail a
test: it fails only when what the machine's neighbours could cause does not explain the time (`over_limit`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest

#: A test outside the slow tier takes at most this long (its call, on a quiet machine).
LIMIT_SECONDS = 3.0
#: "off" turns the limit off in this process. For tests/test_tiers.py's self-test alone, which runs a seeded test
#: over the limit in a subprocess and waits for it.
LIMIT_SWITCH = "OPTIGATE_TIME_LIMIT"

_fast = False


def fast_tier() -> bool:
    """Whether this run is the fast tier (`--fast`)."""
    return _fast


def max_examples(full: int, fast: int) -> int:
    """A property test's `max_examples`: `full` in the full suite, `fast` in the fast tier."""
    return fast if _fast else full


def fuzz_settings(full: int, fast: int) -> hypothesis.settings:
    """The fuzz's hypothesis settings (a test using them is marked `fuzz`): `max_examples(full, fast)` examples,
    derandomized and without an example database (every run tries the same ones), no deadline (a shared machine's
    pauses are not a property)."""
    return hypothesis.settings(
        max_examples=max_examples(full, fast),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large],
    )


# --------------------------------------------------------------------------- the limit


@dataclass(frozen=True)
class Span:
    """What the limit reads of a stretch of time: a Clock's difference."""

    wall: float
    cpu: float  # this process (every thread) and the subprocesses it waited for, user and system
    stall: float | None  # seconds some task waited for a CPU, I/O or memory (the kernel's PSI); None where not kept
    steal: float  # seconds a hypervisor gave this machine's CPUs to other machines, per CPU

    def __sub__(self, other: Span) -> Span:
        stall = None if self.stall is None or other.stall is None else self.stall - other.stall
        return Span(self.wall - other.wall, self.cpu - other.cpu, stall, self.steal - other.steal)

    def __add__(self, other: Span) -> Span:
        stall = None if self.stall is None or other.stall is None else self.stall + other.stall
        return Span(self.wall + other.wall, self.cpu + other.cpu, stall, self.steal + other.steal)


ZERO = Span(0.0, 0.0, 0.0, 0.0)


def clock() -> Span:
    """The readings now, since an arbitrary start."""
    times = os.times()
    return Span(
        wall=time.perf_counter(),
        cpu=times.user + times.system + times.children_user + times.children_system,
        stall=_stall(),
        steal=_steal(),
    )


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load_per_cpu() -> float:
    """The 1-minute load average per CPU this process may run on."""
    return os.getloadavg()[0] / _cpus()


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _pressure_files() -> list[tuple[Path, Path]]:
    """Per resource, the PSI files that say how long some task waited for it: the machine's, and this cgroup's
    (cgroup v2, where a CPU quota's throttling shows)."""
    line = next((x for x in _read("/proc/self/cgroup").splitlines() if x.startswith("0::")), "0::/")
    group = Path("/sys/fs/cgroup", line[3:].lstrip("/"))
    return [(Path("/proc/pressure", name), group / f"{name}.pressure") for name in ("cpu", "io", "memory")]


_PRESSURE = _pressure_files()


def _some_total(text: str) -> float | None:
    """The `some` line's `total=` of a PSI file, in seconds."""
    for line in text.splitlines():
        if line.startswith("some "):
            return int(line.rpartition("total=")[2]) / 1e6
    return None


def _stall() -> float | None:
    """Seconds, over every resource, that some task waited: the larger of the machine's and the cgroup's count of
    each, summed (more than their union: only ever more lenient). None without the machine's CPU file."""
    totals = []
    for files in _PRESSURE:
        counts = [total for total in (_some_total(_read(path)) for path in files) if total is not None]
        totals.append(max(counts) if counts else None)
    if totals[0] is None:
        return None
    return sum(total for total in totals if total is not None)


def _steal() -> float:
    """Seconds of steal time (the `cpu` line of /proc/stat) per CPU, 0 where not kept."""
    fields = _read("/proc/stat").partition("\n")[0].split()
    if len(fields) < 9 or fields[0] != "cpu":
        return 0.0
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") / (os.cpu_count() or 1)


@dataclass(frozen=True)
class Measured:
    """A test's call (less the fixtures set up during it), and the machine's load at its end."""

    span: Span
    load_per_cpu: float

    @property
    def uncontended(self) -> float | None:
        """Wall time while no task waited for anything (None without PSI)."""
        return None if self.span.stall is None else max(0.0, self.span.wall - self.span.stall)


def over_limit(measured: Measured, limit: float = LIMIT_SECONDS) -> bool:
    """Whether a test took over `limit` seconds with nothing on the machine to explain it. Both must hold:

    - its wall time, less the steal, exceeds `limit` × the 1-minute load per CPU (at least 1): a test on a machine
      running twice as much as it has CPUs for may take twice as long;
    - its own work, less the steal, exceeds `limit`: its CPU time (the worker's and its waited-for subprocesses', which
      other processes do not add to), or, where the kernel keeps pressure stall information, its wall time while no
      task on the machine waited for a CPU, I/O or memory (which a neighbour cannot lengthen: that is how a test that
      waits, on an emulator or a sleep, is caught on a quiet machine).

    So a busy machine, even one that just became busy (the load average lags a minute), does not fail a test; a test
    over the limit fails on a quiet machine, and may pass on a busy one.
    """
    span = measured.span
    if span.wall - span.steal <= limit * max(1.0, measured.load_per_cpu):
        return False
    own = span.cpu if measured.uncontended is None else max(span.cpu, measured.uncontended)
    return own - span.steal > limit


def held_to_limit(markers: set[str], fast: bool) -> bool:
    """Whether a test with these markers is held to the limit in this tier."""
    return "slow" not in markers and not ("fuzz" in markers and not fast)


@dataclass
class _Call:
    """The test being called: when it started, and what fixtures set up during it took."""

    start: Span
    fixtures: Span = ZERO
    depth: int = 0  # fixtures being set up (one may ask for another: only the outermost is counted)


_call: _Call | None = None
_measured = pytest.StashKey[Measured]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: leave out the tests marked slow (not those marked fast_tier), fuzz at the small size",
    )


#: The property tests that set no `max_examples` of their own run hypothesis's default in the full suite and this
#: many in the fast tier.
FAST_TIER_EXAMPLES = 10


def pytest_configure(config: pytest.Config) -> None:
    global _fast
    _fast = bool(config.getoption("fast", default=False))
    if _fast:
        hypothesis.settings.register_profile("optigate-fast-tier", max_examples=FAST_TIER_EXAMPLES)
        hypothesis.settings.load_profile("optigate-fast-tier")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _fast:
        return
    kept, left_out = [], []
    for item in items:
        slow = item.get_closest_marker("slow") and not item.get_closest_marker("fast_tier")
        (left_out if slow else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    global _call
    _call = _Call(clock())
    try:
        return (yield)
    finally:
        call, _call = _call, None
        item.stash[_measured] = Measured(clock() - call.start - call.fixtures, load_per_cpu())


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    call = _call
    if call is None:
        return (yield)
    call.depth += 1
    start = clock() if call.depth == 1 else None
    try:
        return (yield)
    finally:
        call.depth -= 1
        if start is not None:
            call.fixtures = call.fixtures + (clock() - start)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report: pytest.TestReport = yield
    if report.when != "call" or not report.passed or os.environ.get(LIMIT_SWITCH) == "off":
        return report
    measured = item.stash.get(_measured, None)
    if measured is None or not held_to_limit({mark.name for mark in item.iter_markers()}, _fast):
        return report
    if over_limit(measured):
        span = measured.span
        uncontended = "" if measured.uncontended is None else f", {measured.uncontended:.1f} s uncontended"
        report.outcome = "failed"
        report.longrepr = (
            f"{span.wall:.1f} s ({span.cpu:.1f} s CPU{uncontended}, load {measured.load_per_cpu:.1f} per CPU): over "
            f"the {LIMIT_SECONDS:g} s limit outside the slow tier; mark it pytest.mark.slow or make it faster "
            "(tests/tiers.py)"
        )
    return report
