# Over 400 lines: the one table of surfaces (most of the file is its rows, each with its source) and its lookups.
"""What each container and service really publishes to optigate: THE one table of surfaces (routes, streams, metric
series, capture, runtime API), each row with its source (a file at a commit, a botocore member, a documentation page)
or `assumed` with why.

An emulator proves only the reading it was written from; three reviews in a row found the offline gate passing on a
surface the real service does not have (vLLM's `/metrics` served by an emulated LMI container). So:

- the emulators read this table: they serve a surface only where a row says the emulated container or service
  publishes it (`optigate.emulator.sagemaker_runtime`), and a test fails when they emulate a surface without a row;
- the gate reads it through the plan: which evidence each container gives of speculative decoding's acceptance
  (`acceptance_evidence`), and which server series the gate may read at all (`server_series`);
- a decision never rests on an `assumed` surface alone (`Resolved.assumed`): such evidence is INCONCLUSIVE.

A container is a family at a version (`Container`): LMI's DJL version and, where the SageMaker SDK's image table
names one, its LMI release (`0.36.0-lmi27.0.0-cu130`: DJL 0.36.0, release 27). A row holds for a range of versions
(and releases); past the newest version its source was read at (`read_through`), it is extrapolated, hence assumed.

Sources read for this table (2026-12): deepjavalibrary/djl-serving at tag v0.36.0
(1e53e50dcbf307c765cf7cc0bb97d23d7c02fb76), 0.36.0-lmi27-dlc (7e13b081383bd46293d4b49ab214d4757b1effd5),
0.35.0-dlc (637866135ee775bc1533808e843d7c32c8a2c179), 0.33.0-dlc (8b3b685b65f0ba1d89ce471c0f1cefc09dc36da2),
0.29.0-dlc (58eb48b69ff89e157067feedee01ace6fc8a9ee8) and master (d21927c4a692335fba62a87cc430a5fc00c5f790, still
version 0.36.0); vLLM files at the commits named per row; botocore 1.44.18; the AWS pages named per row.
`optigate schema --docs docs` writes docs/container-surfaces.md from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Version = tuple[int, ...]
Kind = Literal["api", "stream", "route", "metric", "capture"]

#: Publishers: optigate's container families (optigate.config.models.ContainerFamily), SageMaker's own vLLM DLC
#: (not a family optigate deploys; listed so the table says who does publish vLLM's series) and the services.
LMI, TRTLLM, NEURONX = "lmi", "lmi-trtllm", "lmi-neuronx"
VLLM_DLC = "vllm-dlc"
RUNTIME = "sagemaker-runtime"
CAPTURE = "sagemaker-data-capture"
OBSERVABILITY = "sagemaker-detailed-observability"
FAMILIES = (LMI, TRTLLM, NEURONX)
CONTAINERS = (*FAMILIES, VLLM_DLC)
SERVICES = (RUNTIME, CAPTURE, OBSERVABILITY)

DJL = "github:deepjavalibrary/djl-serving"
PY = "engines/python/setup/djl_python"
V036 = "1e53e50dcbf307c765cf7cc0bb97d23d7c02fb76"  # tag v0.36.0 (= branch 0.36.0-lmi22-dlc)
LMI27 = "7e13b081383bd46293d4b49ab214d4757b1effd5"  # branch 0.36.0-lmi27-dlc
MASTER = "d21927c4a692335fba62a87cc430a5fc00c5f790"  # master, __version__ 0.36.0
V033 = "8b3b685b65f0ba1d89ce471c0f1cefc09dc36da2"  # branch 0.33.0-dlc
V029 = "58eb48b69ff89e157067feedee01ace6fc8a9ee8"  # branch 0.29.0-dlc
IRH = "serving/src/main/java/ai/djl/serving/http/InferenceRequestHandler.java"
VLLM = "github:vllm-project/vllm"
VLLM_CHAT = f"{VLLM} vllm/entrypoints/openai/chat_completion/serving.py@006c49d485f9ca479bf4989cbb694d0ac02f44b5"
VLLM_LOGGERS = "github:vllm-project/vllm vllm/v1/metrics/loggers.py@005a810bc40faa25b8870fbc8559c3462581eee3"
VLLM_SPEC = "github:vllm-project/vllm vllm/v1/spec_decode/metrics.py@016a8587edb04ae53c913a1da9355a07dc0ca4ae"
RUNTIME_MODEL = "botocore 1.44.18 botocore/data/sagemaker-runtime/2017-05-13/service-2.json"

#: The newest LMI sources were read at: DJL 0.36.0 (master still reports it). LMI 0.38.0 (the SDK's 0.38.0-lmi29.0.0)
#: has no public source: what it publishes is extrapolated from master, i.e. assumed.
LMI_READ_THROUGH: Version = (0, 36, 0)

# Names of the surfaces optigate's code asks for (the rows below use the same strings).
INVOKE = "InvokeEndpoint"
INVOKE_STREAM = "InvokeEndpointWithResponseStream"
METRICS_ROUTE = "GET /metrics"
#: The stream surface that says one streamed chunk is one engine step's tokens (the client's acceptance evidence).
STEP_PER_CHUNK = "tokens of one engine step per chunk"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_DRAFTED = "vllm:spec_decode_num_draft_tokens"
STORED_UNDER_NAME = "vLLM series stored under their exposition names"


def stream_name(engine_mode: str, schema: str) -> str:
    """The stream surface of an engine mode answering a request schema: `async messages`, `rolling-batch inputs`."""
    return f"{engine_mode} {schema}"


@dataclass(frozen=True)
class Surface:
    """One thing a container or service publishes (`present`) or, as sourced, does not (`present` False).

    :param since: first version the row holds for (DJL's for LMI families); `until`: last, None for every later one.
    :param releases: (first, last) LMI release the row holds for (`lmi27`), None for every release.
    :param read_through: the newest version the source was read at; newer versions are extrapolated (assumed).
    """

    publisher: str
    kind: Kind
    name: str
    present: bool
    what: str
    source: str | None = None
    assumed: str | None = None
    since: Version = (0,)
    until: Version | None = None
    releases: tuple[int, int | None] | None = None
    read_through: Version | None = None

    def __post_init__(self) -> None:
        if (self.source is None) == (self.assumed is None):
            raise ValueError(f"{self.publisher} {self.kind} {self.name!r}: give a source or say why it is assumed")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.publisher, self.kind, self.name


@dataclass(frozen=True)
class Container:
    """A container family at a version (and LMI release, where the image tag names one)."""

    family: str
    version: Version
    release: int | None = None

    @classmethod
    def from_tag(cls, family: str, tag: str) -> Container:
        """From an LMI DLC tag (`0.36.0-lmi27.0.0-cu130`, `0.33.0-tensorrtllm0.21.0-cu128`) or a bare version."""
        match = re.match(r"^(\d+(?:\.\d+)+)(?:-lmi(\d+))?", tag)
        if match is None:
            raise ValueError(f"{family} image tag {tag!r} names no version")
        release = int(match.group(2)) if match.group(2) else None
        return cls(family, tuple(int(part) for part in match.group(1).split(".")), release)

    @classmethod
    def from_image(cls, image: str) -> Container:
        """From an image URI of one of optigate's families (the repository `djl-inference`, the tag says which)."""
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        family = TRTLLM if "tensorrtllm" in tag else NEURONX if "neuronx" in tag else LMI
        return cls.from_tag(family, tag)

    def __str__(self) -> str:
        version = ".".join(str(part) for part in self.version)
        return f"{self.family} {version}" + (f" (lmi{self.release})" if self.release is not None else "")


@dataclass(frozen=True)
class Resolved:
    """A row as it holds for one container: `assumed` says why it is not sourced for it (None: sourced)."""

    surface: Surface
    assumed: str | None

    @property
    def present(self) -> bool:
        return self.surface.present

    @property
    def cited(self) -> str:
        return self.surface.source or f"assumed: {self.assumed}"


_ALL_LMI: Version = (0, 29, 0)

TABLE: tuple[Surface, ...] = (
    # ------------------------------------------------------------------ the runtime API (what a client calls)
    Surface(
        RUNTIME, "api", INVOKE, True,
        "POST /endpoints/{EndpointName}/invocations; errors with X-Amzn-ErrorType (ModelError 424, "
        "ThrottlingException 429, ServiceUnavailable 503, ValidationError 400)",
        source=f"{RUNTIME_MODEL}: InvokeEndpoint http.requestUri and its error shapes",
    ),
    Surface(
        RUNTIME, "api", INVOKE_STREAM, True,
        "POST /endpoints/{EndpointName}/invocations-response-stream answered as application/vnd.amazon.eventstream: "
        "PayloadPart events carrying the container's bytes, ModelStreamError / InternalStreamFailure mid-stream; "
        "headers X-Amzn-SageMaker-Target-Variant and X-Amzn-SageMaker-Inference-Component select the server",
        source=f"{RUNTIME_MODEL}: InvokeEndpointWithResponseStream, ResponseStream (eventstream), PayloadPart; "
        "the frame format: botocore.eventstream (decoded with it in optigate.bench.core.eventstream)",
    ),
    # ------------------------------------------------------------------ LMI (djl-serving with vLLM)
    Surface(
        LMI, "route", METRICS_ROUTE, False,
        "no Prometheus route on port 8080: the inference routes are /ping, /invocations, /predictions, "
        "/v1/chat/completions, /models/*/invoke; any other path is 404 (InvalidRequestHandler). vLLM's series "
        "live in the Python worker's registry and nothing exports them; DJL's own exporter is GET /server/metrics, "
        "400 unless SERVING_PROMETHEUS=true (no LMI image sets it) and DJL's Java series only, never vllm:*",
        source=f"{DJL} {IRH}@{V036} (route regex), http/InvalidRequestHandler.java@{V036}, "
        f"prometheus/src/main/java/ai/djl/prometheus/MetricExporter.java@{V036}; {PY} (no prometheus, /metrics or "
        f"do_log_stats) at {V036} and {MASTER}",
        since=_ALL_LMI, read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", stream_name("async", "messages"), True,
        "vLLM's chat.completion.chunk objects, the SSE `data: ` prefix stripped, one JSON line each "
        "(application/jsonlines); the first chunk carries the role and no token; stream_options is honoured: "
        "include_usage adds a usage-only chunk, continuous_usage_stats the cumulative usage on every chunk; vLLM's "
        "[DONE] becomes an empty line",
        source=f"{DJL} {PY}/lmi_vllm/request_response_utils.py@{V036} (vllm_stream_output_formatter), "
        f"{PY}/lmi_vllm/vllm_async_service.py@{V036}, {PY}/async_utils.py@{V036}; {VLLM_CHAT}",
        since=(0, 33, 0), read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", stream_name("async", "inputs"), True,
        "LMI's schema mapped to a completion: one TGI-style line per engine step (index, token{id, text, logprob}, "
        "generated_text and details on the last); under speculative decoding `text` holds the step's tokens but id "
        "and logprob only the first's; no usage; the usage chunk and [DONE] become empty lines",
        source=f"{DJL} {PY}/lmi_vllm/request_response_utils.py@{V036} (convert_completion_chunk_response_to_lmi_"
        "schema)",
        since=(0, 33, 0), read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", stream_name("rolling-batch", "inputs"), True,
        'one {"token": {"id", "text", "log_prob"}} line per token (application/jsonlines); the last adds '
        "generated_text and, when asked, details; no usage; the lines of one engine step go out in one write",
        source=f"{DJL} {PY}/output_formatter.py@{V036} (_jsonlines_output_formatter), {PY}/request.py@{V036}",
        since=_ALL_LMI, read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", stream_name("rolling-batch", "messages"), True,
        "one chat.completion.chunk JSON line per token (application/jsonlines), no usage (stream_options ignored), "
        "no [DONE]",
        source=f"{DJL} {PY}/chat_completions/vllm_chat_utils.py@{V036}, {PY}/output_formatter.py@{V036} "
        "(_jsonlines_chat_output_formatter)",
        since=(0, 33, 0), until=(0, 36, 0), releases=(15, 25),
    ),
    Surface(
        LMI, "stream", stream_name("rolling-batch", "messages") + " (server-sent events)", True,
        "text/event-stream: `data: {chat.completion.chunk}` per token, then `data: [DONE]`; no usage",
        source=f"{DJL} commit 76158f2a; {PY}/chat_completions/vllm_chat_utils.py@{LMI27}, "
        f"{PY}/output_formatter.py@{LMI27} (sse_chat)",
        since=(0, 36, 0), releases=(26, None), read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", STEP_PER_CHUNK + ": async", True,
        "async mode sends one chat.completion.chunk per engine step with the step's text (delta_text = output.text; "
        "previous_num_tokens += len(output.token_ids)): under speculative decoding a chunk carries 1 + the drafts "
        "accepted that step, and the continuous usage says how many",
        source=f"{VLLM_CHAT} (chat_completion_stream_generator); {DJL} {PY}/lmi_vllm/vllm_async_service.py@{V036}",
        since=(0, 33, 0), read_through=LMI_READ_THROUGH,
    ),
    Surface(
        LMI, "stream", STEP_PER_CHUNK + ": rolling-batch", False,
        "the rolling batch writes one line per token: a step's accepted drafts become several lines of one write, "
        "and whether SageMaker keeps one PayloadPart per write is not documented (the API promises 'a series of "
        "parts'), so a client cannot tell a step's tokens",
        source=f"{DJL} {PY}/rolling_batch/rolling_batch_vllm_utils.py@{V036}, {PY}/request.py@{V036} "
        f"(get_next_token); {RUNTIME_MODEL}: PayloadPart",
        since=_ALL_LMI, read_through=LMI_READ_THROUGH,
    ),
    # ------------------------------------------------------------------ LMI with TensorRT-LLM, LMI on Neuron
    Surface(
        TRTLLM, "route", METRICS_ROUTE, False,
        "the same djl-serving front end as LMI: no /metrics route on port 8080",
        source=f"{DJL} {IRH}@{V033} (route regex)",
        since=(0, 25, 0), read_through=(0, 33, 0),
    ),
    Surface(
        TRTLLM, "stream", stream_name("rolling-batch", "inputs"), True,
        'one {"token": {...}} line per generated token (application/jsonlines)',
        source=f"{DJL} {PY}/rolling_batch/trtllm_rolling_batch.py@3d6ad832ae37c38875e22f052b815b7e7a74d46d, "
        f"{PY}/output_formatter.py@{V033}",
        since=(0, 25, 0), read_through=(0, 33, 0),
    ),
    Surface(
        NEURONX, "route", METRICS_ROUTE, False,
        "the same djl-serving front end as LMI: no /metrics route on port 8080",
        source=f"{DJL} {IRH}@{V029} (route regex)",
        since=(0, 22, 0), read_through=(0, 29, 0),
    ),
    Surface(
        NEURONX, "stream", stream_name("rolling-batch", "inputs"), True,
        'one {"token": {...}} line per token; speculated tokens become lines of the same step',
        source=f"{DJL} {PY}/transformers_neuronx_scheduler/optimum_neuron_scheduler.py@{V029}, "
        f"{PY}/rolling_batch/neuron_rolling_batch.py@{V029}",
        since=(0, 22, 0), read_through=(0, 29, 0),
    ),
    # ------------------------------------------------------------------ SageMaker's vLLM DLC (not an optigate family)
    Surface(
        VLLM_DLC, "route", METRICS_ROUTE, True,
        "vLLM's own OpenAI server on port 8080 serves /metrics in Prometheus' text format",
        source="github:aws/deep-learning-containers vllm/build_artifacts/sagemaker_entrypoint.sh"
        "@cb035a10da530bd891c3eabcdb9d4cb204b9fd7c (vllm.entrypoints.openai.api_server --port 8080); "
        "github:vllm-project/vllm vllm/entrypoints/serve/instrumentator/__init__.py"
        "@00c7e582932bf29ad5a450053f98d31f9e7b623c",
    ),
    Surface(
        VLLM_DLC, "metric", SPEC_ACCEPTED, True,
        "counter (exposed as ..._total): draft tokens accepted; with vllm:spec_decode_num_draft_tokens the "
        "acceptance rate, registered only with a speculative config",
        source=VLLM_SPEC,
    ),
    Surface(
        VLLM_DLC, "metric", SPEC_DRAFTED, True, "counter (exposed as ..._total): draft tokens proposed",
        source=VLLM_SPEC,
    ),
    Surface(
        VLLM_DLC, "metric", "vllm:kv_cache_usage_perc", True, "gauge: KV-cache usage, 1 = full",
        source=VLLM_LOGGERS,
    ),
    # ------------------------------------------------------------------ services around the containers
    Surface(
        OBSERVABILITY, "metric", "framework series scraped", True,
        "MetricsConfig.EnableDetailedObservability scrapes 'inference framework containers (vLLM, SGLang)' (and "
        "DCGM, node exporters) and stores OTel metrics in CloudWatch, read with PromQL (QueryMetrics)",
        source="https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html; "
        "botocore 1.44.18 sagemaker MetricsConfig",
    ),
    Surface(
        OBSERVABILITY, "metric", STORED_UNDER_NAME, True,
        "a scraped vLLM series is stored under its exposition name (counters with or without _total)",
        assumed="AWS's metrics reference lists its dashboard aggregates (InputTokensPerSecond, ...), not the stored "
        "name of a scraped series; only a live GetSeries (/api/v1/series) shows it",
    ),
    Surface(
        CAPTURE, "capture", INVOKE, True,
        "one JSON Lines record per sampled invocation (captureData.endpointInput/endpointOutput with data, "
        "encoding JSON|BASE64|CSV, observedContentType; eventMetadata.eventId, inferenceTime) under "
        "<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/",
        source="https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html",
    ),
    Surface(
        CAPTURE, "capture", INVOKE_STREAM, True,
        "a streamed invocation captured like InvokeEndpoint's (its input)",
        assumed="the data-capture pages name no streamed invocation, and InvokeEndpointWithResponseStream's "
        "InferenceId text, unlike InvokeEndpoint's, says nothing of capture (botocore 1.44.18); rule OG423 says so",
    ),
)  # fmt: skip


def _applies(row: Surface, container: Container) -> bool:
    if row.publisher != container.family or container.version < row.since:
        return False
    if row.until is not None and container.version > row.until:
        return False
    if row.releases is not None and container.release is not None:
        first, last = row.releases
        return container.release >= first and (last is None or container.release <= last)
    return True


def resolve(publisher: Container | str, kind: Kind, name: str) -> Resolved | None:
    """The row for `name` of `kind` a container (or a service, by name) publishes, None when the table has none."""
    for row in TABLE:
        if isinstance(publisher, str):
            if row.key == (publisher, kind, name):
                return Resolved(row, row.assumed)
        elif row.kind == kind and row.name == name and _applies(row, publisher):
            assumed = row.assumed
            if assumed is None and row.read_through is not None and publisher.version > row.read_through:
                newest = ".".join(str(part) for part in row.read_through)
                assumed = f"read through {newest}; {publisher} has no public source, so this is extrapolated"
            return Resolved(row, assumed)
    return None


def publishes(publisher: Container | str, kind: Kind, name: str) -> bool:
    """Whether a row says `publisher` publishes the surface (sourced or assumed)."""
    found = resolve(publisher, kind, name)
    return found is not None and found.present


@dataclass(frozen=True)
class Evidence:
    """What a speculative candidate's acceptance is read from: `client` (tokens per streamed chunk against the
    baseline's), `server` (the container's own counters, stored by detailed observability), or None (nothing:
    the check is INCONCLUSIVE), with the rows it rests on and why not when there are none."""

    source: Literal["client", "server"] | None
    rests_on: tuple[Resolved, ...]
    why_none: str | None = None

    @property
    def assumed(self) -> str | None:
        """Why the evidence rests on assumed rows alone (then it decides nothing), None when a row is sourced."""
        if not self.rests_on or any(row.assumed is None for row in self.rests_on):
            return None
        return "; ".join(f"{row.surface.name}: {row.assumed}" for row in self.rests_on)

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "rests_on": [{"surface": row.surface.name, "cited": row.cited} for row in self.rests_on],
            "assumed": self.assumed,
            "why_none": self.why_none,
        }


def acceptance_evidence(container: Container, engine_mode: str) -> Evidence:
    """Where the gate reads a speculative candidate's acceptance on `container` in `engine_mode`: the server's
    counters where the container exports them and detailed observability scrapes it; else the stream, where one
    chunk is one engine step; else nothing (INCONCLUSIVE, fail closed)."""
    accepted = resolve(container, "metric", SPEC_ACCEPTED)
    if accepted is not None and accepted.present and publishes(container, "route", METRICS_ROUTE):
        scraped = resolve(OBSERVABILITY, "metric", "framework series scraped")
        stored = resolve(OBSERVABILITY, "metric", STORED_UNDER_NAME)
        rows = tuple(row for row in (accepted, scraped, stored) if row is not None)
        return Evidence("server", rows)
    step = resolve(container, "stream", f"{STEP_PER_CHUNK}: {engine_mode}")
    if step is not None and step.present:
        return Evidence("client", (step,))
    why = (
        f"{container} in {engine_mode} mode publishes no acceptance: {step.surface.what} ({step.cited})"
        if step is not None
        else f"the surface table has no row saying how {container} in {engine_mode} mode streams a step's tokens"
    )
    return Evidence(None, (), why)


def server_series(container: Container) -> frozenset[str]:
    """The Prometheus series of `container` the gate may read from CloudWatch (none for optigate's families)."""
    if not publishes(container, "route", METRICS_ROUTE):
        return frozenset()
    return frozenset(row.name for row in TABLE if row.kind == "metric" and publishes(container, "metric", row.name))


SURFACES_PAGE = "container-surfaces.md"


def reference_markdown() -> str:
    """docs/container-surfaces.md: every row, by publisher."""
    lines = [
        "# What the containers and services publish",
        "",
        "Generated from `optigate/serving/surfaces.py` by `optigate schema --docs docs`; do not edit by hand.",
        "",
        "Every surface optigate's emulators serve and its gate reads, per publisher, with its source (a file at a",
        "commit, a botocore member, a documentation page) or `assumed` and why. The emulators serve a surface only",
        "where a row says it is present; a decision never rests on an assumed row alone. A row holds from `since`",
        "(to `until`); past `read through` (the newest version its source was read at) it is extrapolated, hence",
        "assumed for that version.",
        "",
    ]
    for publisher in (*CONTAINERS, *SERVICES):
        rows = [row for row in TABLE if row.publisher == publisher]
        lines += [
            f"## {publisher}",
            "",
            "| kind | surface | present | versions | what | source |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows:
            versions = _versions(row)
            cited = row.source or f"**assumed**: {row.assumed}"
            lines.append(
                f"| {row.kind} | {row.name} | {'yes' if row.present else '**no**'} | {versions} | "
                f"{_cell(row.what)} | {_cell(cited)} |"
            )
        lines.append("")
    return "\n".join(lines)


def _dotted(version: Version) -> str:
    return ".".join(str(part) for part in version)


def _versions(row: Surface) -> str:
    if row.publisher in SERVICES or row.since == (0,):
        return "all"
    text = f"{_dotted(row.since)}" + (f" to {_dotted(row.until)}" if row.until else " on")
    if row.releases is not None:
        first, last = row.releases
        text += f", lmi{first}" + (f" to lmi{last}" if last is not None else " on")
    if row.read_through is not None:
        text += f" (read through {_dotted(row.read_through)})"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
