"""The one table of what containers and services publish (optigate.serving.surfaces): every row sourced or assumed with
why, versions resolved as the image tags name them, and the evidence the gate reads for speculative decoding."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optigate.serving import images, surfaces
from optigate.serving.surfaces import Container, Surface

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: What a source names: a file at a 40-hex commit, a botocore member, a documentation page, or a commit id.
CITED = re.compile(r"@[0-9a-f]{40}|botocore \d+\.\d+\.\d+|https://docs\.aws\.amazon\.com/|commit [0-9a-f]{8}")


def test_every_row_cites_a_file_at_a_commit_a_botocore_member_or_a_page_or_says_why_it_is_assumed():
    for row in surfaces.TABLE:
        if row.source is not None:
            assert CITED.search(row.source), (row.key, row.source)
        else:
            assert row.assumed and len(row.assumed) > 40, row.key


def test_a_row_without_a_source_or_a_reason_is_refused():
    with pytest.raises(ValueError, match="give a source or say why it is assumed"):
        Surface("lmi", "route", "GET /x", True, "x")
    with pytest.raises(ValueError, match="give a source or say why it is assumed"):
        Surface("lmi", "route", "GET /x", True, "x", source="s", assumed="a")


def test_each_publisher_names_each_surface_once_per_version_range():
    seen: dict[tuple[str, str, str], list[Surface]] = {}
    for row in surfaces.TABLE:
        seen.setdefault(row.key, []).append(row)
    assert all(len(rows) == 1 for rows in seen.values()), [k for k, v in seen.items() if len(v) > 1]


def test_a_container_is_read_from_the_image_tags_the_sdk_table_gives():
    assert Container.from_tag("lmi", "0.36.0-lmi27.0.0-cu130") == Container("lmi", (0, 36, 0), 27)
    assert Container.from_tag("lmi-trtllm", "0.33.0-tensorrtllm0.21.0-cu128") == Container("lmi-trtllm", (0, 33, 0))
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-neuronx-sdk2.19.1"
    assert Container.from_image(uri) == Container("lmi-neuronx", (0, 29, 0))
    with pytest.raises(ValueError, match="names no version"):
        Container.from_tag("lmi", "latest")


@pytest.mark.parametrize("family", surfaces.FAMILIES)
def test_no_lmi_container_of_any_version_in_the_sdk_table_serves_prometheus_metrics(family):
    """djl-serving answers GET /metrics with 404 on port 8080 (InferenceRequestHandler's route regex), whatever the
    engine: the gate may read no server series of optigate's families."""
    for version in images.known_versions(family):
        tag = images.tag_of(images.image_uri(family, version, "us-east-1"))
        container = Container.from_tag(family, tag)
        # Sourced as absent from the first version read on (0.29.0-dlc); older ones have no row: nothing either.
        assert not surfaces.publishes(container, "route", surfaces.METRICS_ROUTE), container
        assert surfaces.server_series(container) == frozenset(), container
        if container.version >= (0, 29, 0):
            assert surfaces.resolve(container, "route", surfaces.METRICS_ROUTE) is not None, container


def test_sagemakers_vllm_container_serves_the_acceptance_series_and_the_gate_may_read_them():
    vllm = Container(surfaces.VLLM_DLC, (0, 11, 0))
    assert {surfaces.SPEC_ACCEPTED, surfaces.SPEC_DRAFTED} <= surfaces.server_series(vllm)
    evidence = surfaces.acceptance_evidence(vllm, "async")
    assert evidence.source == "server"
    # The container's exporter and detailed observability's scraping are sourced; only the stored name is assumed.
    assert evidence.assumed is None
    assert any(row.assumed for row in evidence.rests_on)


def test_lmi_async_mode_shows_acceptance_only_in_its_stream_a_chunk_per_engine_step():
    chat = Container("lmi", (0, 36, 0), 27)
    evidence = surfaces.acceptance_evidence(chat, "async")
    assert evidence.source == "client" and evidence.assumed is None
    assert "engine step" in evidence.rests_on[0].surface.what and "006c49d4" in evidence.rests_on[0].cited


def test_lmi_rolling_batch_shows_no_acceptance_anywhere_so_the_gate_has_no_evidence():
    evidence = surfaces.acceptance_evidence(Container("lmi", (0, 34, 0), 16), "rolling-batch")
    assert evidence.source is None and "one line per token" in (evidence.why_none or "")


def test_a_version_newer_than_every_source_read_is_extrapolated_hence_assumed():
    newest = Container("lmi", (0, 38, 0), 29)
    evidence = surfaces.acceptance_evidence(newest, "async")
    assert evidence.source == "client"
    assert evidence.assumed is not None and "read through 0.36.0" in evidence.assumed
    read = Container("lmi", (0, 36, 0), 27)
    assert surfaces.resolve(read, "stream", "async messages").assumed is None


def test_rolling_batch_chat_streams_changed_to_server_sent_events_at_lmi26():
    name = surfaces.stream_name("rolling-batch", "messages")
    assert surfaces.publishes(Container("lmi", (0, 35, 0), 17), "stream", name)
    assert not surfaces.publishes(Container("lmi", (0, 36, 0), 27), "stream", name)
    assert surfaces.publishes(Container("lmi", (0, 36, 0), 27), "stream", name + " (server-sent events)")


def test_the_surfaces_page_is_generated_from_the_table():
    page = (DOCS / surfaces.SURFACES_PAGE).read_text()
    assert page == surfaces.reference_markdown(), "run `optigate schema --docs docs`"
    assert all(f"## {publisher}" in page for publisher in (*surfaces.CONTAINERS, *surfaces.SERVICES))
