"""The published-vLLM comparison data loads and the script runs end to end."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "planner_vs_published.py"


def test_benchmark_cases_run_and_cite_sources():
    spec = importlib.util.spec_from_file_location("planner_vs_published", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.run()
    assert len(results) >= 5
    assert all(predicted > 0 for _, _, predicted, _ in results)
    import csv

    rows = list(csv.DictReader(module.DATA.open(encoding="utf-8")))
    assert all(row["source_url"].startswith("https://github.com/") for row in rows)
