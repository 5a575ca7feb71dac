"""`recall`: receipted chunks come back whole from the stored history."""

from __future__ import annotations

from capsa.capsule import Evidence, EvidenceLedger, recall, recallable

UUID = "3f2b8c1e-9d4a-4e7b-a6f0-2c5d8e9b1a73"


def test_recall_returns_chunks_whole_in_the_order_asked(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    result = recall(["a2", "a1"], talk.messages, talk.ledger, owned_tools={"search"})
    assert result.evidence == (make_chunk("a2"), make_chunk("a1"))
    assert result.ignored == ()


def test_recall_accepts_the_prefix_a_receipt_shows(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk(UUID), make_chunk("a2"), cite=["a2"])
    result = recall([f"{UUID[:8]}*"], talk.messages, talk.ledger, owned_tools={"search"})
    assert [e.chunk_id for e in result.evidence] == [UUID]


def test_recall_repairs_a_damaged_id_and_names_what_it_cannot_find(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk(UUID), cite=[])
    result = recall([UUID[:-1], "nope"], talk.messages, talk.ledger, owned_tools={"search"})
    assert [e.chunk_id for e in result.evidence] == [UUID]
    assert result.repaired[0].chunk_id == UUID
    assert result.ignored == ("nope",)
    assert result.text().endswith('<not-found ids="nope"/>')


def test_recall_ignores_returns_of_other_tools(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("w1"), tool="wiki")
    assert recall(["w1"], talk.messages, talk.ledger, owned_tools={"search"}).ignored == ("w1",)


def test_recallable_falls_back_on_the_ledger_for_a_shortened_history():
    chunk = Evidence(chunk_id="k1", content="kept in the ledger", document_id="d")
    ledger = (
        EvidenceLedger()
        .begin_question(0)
        .record_retrieval([chunk], tool="search")
        .record_citations(["k1"])
        .end_question(4)
    )
    assert recallable([], ledger, owned_tools={"search"}) == {"k1": chunk}
