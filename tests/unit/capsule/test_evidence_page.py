"""A chunk's page is shown beside its source in the capsule and read back from it."""

from __future__ import annotations

from capsa.capsule import Evidence
from capsa.capsule.render import parse_evidence, render_evidence
from capsa.guard.shapes import page_of

CHUNK = Evidence(chunk_id="c1", content="EUR 230.", document_id="policy.pdf",
                 title="Travel Policy", page="12")


def test_evidence_renders_its_page_as_an_attribute() -> None:
    assert render_evidence([CHUNK]).splitlines()[0] == (
        '<chunk id="c1" title="Travel Policy" page="12">')


def test_evidence_page_round_trips_through_the_rendered_text() -> None:
    assert parse_evidence(render_evidence([CHUNK])) == (
        CHUNK.model_copy(update={"document_id": "Travel Policy"}),)


def test_page_of_prefers_the_label_and_never_reads_a_zero_based_page() -> None:
    assert [page_of(m) for m in ({"page_label": "iv", "page_number": 4}, {"page_number": 3},
                                 {"page": 0}, {"page_number": True}, {})] == [
        "iv", "3", None, None, None]
