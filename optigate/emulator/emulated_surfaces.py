"""What an emulated server may publish: the surfaces of optigate.serving.surfaces for the container it stands for
(its `container` setting). The emulator serves a route or a stream only where a row says that container publishes
it; ROUTE_SURFACES names the surface each of its routes emulates, and a test fails for a route or stream without a
row (tests/emulator/test_emulated_surfaces.py)."""

from __future__ import annotations

from typing import Any

from optigate.bench.core.payloads import DEFAULT_SCHEMA
from optigate.emulator.config import Behaviour, emulated_container
from optigate.emulator.container_metrics import render
from optigate.serving import surfaces

#: The surface (publisher, kind, name) each route emulates; CONTAINER is the emulated server's container. Routes under
#: /_emulator/ are the emulator's own (its clock trace, its state), no surface of AWS's.
CONTAINER = "container"
ROUTE_SURFACES: dict[str, tuple[str, surfaces.Kind, str]] = {
    "POST /endpoints/{name}/invocations-response-stream": (surfaces.RUNTIME, "api", surfaces.INVOKE_STREAM),
    "POST /endpoints/{name}/invocations": (surfaces.RUNTIME, "api", surfaces.INVOKE),
    "GET /metrics": (CONTAINER, "route", surfaces.METRICS_ROUTE),
}
#: The server-sent-events form of a stream (LMI's rolling-batch chat from lmi26: a row of its own).
SSE = " (server-sent events)"


def serves_metrics(behaviour: Behaviour) -> bool:
    """Whether the server's container serves `GET /metrics` (no LMI container does: djl-serving answers 404)."""
    return surfaces.publishes(emulated_container(behaviour.container), "route", surfaces.METRICS_ROUTE)


def metrics_page(servers: dict[tuple[str, str], Any], endpoint: str | None, *, own: bool) -> str | None:
    """The Prometheus text of the emulated servers (by (endpoint, variant); `endpoint` narrows) whose containers
    serve `GET /metrics`, None when none does; `own`: the emulator's own state route, every server whatever its
    container publishes."""
    found = [
        server.metrics
        for (name, _), server in servers.items()
        if endpoint in (None, name) and (own or serves_metrics(server.behaviour))
    ]
    return render(found) if found or own else None


def stream_form(behaviour: Behaviour, body: dict[str, Any]) -> bool | str:
    """How the server's container streams the answer to `body` in its engine mode: False as JSON lines, True as
    server-sent events, or why it publishes no such stream (a string: the emulator refuses the request)."""
    container = emulated_container(behaviour.container)
    schema = "messages" if "messages" in body else DEFAULT_SCHEMA.get(behaviour.engine_mode, "inputs")
    name = surfaces.stream_name(behaviour.engine_mode, schema)
    if surfaces.publishes(container, "stream", name):
        return False
    if surfaces.publishes(container, "stream", name + SSE):
        return True
    return (
        f"emulator: no row of optigate.serving.surfaces says {container} streams `{name}` "
        "(docs/container-surfaces.md), so it is not emulated"
    )
