"""The benchmark report and its plots: one self-contained page that opens with the verdict, the
workload and both sides' labels; colours pair a level's curves, line styles tell the sides apart;
axes from the data's bulk with outliers noted; throughput ticks at the levels with interval bars."""

from __future__ import annotations

import base64
import copy
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from optigate.bench import plots
from optigate.bench.compare import compare_results
from optigate.bench.html_report import bench_verdict, compare_verdict, default_label, side_labels, write_report
from tests.fixtures.synthetic_runs import REPORT_LOAD, bench, report_side, synthetic_run

LEVELS = (1, 4)
LOAD = REPORT_LOAD
OUTLIER_MS = 50_000.0


def _side(gain: float, seed: int, port: int) -> dict:
    return report_side(gain, seed, port, LEVELS)


@pytest.fixture(scope="module")
def sides() -> tuple[dict, dict]:
    return _side(0.0, 10, 8081), _side(0.3, 20, 8082)


@pytest.fixture(scope="module")
def compared(sides, tmp_path_factory) -> tuple[Path, str]:
    baseline, candidate = sides
    folder = tmp_path_factory.mktemp("report")
    labels = side_labels([("runs/baseline.json", baseline)], [("runs/candidate.json", candidate)])
    index = write_report([(labels[0], baseline), (labels[1], candidate)], folder, compare_results(baseline, candidate))
    return folder, index.read_text()


class _Page(HTMLParser):
    """Every tag in order with its attributes, and the text of each element by tag and class."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.texts: list[tuple[str, str, str]] = []  # (tag, class, text)
        self._open: list[tuple[str, str]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag not in ("img", "meta", "br"):
            self._open.append((tag, attributes.get("class") or ""))

    def handle_endtag(self, tag):
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if data.strip() and self._open:
            tag, css = self._open[-1]
            self.texts.append((tag, css, data.strip()))

    def first(self, tag: str) -> int:
        return next(i for i, (name, _) in enumerate(self.tags) if name == tag)


def test_the_page_is_one_file_with_its_plots_embedded(compared):
    folder, page = compared
    parsed = _Page(page)
    sources = [attrs["src"] for tag, attrs in parsed.tags if "src" in attrs]
    assert len(sources) == 4 and all(src.startswith("data:image/png;base64,") for src in sources)
    assert not [attrs for _, attrs in parsed.tags if "href" in attrs]
    assert not [tag for tag, _ in parsed.tags if tag in ("link", "script", "iframe", "object")]
    assert "http" not in page.replace("http://127.0.0.1:808", "")  # only the targets' recorded URLs
    # The embedded images are the PNGs written beside the page.
    for src, name in zip(sources, plots.PLOT_NAMES, strict=True):
        assert base64.b64decode(src.split(",", 1)[1]) == (folder / name).read_bytes()


def test_the_page_opens_with_the_verdict_the_workload_and_both_labels(compared):
    _, page = compared
    parsed = _Page(page)
    body = [(tag, css, text) for tag, css, text in parsed.texts if tag not in ("title", "style")]
    (h1, banner, *_rest) = body
    assert h1[0] == "h1" and "chat-dev (candidate.json) vs chat-dev (baseline.json)" in h1[2]
    assert banner[1].startswith("banner") and banner[2].startswith("BETTER: ") and "none worse" in banner[2]
    shape = {text for tag, _, text in body[2:8] if tag in ("dt", "dd")}
    assert (
        "1024 prompt → 32 output tokens · closed loop · concurrency 1, 4 · 120 requests per level · inputs schema"
        in (shape)
    )
    assert {"baseline: chat-dev (baseline.json)", "candidate: chat-dev (candidate.json)"} <= shape
    # The plots come before the long tables, which are collapsed.
    first_img, first_details = parsed.first("img"), parsed.first("details")
    assert first_img < first_details
    delta_table = page.index("all ", page.index("<details><summary>Candidate vs baseline"))
    assert page.index("<img") < delta_table
    assert "{'" not in page and "endpoint_name" not in page  # no dict repr of the target


def test_labels_come_from_the_label_or_the_endpoint_never_a_port():
    data = {"target": {"endpoint_name": "chat-dev", "endpoint_url": "http://127.0.0.1:8081"}}
    assert default_label(data, "/tmp/8081.json") == "chat-dev"
    assert default_label({**data, "label": "fp8 candidate"}) == "fp8 candidate"
    assert default_label({"target": {"endpoint_name": "chat", "target_variant": "shadow"}}) == "chat (shadow)"
    assert default_label({}, "/tmp/old-run.json") == "old-run"
    assert side_labels([("a/base.json", data)], [("b/cand.json", data)]) == (
        "chat-dev (base.json)",
        "chat-dev (cand.json)",
    )
    assert side_labels([("a.json", data)], [("b.json", data)], ["fp16", "fp8"]) == ("fp16", "fp8")


def test_a_levels_curves_share_a_colour_and_the_sides_differ_by_line_style(sides):
    figure = plots.figures([("baseline: a", sides[0]), ("candidate: b", sides[1])])["ttft_cdf.png"]
    [axis] = figure.axes
    lines = {line.get_gid(): line for line in axis.get_lines() if line.get_gid()}
    assert set(lines) == {f"side{s}:c{c}" for s in (0, 1) for c in LEVELS}
    for level in LEVELS:
        base, cand = lines[f"side0:c{level}"], lines[f"side1:c{level}"]
        assert base.get_color() == cand.get_color()
        assert (base.get_linestyle(), cand.get_linestyle()) == ("-", "--")
    assert lines["side0:c1"].get_color() != lines["side0:c4"].get_color()
    # The legend sits outside the axes: a figure legend, none on the axes.
    assert axis.get_legend() is None and figure.legends
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert labels[:2] == ["c=1", "c=4"] and "baseline: a" in labels and "candidate: b" in labels


def _with_outlier(data: dict) -> dict:
    planted = copy.deepcopy(data)
    planted["runs"][1]["samples"]["ttft_ms"].append(OUTLIER_MS)
    return planted


def test_the_axis_spans_the_bulk_and_notes_a_planted_outlier(sides):
    baseline = _with_outlier(sides[0])
    figure = plots.cdf_figure(plots.sides_of([("a", baseline), ("b", sides[1])]), "ttft_ms", "TTFT", "ms")
    [axis] = figure.axes
    bulk_max = max(
        max(run["samples"]["ttft_ms"]) for data in sides for run in data["runs"]
    )  # the largest value without the outlier
    _, high = axis.get_xlim()
    assert bulk_max <= high < 2 * bulk_max
    notes = [text.get_text() for text in axis.texts]
    assert notes == [f"1 point beyond {plots.quantity(high)} not shown (largest 50.0 s)"]


def test_without_an_outlier_everything_is_shown_and_nothing_noted(sides):
    figure = plots.cdf_figure(plots.sides_of([("a", sides[0]), ("b", sides[1])]), "ttft_ms", "TTFT", "ms")
    [axis] = figure.axes
    largest = max(max(run["samples"]["ttft_ms"]) for data in sides for run in data["runs"])
    assert axis.get_xlim()[1] == pytest.approx(largest) and not axis.texts


def test_bulk_rule():
    rng = np.random.default_rng(0)
    values = rng.lognormal(5, 0.25, 1000)
    assert plots.bulk(values).hidden == 0
    stretched = plots.bulk(np.concatenate([values, [9e4, 1e5, 2e5]]))
    assert stretched.hidden == 3 and stretched.upper < 2 * values.max() and stretched.largest == 2e5
    assert "3 points beyond" in stretched.note()


def test_throughput_ticks_are_the_levels_with_interval_bars(sides):
    figure = plots.throughput_figure(plots.sides_of([("a", sides[0]), ("b", sides[1])]))
    [axis] = figure.axes
    assert list(axis.get_xticks()) == list(LEVELS)
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["1", "4"]
    bars = {container.get_label(): container for container in axis.containers}
    assert set(bars) == {f"side{s}:c{c}" for s in (0, 1) for c in LEVELS}
    # Each bar is the interval `bench compare`'s bootstrap gives that side and level.
    for side, data in enumerate(sides):
        for index, level in enumerate(LEVELS):
            point, low, high = plots.throughput_interval([data["runs"][index]])
            assert low < point < high
            segment = bars[f"side{side}:c{level}"].lines[2][0].get_segments()[0]
            assert segment[0][1] == pytest.approx(low) and segment[1][1] == pytest.approx(high)


def test_a_tiny_range_is_not_drawn_as_a_trend(sides):
    flat = copy.deepcopy(sides[0])
    for index, run in enumerate(flat["runs"]):
        run["tpot_ms"]["p50"] = 15.0 + 0.02 * index  # 0.02 ms apart
        run["tpot_ms"]["p99"] = 15.01 + 0.02 * index
    figure = plots.latency_throughput_figure(plots.sides_of([("a", flat)]))
    [axis] = figure.axes
    low, high = axis.get_ylim()
    assert high - low >= 0.2 * 15.0 and low < 15.0 and high > 15.03
    assert plots.span(15.0, 15.02) == pytest.approx((13.26, 16.76), abs=0.01)
    assert plots.span(10.0, 200.0)[0] == 0.0  # never below zero for values that are not


def test_bench_and_compare_verdicts(sides):
    data = sides[0]
    assert bench_verdict(data)[1].startswith("COMPLETED: all 240 requests succeeded at c=1, 4")
    failing = bench(synthetic_run(1, requests=20, all_fail=True))
    assert bench_verdict(failing) == ("rejected", "FAILED: every one of 20 requests failed (ModelError 20)")
    some = bench(synthetic_run(1, requests=20, error_every=10))
    assert bench_verdict(some)[1].startswith("COMPLETED WITH ERRORS: 2 of 20 requests failed (ModelError 2)")
    assert bench_verdict({**data, "interrupted": True})[1].startswith("INTERRUPTED")
    deltas = compare_results(sides[0], sides[1])
    assert compare_verdict(deltas)[1].startswith("BETTER")
    assert compare_verdict(compare_results(sides[1], sides[0]))[1].startswith("WORSE")  # worse outweighs better
    assert compare_verdict(compare_results(sides[0], sides[0]))[1].startswith("NO CHANGE SHOWN")


def test_a_single_run_report(sides, tmp_path):
    index = write_report([("chat-dev", sides[0])], tmp_path)
    parsed = _Page(index.read_text())
    body = [(tag, css, text) for tag, css, text in parsed.texts if tag not in ("title", "style")]
    assert body[0] == ("h1", "", "optigate benchmark: chat-dev")
    assert body[1][2].startswith("COMPLETED: all 240 requests succeeded")
    assert ("dt", "", "workload") in body and parsed.first("img") < parsed.first("details")
