"""`bench compare --label`: the report names both sides by their labels (default: endpoint, then file)."""

from __future__ import annotations

import json

from optigate.cli import main
from tests.fixtures.synthetic_runs import report_side


def test_compare_cli_names_the_sides_by_label(tmp_path):
    sides = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    for name, data in zip(("base", "cand"), sides, strict=True):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    argv = ["bench", "compare", str(tmp_path / "base.json"), str(tmp_path / "cand.json"), "--report"]
    main([*argv, str(tmp_path / "named"), "--label", "fp16 live", "fp8 candidate"])
    page = (tmp_path / "named" / "index.html").read_text()
    assert "<h1>optigate bench compare: fp8 candidate vs fp16 live</h1>" in page
    assert "<dt>baseline: fp16 live</dt>" in page and "<dt>candidate: fp8 candidate</dt>" in page
    main([*argv, str(tmp_path / "default")])  # both record endpoint chat-dev: told apart by file name
    page = (tmp_path / "default" / "index.html").read_text()
    assert "<dt>baseline: chat-dev (base.json)</dt>" in page and "127.0.0.1:8081</dt>" not in page
