from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from capsa.budget import Budget, Passage, pack

from .conftest import HOTEL, TRAINS, make_passage


def test_passage_requires_a_non_empty_id() -> None:
    with pytest.raises(ValidationError):
        Passage(id="", text="x")


def test_passage_is_frozen_and_gets_its_own_metadata() -> None:
    first, second = Passage(id="a", text="x"), Passage(id="b", text="y")
    assert first.metadata == {} and first.metadata is not second.metadata
    with pytest.raises(ValidationError):
        first.text = "changed"  # type: ignore[misc]


def test_passage_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Passage(id="a", text="x", author="nope")  # type: ignore[call-arg]


@pytest.mark.parametrize("settings", [
    {"max_tokens": 0},
    {"max_tokens": -5},
    {"max_tokens": 10, "max_items": 0},
    {"max_tokens": 10, "attachment_share": 1.5},
    {"max_tokens": 10, "shape": "poem"},
])
def test_budget_rejects_impossible_settings_at_construction(settings: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - pydantic's message names the field
        Budget(**settings)  # type: ignore[arg-type]


def test_budget_defaults_to_passages_and_a_seventy_percent_attachment_share() -> None:
    budget = Budget(max_tokens=100)
    assert (budget.shape, budget.attachment_share, budget.max_items) == ("passages", 0.7, None)


def test_packet_dropped_lists_the_receipts_that_kept_nothing() -> None:
    packet = pack("hotel", [make_passage(HOTEL, id="a"), make_passage("  ", id="b")],
                  Budget(max_tokens=500))
    assert [(r.passage_id, r.dropped) for r in packet.dropped] == [("b", "empty")]


def test_packet_render_returns_the_rendered_text() -> None:
    packet = pack("hotel", [make_passage(HOTEL)], Budget(max_tokens=500))
    assert packet.render() == packet.rendered and packet.render().endswith("</context>")


def test_packet_provenance_names_each_kept_passage_and_its_spans() -> None:
    passages = [make_passage(TRAINS, id="t", source="t.pdf"), make_passage(HOTEL, id="h")]
    packet = pack("hotel cap", passages, Budget(max_tokens=60))
    provenance = packet.provenance()
    assert [entry["id"] for entry in provenance] == [p.id for p in packet.passages]
    for entry, passage in zip(provenance, packet.passages, strict=True):
        assert all(passage.text[start:end] in packet.texts[packet.passages.index(passage)]
                   for start, end in entry["spans"])
        assert entry["group"] == "retrieved" and entry["source"] == passage.source


def test_packet_as_dict_is_json_ready_and_includes_the_rendered_text() -> None:
    packet = pack("hotel", [make_passage(HOTEL)], Budget(max_tokens=40))
    data = json.loads(json.dumps(packet.as_dict()))
    assert data["rendered"] == packet.render()
    assert data["receipts"][0]["passage_id"] == "p1"


def test_receipt_is_whole_only_when_every_sentence_is_kept() -> None:
    packet = pack("hotel cap", [make_passage(HOTEL)], Budget(max_tokens=45))
    receipt = packet.receipts[0]
    assert not receipt.whole and receipt.dropped is None
    assert receipt.detail is not None and receipt.detail.startswith("kept ")
