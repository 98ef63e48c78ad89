"""OG425: a speculative candidate whose container publishes its acceptance nowhere a source says (LMI's rolling batch;
a version newer than every source read) is said by `optigate validate` before anything is paid for."""

from __future__ import annotations

import pytest

from optigate.cli import main
from tests.conftest import edited_config


@pytest.mark.parametrize(
    "version, words",
    [
        ("0.38.0", "assumed surfaces alone (tokens of one engine step per chunk: async: read through 0.36.0"),
        ("0.34.0", "lmi 0.34.0 (lmi16) in rolling-batch mode publishes no acceptance"),
    ],
)
def test_a_speculative_candidate_the_gate_cannot_decide_is_noted(tmp_path, capsys, version, words):
    config = edited_config(tmp_path, "teams/chat.yaml", "version: 0.36.0", f"version: {version}")
    main(["validate", str(config)])
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "[OG425]" in line]
    assert line.startswith("note ") and "chat.yaml" in line and words in line and "INCONCLUSIVE" in line


def test_a_candidate_on_a_sourced_async_stream_gets_no_such_note(tmp_path, capsys):
    main(["validate", str(edited_config(tmp_path, "teams/chat.yaml", "max_batch_size: 32", "max_batch_size: 32"))])
    assert "[OG425]" not in capsys.readouterr().out
