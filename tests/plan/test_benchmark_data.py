"""The published-vLLM comparison data loads and the script runs end to end."""

from tests.fixtures.benchmark_scripts import benchmark_script


def test_benchmark_cases_run_and_cite_sources():
    module = benchmark_script("planner_vs_published")
    results = module.run()
    assert len(results) >= 5
    assert all(predicted > 0 for _, _, predicted, _ in results)
    import csv

    rows = list(csv.DictReader(module.DATA.open(encoding="utf-8")))
    assert all(row["source_url"].startswith("https://github.com/") for row in rows)
