"""The gate's report.html: self-contained (plots embedded), and read top-down: the verdict, the
workload and both sides, why it was rejected, the plots, then the checks and figures."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

import pytest

from optigate.bench.html_report import plot_pngs
from optigate.gate import GateInputs, decide, render_html
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, synthetic_run

WORKLOAD = {**THRESHOLDS, "concurrency": [1, 4], "blocks": 2}


def _side(gain: float, seed: int, errors: int = 0) -> dict:
    runs = [
        {**synthetic_run(c, itl_ms=itl_for_gain(gain), seed=seed + 10 * block + c, error_every=errors), "block": block}
        for block in range(2)
        for c in (1, 4)
    ]
    return bench(*runs)


@pytest.fixture(scope="module")
def rejected() -> tuple[str, dict[str, bytes]]:
    baseline, candidate = _side(0.0, 1), _side(0.3, 2, errors=20)
    thresholds = {k: v for k, v in WORKLOAD.items() if k != "blocks"}
    verdict = decide(
        GateInputs(
            team="chat",
            environment="dev",
            change={"quantization": "fp8"},
            thresholds=thresholds,
            baseline_benchmark=baseline,
            candidate_benchmark=candidate,
            evaluation=PASS,
        )
    )
    assert verdict.outcome == "REJECTED"
    pngs = plot_pngs([("baseline", baseline), ("candidate", candidate)])
    return render_html(verdict, list(pngs.items()), WORKLOAD), pngs


class _Tags(HTMLParser):
    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.texts: list[tuple[str, str]] = []
        self._open: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("img", "meta", "br"):
            self._open.append(tag)

    def handle_endtag(self, tag):
        while self._open and self._open.pop() != tag:
            pass

    def handle_data(self, data):
        if data.strip() and self._open and self._open[-1] not in ("style", "title"):
            self.texts.append((self._open[-1], data.strip()))


def test_the_gate_page_embeds_its_plots_and_references_nothing_else(rejected):
    page, pngs = rejected
    tags = _Tags(page).tags
    sources = [attrs["src"] for _, attrs in tags if "src" in attrs]
    assert len(sources) == 4 and all(src.startswith("data:image/png;base64,") for src in sources)
    assert [base64.b64decode(src.split(",", 1)[1]) for src in sources] == list(pngs.values())
    assert not [attrs for _, attrs in tags if "href" in attrs] and "http" not in page


def test_the_gate_page_opens_with_verdict_workload_and_sides(rejected):
    page, _ = rejected
    texts = _Tags(page).texts
    assert texts[0] == ("h1", "optigate gate: chat / dev")
    assert texts[1][0] == "p" and texts[1][1].startswith("REJECTED chat/dev: ")
    terms, values = [t for tag, t in texts[2:8] if tag == "dt"], [t for tag, t in texts[2:8] if tag == "dd"]
    shape = dict(zip(terms, values, strict=True))
    assert shape["workload"] == (
        "1024 prompt → 256 output tokens · closed loop, concurrency 1, 4 · 240 requests per side and level · "
        "2 interleaved blocks a side (A B A B …)"
    )
    assert shape["baseline"].startswith("chat/dev as deployed")
    assert shape["candidate"] == "chat/dev with the change: quantization fp8"
    # Why, then the plots, then the checks table.
    assert page.index("Why it was rejected") < page.index("<img") < page.index("<h2>Checks</h2>")


def test_plot_names_without_bytes_are_listed_not_linked(rejected):
    baseline = _side(0.0, 1)
    verdict = decide(GateInputs(team="t", environment="e", baseline_benchmark=baseline, candidate_benchmark=baseline))
    page = render_html(verdict, ["ttft_cdf.png"])
    assert "<img" not in page and "Plots stored beside this report: ttft_cdf.png." in page
    assert "workload</dt><dd>closed loop, concurrency" in page  # no gate settings given: what the verdict knows


def test_a_captured_workload_is_described_by_its_shape_never_its_text():
    baseline = _side(0.0, 1)
    traffic = {
        "requests": 240,
        "kind": "replay",
        "source": "s3://capture/chat/",
        "prompt_tokens": {"p50": 310, "p90": 1200, "p99": 3900, "max": 4100},
        "max_new_tokens": {"p50": 128, "p90": 512, "p99": 1024, "max": 1024},
        "sessions": 0,
        "duration_s": 300.0,
        "mean_rate_per_s": 0.797,
        "shared_prefix_share": 0.4,
    }
    verdict = decide(
        GateInputs(
            team="t", environment="e", baseline_benchmark=baseline, candidate_benchmark=baseline, traffic=traffic
        )
    )
    assert verdict.to_dict()["traffic"] == traffic
    page = render_html(verdict)
    assert (
        "replay of 240 captured requests (s3://capture/chat/): prompt tokens p50/p90/p99 310/1200/3900, output "
        "tokens 128/512/1024, recorded over 300 s at 0.797/s · open loop on the recorded schedule"
    ) in page
    assert "closed loop" not in page


def test_a_new_adapter_versions_base_check_is_in_the_report_unknown_with_why():
    """The stager's result reaches the report: a base recorded as a local path is unknown (not refused) and says why."""
    from optigate.gate.report import render_json
    from optigate.gate.report_file import parse_gate_report

    baseline = _side(0.0, 1)
    checked = {
        "reply": {
            "uri": "s3://adapters/support/reply-v3.tar.gz",
            "bytes": 1024,
            "rank": 16,
            "lora_alpha": 32,
            "base_model": "/opt/ml/input/data/model",
            "base_model_check": "unknown",
            "base_model_why": "base_model_name_or_path '/opt/ml/input/data/model' is not a Hugging Face id",
            "architecture_checked": ["adapter_model.safetensors"],
        },
        "triage": {"uri": "s3://adapters/support/triage-v4.tar.gz", "rank": 8, "base_model_check": "same"},
    }
    verdict = decide(
        GateInputs(
            team="t", environment="e", baseline_benchmark=baseline, candidate_benchmark=baseline, adapter_check=checked
        )
    )
    assert verdict.to_dict()["adapter_check"] == checked
    assert parse_gate_report(render_json(verdict).encode(), "report.json")["adapter_check"] == checked
    page = render_html(verdict)
    assert "<h2>New adapter versions</h2>" in page
    assert (
        '<span class="unsure">unknown</span> <span class="detail">base_model_name_or_path '
        "&#x27;/opt/ml/input/data/model&#x27; is not a Hugging Face id</span>"
    ) in page
    assert "<td>adapter_model.safetensors</td>" in page and "<td>nothing to compare</td>" in page
    assert "New adapter versions" not in render_html(
        decide(GateInputs(team="t", environment="e", baseline_benchmark=baseline, candidate_benchmark=baseline))
    )
