"""The emulator's container metrics: what LMI's vLLM serves on `GET /metrics`, in Prometheus' text format, per
emulated server (an endpoint's variant or inference component), so the server-metrics path can be tested on loopback.

Names, types and meanings as vLLM defines them (vllm-project/vllm, vllm/v1/metrics/loggers.py,
PrometheusStatLogger: vllm:num_requests_running / vllm:num_requests_waiting gauges, vllm:kv_cache_usage_perc gauge
"1 means 100 percent usage", counters vllm:num_preemptions, vllm:prompt_tokens, vllm:generation_tokens,
vllm:prefix_cache_queries / vllm:prefix_cache_hits "in terms of number of ... tokens", histogram
vllm:request_queue_time_seconds "time spent in WAITING phase" with its request_latency_buckets; and
vllm/v1/spec_decode/metrics.py @ ee4ceaae, SpecDecodingProm: vllm:spec_decode_num_drafts,
vllm:spec_decode_num_draft_tokens, vllm:spec_decode_num_accepted_tokens). prometheus_client exposes a counter
named X as `X_total`, so the scraped names are e.g. `vllm:num_preemptions_total`. Labels: vLLM's `model_name`
(here the endpoint) and `engine` ("0"), plus `variant` (the variant or component) to tell the emulated servers apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# vllm/v1/metrics/loggers.py, request_latency_buckets (seconds).
QUEUE_TIME_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip

# (name as scraped, type, help), in the order served.
GAUGES = (
    ("vllm:num_requests_running", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
)
COUNTERS = (
    ("vllm:num_preemptions_total", "Cumulative number of preemption from the engine."),
    ("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
    ("vllm:generation_tokens_total", "Number of generation tokens processed."),
    ("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
    ("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
    ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts."),
    ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens."),
    ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens."),
)
QUEUE_TIME = "vllm:request_queue_time_seconds"


@dataclass
class ServerMetrics:
    """One emulated server's figures; the emulator updates them as requests wait, run and finish."""

    endpoint: str
    variant: str
    kv_cache_tokens: int | None = None
    speculative: bool = False
    running: int = 0
    waiting: int = 0
    kv_reserved: int = 0
    counters: dict[str, float] = field(default_factory=lambda: {name: 0.0 for name, _ in COUNTERS})
    queue_buckets: list[int] = field(default_factory=lambda: [0] * len(QUEUE_TIME_BUCKETS))
    queue_count: int = 0
    queue_sum: float = 0.0

    def add(self, name: str, amount: float) -> None:
        self.counters[name] += amount

    def queued(self, seconds: float) -> None:
        self.queue_count += 1
        self.queue_sum += seconds
        for index, bound in enumerate(QUEUE_TIME_BUCKETS):
            if seconds <= bound:
                self.queue_buckets[index] += 1

    def gauges(self) -> dict[str, float | None]:
        usage = None if not self.kv_cache_tokens else self.kv_reserved / self.kv_cache_tokens
        return {
            "vllm:num_requests_running": float(self.running),
            "vllm:num_requests_waiting": float(self.waiting),
            "vllm:kv_cache_usage_perc": usage,  # unknown without a KV size: not served
        }


def _labels(server: ServerMetrics, extra: str = "") -> str:
    def quoted(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    text = f'engine="0",model_name="{quoted(server.endpoint)}",variant="{quoted(server.variant)}"'
    return "{" + text + (f",{extra}" if extra else "") + "}"


def _le(bound: str) -> str:
    return f'le="{bound}"'


def _number(value: float) -> str:
    return repr(float(value))


def render(servers: list[ServerMetrics]) -> str:
    """Prometheus text exposition (format 0.0.4) of every server's metrics."""
    lines: list[str] = []
    for name, help_text in GAUGES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for server in servers:
            value = server.gauges()[name]
            if value is not None:
                lines.append(f"{name}{_labels(server)} {_number(value)}")
    for name, help_text in COUNTERS:
        speculation = name.startswith("vllm:spec_decode_")
        # prometheus_client's text format names a counter's family with its _total suffix too.
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        for server in servers:
            if speculation and not server.speculative:  # vLLM registers these only with a speculative config
                continue
            lines.append(f"{name}{_labels(server)} {_number(server.counters[name])}")
    help_text = "Histogram of time spent in WAITING phase for request."
    lines += [f"# HELP {QUEUE_TIME} {help_text}", f"# TYPE {QUEUE_TIME} histogram"]
    for server in servers:
        for bound, count in zip(QUEUE_TIME_BUCKETS, server.queue_buckets, strict=True):
            lines.append(f"{QUEUE_TIME}_bucket{_labels(server, _le(_number(bound)))} {_number(count)}")
        lines.append(f"{QUEUE_TIME}_bucket{_labels(server, _le('+Inf'))} {_number(server.queue_count)}")
        lines.append(f"{QUEUE_TIME}_count{_labels(server)} {_number(server.queue_count)}")
        lines.append(f"{QUEUE_TIME}_sum{_labels(server)} {_number(server.queue_sum)}")
    return "\n".join(lines) + "\n"
