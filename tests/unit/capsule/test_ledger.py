from __future__ import annotations

import pytest

from capsa.capsule import (
    CitationRef,
    EvidenceLedger,
    Message,
    TextPart,
    ToolCall,
    compact,
    prune_carried,
    record_messages,
)


def test_begin_question_accepts_zero_as_the_first_identity():
    ledger = EvidenceLedger().begin_question(0)
    assert (ledger.question, ledger.in_progress, ledger.first_question) == (0, True, 0)


def test_fresh_ledger_has_no_question():
    ledger = EvidenceLedger()
    assert ledger.question is None
    assert not ledger.in_progress


def test_begin_question_refuses_an_identity_that_does_not_grow():
    ledger = EvidenceLedger().begin_question(4)
    with pytest.raises(ValueError, match="already did"):
        ledger.begin_question(4)
    with pytest.raises(ValueError, match="already did"):
        ledger.begin_question(2)


def test_begin_question_refuses_to_start_inside_the_previous_question():
    ledger = EvidenceLedger().begin_question(0).end_question(6)
    with pytest.raises(ValueError, match="ended with 6 messages"):
        ledger.begin_question(5)


def test_begin_question_refuses_a_negative_identity():
    with pytest.raises(ValueError, match="message count"):
        EvidenceLedger().begin_question(-1)


def test_begin_question_keeps_the_first_question():
    ledger = EvidenceLedger().begin_question(3).end_question(7).begin_question(7)
    assert ledger.first_question == 3
    assert ledger.question == 7


def test_end_question_records_where_the_next_question_begins():
    ledger = EvidenceLedger().begin_question(0).end_question(5)
    assert not ledger.in_progress
    assert ledger.ended_at == 5


def test_end_question_refuses_a_length_below_the_question():
    with pytest.raises(ValueError, match="cannot end"):
        EvidenceLedger().begin_question(4).end_question(3)


def test_record_retrieval_refuses_before_a_question(make_chunk):
    with pytest.raises(ValueError, match="before a question began"):
        EvidenceLedger().record_retrieval([make_chunk("c1")], tool="search")


def test_record_citations_refuses_before_a_question():
    with pytest.raises(ValueError, match="before a question began"):
        EvidenceLedger().record_citations(["c1"])


def test_record_retrieval_twice_in_one_question_changes_nothing(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("c1")], tool="s")
    assert ledger.record_retrieval([make_chunk("c1")], tool="s") is ledger


def test_record_retrieval_takes_the_newer_content_and_keeps_history(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("c1")], tool="s")
    ledger = ledger.record_citations(["c1"]).end_question(3).begin_question(3)
    ledger = ledger.record_retrieval([make_chunk("c1", content="revised")], tool="s")
    entry = ledger.entry("c1")
    assert entry is not None
    assert entry.evidence.content == "revised"
    assert (entry.retrieved_in, entry.cited_in) == ((0, 3), (0,))


def test_record_citations_refuses_chunks_never_retrieved(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("c1")], tool="s")
    with pytest.raises(ValueError, match="never retrieved"):
        ledger.record_citations(["c1", "ghost"])


def test_citing_one_chunk_in_two_questions_records_both(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("c1")], tool="s")
    ledger = ledger.record_citations(["c1"]).end_question(4).begin_question(4)
    ledger = ledger.record_citations(["c1"])
    entry = ledger.entry("c1")
    assert entry is not None
    assert entry.cited_in == (0, 4)
    assert entry.retrieved_in == (0,)


def test_ledger_methods_leave_the_original_unchanged(make_chunk):
    original = EvidenceLedger().begin_question(0)
    snapshot = original.model_dump()
    original.record_retrieval([make_chunk("c1")], tool="s")
    original.end_question(2)
    original.begin_question(5)
    assert original.model_dump() == snapshot


def test_ledger_round_trips_through_json_unchanged(make_chunk):
    ledger = EvidenceLedger().begin_question(0)
    ledger = ledger.record_retrieval(
        [make_chunk("c1", title="T", uri="u", collection="hr", picture_refs=["#/pictures/0"])],
        tool="search",
    )
    ledger = ledger.record_citations(["c1"]).end_question(5).begin_question(5)
    text = ledger.to_json()
    restored = EvidenceLedger.from_json(text)
    assert restored == ledger
    assert restored.to_json() == text


def test_citable_holds_this_question_then_earlier_cited_chunks(make_chunk):
    ledger = EvidenceLedger().begin_question(0)
    ledger = ledger.record_retrieval([make_chunk("old-cited"), make_chunk("old-uncited")], tool="s")
    ledger = ledger.record_citations(["old-cited"]).end_question(4).begin_question(4)
    ledger = ledger.record_retrieval([make_chunk("new")], tool="s")
    assert ledger.citable_ids() == ("new", "old-cited")


def test_retrieved_and_cited_ids_default_to_the_current_question(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("a")], tool="s")
    ledger = ledger.record_citations(["a"]).end_question(3).begin_question(3)
    ledger = ledger.record_retrieval([make_chunk("b")], tool="s")
    assert ledger.retrieved_ids() == ("b",)
    assert ledger.retrieved_ids(0) == ("a",)
    assert ledger.cited_ids() == ()
    assert ledger.cited_ids(0) == ("a",)


def _tool_return(call_id: str, name: str | None, **fields) -> Message:
    return Message(
        role="tool", tool_call_id=call_id, tool_name=name, parts=(TextPart(text="..."),), **fields
    )


def test_record_messages_records_owned_returns_and_ignores_other_tools(make_chunk):
    history = [
        Message(role="user", parts=(TextPart(text="q"),)),
        _tool_return("t1", "search", evidence=(make_chunk("c1"),)),
        _tool_return("t2", "web", evidence=(make_chunk("w1"),)),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert ledger.retrieved_ids() == ("c1",)


def test_record_messages_finds_the_tool_name_from_the_call(make_chunk):
    history = [
        Message(role="assistant", tool_calls=(ToolCall(id="t1", name="search"),)),
        _tool_return("t1", None, evidence=(make_chunk("c1"),)),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert ledger.retrieved_ids() == ("c1",)


def test_record_messages_reads_markers_only_for_citable_ids(make_chunk):
    history = [
        _tool_return("t1", "search", evidence=(make_chunk("c1"), make_chunk("c2"))),
        Message(role="assistant", parts=(TextPart(text="See [c2] and [zz]."),)),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert ledger.cited_ids() == ("c2",)


def test_record_messages_ignores_markers_in_user_text(make_chunk):
    history = [
        _tool_return("t1", "search", evidence=(make_chunk("c1"),)),
        Message(role="user", parts=(TextPart(text="what does [c1] say?"),)),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert ledger.cited_ids() == ()


def test_record_messages_resolves_citation_refs(make_chunk):
    chunk = make_chunk("c1", content="Renata Duarte issues a litigation hold.")
    history = [
        _tool_return("t1", "search", evidence=(chunk, make_chunk("c2"))),
        _tool_return("t2", "cite", citations=(CitationRef(chunk_id="c2"),)),
        Message(
            role="assistant",
            parts=(TextPart(text="Renata Duarte."),),
            citations=(CitationRef(cited_text="Renata Duarte issues"),),
        ),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert ledger.cited_ids() == ("c1", "c2")


def test_record_messages_reads_only_the_current_question(make_chunk):
    history = [
        _tool_return("t1", "search", evidence=(make_chunk("old"),)),
        Message(role="user", parts=(TextPart(text="next"),)),
        _tool_return("t2", "search", evidence=(make_chunk("new"),)),
    ]
    ledger = record_messages(EvidenceLedger().begin_question(1), history, owned_tools={"search"})
    assert [e.evidence.chunk_id for e in ledger.entries] == ["new"]


def test_record_messages_replayed_changes_nothing(make_chunk):
    history = [
        _tool_return("t1", "search", evidence=(make_chunk("c1"),)),
        Message(role="assistant", parts=(TextPart(text="[c1]"),)),
    ]
    once = record_messages(EvidenceLedger().begin_question(0), history, owned_tools={"search"})
    assert record_messages(once, history, owned_tools={"search"}) is once


def test_record_messages_without_a_question_returns_the_ledger(make_chunk):
    ledger = EvidenceLedger()
    history = [_tool_return("t1", "search", evidence=(make_chunk("c1"),))]
    assert record_messages(ledger, history, owned_tools={"search"}) is ledger


def test_end_question_drops_chunks_no_answer_cited(make_chunk):
    ledger = EvidenceLedger().begin_question(0)
    ledger = ledger.record_retrieval([make_chunk("kept"), make_chunk("dropped")], tool="s")
    ledger = ledger.record_citations(["kept"]).end_question(4)
    assert [e.evidence.chunk_id for e in ledger.entries] == ["kept"]


def test_a_dropped_chunk_retrieved_again_is_recorded_afresh(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("c1")], tool="s")
    ledger = ledger.end_question(3).begin_question(3)
    ledger = ledger.record_retrieval([make_chunk("c1")], tool="s").record_citations(["c1"])
    entry = ledger.entry("c1")
    assert entry is not None
    assert (entry.retrieved_in, entry.cited_in) == ((3,), (3,))


def test_ledger_keys_evidence_by_tool_and_chunk_id(make_chunk):
    search = make_chunk("1", content="from search")
    wiki = make_chunk("1", content="from wiki")
    ledger = EvidenceLedger().begin_question(0)
    ledger = ledger.record_retrieval([search], tool="search").record_retrieval([wiki], tool="wiki")
    assert [e.evidence.content for e in ledger.entries] == ["from search", "from wiki"]
    assert ledger.entry("1", "wiki").evidence.content == "from wiki"
    assert ledger.citable_ids() == ("1",)
    cited = ledger.record_citations(["1"])
    assert all(e.cited_in == (0,) for e in cited.entries)


def test_ledger_records_every_question_it_saw():
    ledger = EvidenceLedger().begin_question(0).end_question(4).begin_question(4)
    assert ledger.questions == (0, 4)
    assert [ledger.question_of(i) for i in (0, 3, 4, 9)] == [0, 0, 4, 4]


def test_reanchor_keeps_the_current_question_and_carries_what_earlier_ones_cited(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("a")], tool="s")
    ledger = ledger.record_retrieval([make_chunk("u")], tool="s")  # retrieved, never cited
    ledger = ledger.record_citations(["a"]).end_question(5).begin_question(5)
    ledger = ledger.record_retrieval([make_chunk("b")], tool="s")
    moved = ledger.reanchor(1)
    assert moved.question == 1 and moved.in_progress
    assert sorted(e.evidence.chunk_id for e in moved.entries) == ["a", "b"]
    assert moved.entry("b").retrieved_in == (1,)
    assert moved.entry("a").retrieved_in == moved.entry("a").cited_in == ()
    assert moved.carried == ("a",)  # the citation survives the shortening
    assert set(moved.citable_ids()) == {"a", "b"}
    assert EvidenceLedger.from_json(moved.to_json()) == moved


def test_reanchor_between_questions_carries_citations_too(make_chunk):
    ledger = EvidenceLedger().begin_question(0).record_retrieval([make_chunk("a")], tool="s")
    ledger = ledger.record_citations(["a"]).end_question(5)
    moved = ledger.reanchor(2)
    assert moved.carried == ("a",) and moved.entry("a") is not None


def test_record_retrieval_read_back_from_text_keeps_the_fuller_record(make_chunk):
    full = make_chunk("a", picture_refs=["#/pictures/0"], title="T")
    plain = full.model_copy(update={"picture_refs": (), "document_id": "T"})
    ledger = EvidenceLedger().begin_question(0).record_retrieval([full], tool="s")
    assert ledger.record_retrieval([plain], tool="s").entry("a").evidence == full


# -- carried is bounded ------------------------------------------------------------------------


def _question(k: int, make_chunk) -> list[Message]:
    chunks = (make_chunk(f"q{k}-a"), make_chunk(f"q{k}-b"))
    call = ToolCall(id=f"s{k}", name="search", args={"query": f"q{k}"})
    return [
        Message(role="user", parts=(TextPart(text=f"Question {k}?"),)),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", tool_call_id=f"s{k}", parts=(TextPart(text="..."),), evidence=chunks),
        Message(role="assistant", parts=(TextPart(text=f"Answer {k} [q{k}-a]."),)),
    ]


def _long_chat(make_chunk, *, questions: int, keep: int):
    """Yield (history, ledger) after each question; every third one summarises all but
    the last question, as SummarizationMiddleware does."""
    history: list[Message] = []
    ledger = EvidenceLedger()
    for k in range(questions):
        ledger = ledger.begin_question(len(history))
        history += _question(k, make_chunk)
        ledger = record_messages(ledger, history, owned_tools={"search"})
        ledger = ledger.end_question(len(history))
        ledger = prune_carried(ledger, history, owned_tools={"search"}, keep=keep)
        yield history, ledger
        if k % 3 == 2:
            summary = Message(role="system", parts=(TextPart(text="Summary so far."),))
            history = [summary, *history[-4:]]
            ledger = ledger.locate([None] * len(history))


def test_prune_carried_keeps_a_long_summarised_chat_bounded(make_chunk):
    sizes = [len(ledger.carried) for _, ledger in _long_chat(make_chunk, questions=60, keep=4)]
    assert max(sizes) <= 4 + 1  # the newest four gone from the history, and one still held
    assert sizes[-1] > 0


def test_prune_carried_never_hides_a_cited_chunk_a_return_still_holds(make_chunk):
    for history, ledger in _long_chat(make_chunk, questions=30, keep=0):
        view = "\n".join(m.text for m in compact(history, ledger.begin_question(len(history)),
                                                   owned_tools={"search"}))
        held = [e for m in history if m.evidence for e in m.evidence if e.chunk_id.endswith("-a")]
        assert all(e.content in view for e in held)


def test_prune_carried_keeps_the_newest_recallable_and_drops_their_entries(make_chunk):
    chunks = [make_chunk(i) for i in ("a", "b", "c")]
    ledger = EvidenceLedger().begin_question(0).record_retrieval(chunks, tool="s")
    ledger = ledger.record_citations(["a", "b", "c"]).end_question(4).reanchor(1)
    pruned = ledger.prune_carried((), keep=1)
    assert pruned.carried == ("c",)
    assert [e.evidence.chunk_id for e in pruned.entries] == ["c"]


def test_prune_carried_refuses_a_negative_keep():
    with pytest.raises(ValueError, match="keep"):
        EvidenceLedger().prune_carried((), keep=-1)
