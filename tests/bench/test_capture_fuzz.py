"""Property: any mutant of a real SageMaker capture file gives a workload or is refused in one line, never a bug (#29).

Each example changes one real capture file (tests/fixtures/captures: records replaced, removed or repeated, their
fields or request bodies changed, the file cut short or its bytes broken: `tests.fixtures.capture_mutants`) and
reads it as `optigate bench --workload FILE` does before sending anything. It must either give a workload (bad
records skipped and counted) or refuse with exit 2 and one line; never "unexpected …; this is a bug", an exception
or a hang. A mutant that touched only what the reader never reads (eventId, observedContentType, a body's
temperature...) and is read must give the unmutated file's workload shape.

`SUITE_SETTINGS`' `max_examples` examples (tests/fixtures/json_mutants.py), derandomized and without an example
database; `benchmarks/fuzz_inputs.py` runs many more (`--mutants`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given

from tests.fixtures import capture_mutants
from tests.fixtures.capture_mutants import Mutant, check_mutant, mutants, originals
from tests.fixtures.json_mutants import SUITE_SETTINGS

_WORKDIR = tempfile.TemporaryDirectory(prefix="optigate-fuzz-captures-")


@pytest.mark.fuzz
@SUITE_SETTINGS
@given(mutants())
def test_a_mutated_capture_gives_a_workload_or_is_refused_in_one_line_never_a_bug(mutant: Mutant):
    outcome = check_mutant(_WORKDIR.name, mutant)
    assert outcome.kind in ("read", "refused"), f"{outcome.kind}: {outcome.detail}\n{mutant}"
    if outcome.kind == "refused":
        assert "\n" not in outcome.detail and outcome.detail.startswith("✗ --workload "), outcome.detail


def _changed(source: str, change) -> bytes:
    records = [json.loads(line) for line in originals()[source].splitlines() if line.strip()]
    change(records)
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def test_the_checker_reports_a_bug_a_changed_workload_and_a_hang(monkeypatch):
    """The property above can fail: each of its failures, seeded, is reported as such."""
    from optigate.bench.core import workload

    workdir = Path(_WORKDIR.name)
    source = "emulator-lmi.jsonl"
    unchanged = Mutant(source, originals()[source], ("unchanged",), summary_only=True)
    assert check_mutant(workdir, unchanged).kind == "read"

    def rename_events(records):
        for record in records:
            record["eventMetadata"]["eventId"] = "renamed"
            record["captureData"]["endpointInput"]["mode"] = 7

    summary = Mutant(source, _changed(source, rename_events), ("eventId, mode",), summary_only=True)
    assert check_mutant(workdir, summary).kind == "read"

    def longer_outputs(records):
        record = records[0]["captureData"]["endpointInput"]
        body = json.loads(record["data"])
        body["parameters"]["max_new_tokens"] = 4000
        record["data"] = json.dumps(body)

    claimed = Mutant(source, _changed(source, longer_outputs), ("max_new_tokens, claimed a summary",), True)
    assert check_mutant(workdir, claimed).kind == "verdict_changed", "a longer output is another workload"

    empty = Mutant(source, b"", ("cut at byte 0",), summary_only=False)
    refused = check_mutant(workdir, empty)
    assert refused.kind == "refused" and "no readable capture record" in refused.detail

    def crash(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(workload, "from_capture", crash)
    assert check_mutant(workdir, unchanged).kind == "unexpected"
    monkeypatch.undo()

    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(workload, "from_capture", spin)
    monkeypatch.setattr(capture_mutants, "HANG_SECONDS", 0.3)
    assert check_mutant(workdir, unchanged).kind == "slow"
