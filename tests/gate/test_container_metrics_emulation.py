"""The rehearsal's CloudWatch QueryMetrics: figures from an emulator's Prometheus exposition in vLLM's names, an
empty vector for what it does not publish (as CloudWatch answers a series it lacks)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from optigate.bench.server_metrics import queries, read_window
from optigate.rehearse.cloudwatch import figures_from_exposition, prometheus_samples

EXPOSITION = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="0",model_name="m"} 8.0
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 400.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 120.0
vllm:request_queue_time_seconds_bucket{engine="0",le="0.5",model_name="m"} 90.0
vllm:request_queue_time_seconds_bucket{engine="0",le="1.0",model_name="m"} 100.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 20.0
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 100.0
"""


def test_exposition_to_figures():
    assert prometheus_samples(EXPOSITION)["vllm:kv_cache_usage_perc"] == [({"engine": "0", "model_name": "m"}, 0.75)]
    figures = figures_from_exposition(EXPOSITION)
    assert figures["spec_acceptance"] == pytest.approx(0.3)
    assert figures["prefix_cache_hit_rate"] == pytest.approx(0.25)
    assert figures["queue_time_mean_s"] == pytest.approx(0.2)
    assert figures["queue_time_p99_s"] == pytest.approx(0.5 + 0.5 * (99 - 90) / 10)
    assert figures["preemptions"] == 2.0 and figures["waiting_max"] == 3.0 and figures["kv_cache_usage_max"] == 0.75
    assert figures_from_exposition("")["spec_acceptance"] is None


@pytest.fixture
def emulator():
    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):
            body = EXPOSITION.encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_emulated_query_metrics_answers_the_gates_queries_by_endpoint(emulator):
    from optigate.rehearse.cloudwatch import emulated_query_metrics

    transport = emulated_query_metrics(lambda name: emulator if name == "cand" else None)
    served = read_window(transport, "cand", 0.0, 60.0)
    assert served["spec_acceptance"] == pytest.approx(0.3) and served["missing"] == {}
    unserved = read_window(transport, "nobody", 0.0, 60.0)
    assert set(unserved["missing"].values()) == {"no series in the window"}
    assert transport("up", 1.0)["data"]["result"] == []
    assert len(queries("cand", 0.0, 60.0)) == len(served) - 4  # figures + endpoint, start, end, missing
