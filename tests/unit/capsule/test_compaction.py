from __future__ import annotations

import base64
import itertools

import pytest

from capsa.capsule import (
    Evidence,
    EvidenceLedger,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    compact,
    compact_with_report,
    estimate_tokens,
    groups_to_drop,
    render_evidence,
    view_cut,
    view_notice,
)
from capsa.errors import CompactionRefused

OWNED = {"search"}


def _tool_texts(messages, name="search"):
    return [m.text for m in messages if m.role == "tool" and m.tool_name == name]


def test_compact_leaves_the_first_question_unchanged(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("c1"))
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view == talk.messages
    assert all(a is b for a, b in zip(view, talk.messages, strict=True))


def test_compact_leaves_the_current_questions_returns_untouched(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    boundary = talk.ask("second")
    talk.search(make_chunk("b1"))
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[boundary:] == talk.messages[boundary:]
    assert all(a is b for a, b in zip(view[boundary:], talk.messages[boundary:], strict=True))


def test_compact_keeps_other_tools_and_cite_acknowledgements_verbatim(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("a1"))
    talk.other_tool("calculator", "42")
    talk.cite("a1")
    talk.answer()
    talk.ask("next")
    before = [m for m in talk.messages if m.role == "tool" and m.tool_name != "search"]
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    after = [m for m in view if m.role == "tool" and m.tool_name != "search"]
    assert after == before
    assert all(a is b for a, b in zip(after, before, strict=True))


def test_compact_keeps_every_tool_call_paired_with_its_return(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.turn(make_chunk("b1"), cite=[])
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    calls = [c.id for m in view for c in m.tool_calls]
    returns = [m.tool_call_id for m in view if m.role == "tool"]
    assert calls == returns
    assert len(view) == len(talk.messages)


def test_compact_never_leaves_a_message_empty(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search()
    talk.answer()
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert all(m.parts or m.tool_calls for m in view)


def test_compact_keeps_the_users_pictures_and_text(conversation, make_chunk, user_image):
    talk = conversation()
    talk.ask("look", extra=[user_image('<not-shown ids="x"/> quoted by the user')])
    talk.search(make_chunk("a1"))
    talk.cite("a1")
    talk.answer()
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[1] is talk.messages[1]
    assert isinstance(view[1].parts[1], ImagePart)


def test_compact_leaves_the_input_list_and_messages_unchanged(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    history = list(talk.messages)
    snapshot = [m.model_dump() for m in history]
    compact(history, talk.ledger, owned_tools=OWNED)
    assert history == talk.messages
    assert [m.model_dump() for m in history] == snapshot


def test_compact_with_nothing_cited_leaves_receipts_naming_every_chunk(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"))
    talk.turn(make_chunk("b1"))
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert _tool_texts(view) == [
        '<not-shown title="doc" ids="a1"/>',
        '<not-shown title="doc" ids="b1"/>',
    ]


def test_compact_finds_the_tool_name_from_the_call(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("a1"), named=False)
    talk.cite("a1")
    talk.answer()
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[2].text.startswith('<chunk id="a1"')


def test_compact_keeps_a_resumed_questions_live_evidence(conversation, make_chunk, user):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    boundary = talk.ask("second")
    talk.search(make_chunk("b1"))
    talk.messages.append(user("[notice] tool budget reached"))  # user-role, not a question
    talk.search(make_chunk("b2"))
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[boundary:] == talk.messages[boundary:]
    assert make_chunk("b1").content in view[boundary + 2].text


def test_compact_refuses_without_a_ledger(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    with pytest.raises(CompactionRefused, match="no evidence ledger"):
        compact(talk.messages, None, owned_tools=OWNED)
    with pytest.raises(CompactionRefused):
        compact(talk.messages, EvidenceLedger(), owned_tools=OWNED)


def test_compact_without_a_ledger_proceeds_when_no_evidence_exists(user):
    history = [user("hello"), Message(role="assistant", parts=(TextPart(text="hi"),))]
    assert compact(history, None, owned_tools=OWNED) == history


def test_compact_adopts_evidence_that_predates_the_ledger_as_receipts(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    fresh = EvidenceLedger().begin_question(len(talk.messages))  # a thread seeded with a chat
    talk.ask()
    report = compact_with_report(talk.messages, fresh, owned_tools=OWNED)
    assert _tool_texts(report.messages) == ['<not-shown title="doc" ids="a1 a2"/>']
    assert report.unshown == ("a1", "a2")


def test_compact_without_a_ledger_names_the_fix(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    with pytest.raises(CompactionRefused, match=r"begin_question\(len\(history\) - 1\)"):
        compact(talk.messages, None, owned_tools=OWNED)


def test_compact_proceeds_with_a_late_ledger_when_no_evidence_predates_it(conversation, user):
    talk = conversation()
    talk.messages.extend(
        [user("small talk"), Message(role="assistant", parts=(TextPart(text="ok"),))]
    )
    talk.ask()
    assert talk.ledger.first_question == 2
    assert compact(talk.messages, talk.ledger, owned_tools=OWNED) == talk.messages


def test_compact_refuses_when_the_history_was_shortened(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    with pytest.raises(CompactionRefused, match=r"shortened.*reanchor"):
        compact(talk.messages[:2], talk.ledger, owned_tools=OWNED)


def test_compact_attaches_cited_pictures_after_the_capsules_returns(conversation, make_chunk, png):
    talk = conversation()
    talk.ask()
    talk.parallel_search([make_chunk("a1", picture_refs=["#/pictures/0"])], [make_chunk("a2")])
    talk.cite("a1")
    talk.answer()
    talk.ask()
    report = compact_with_report(
        talk.messages, talk.ledger, owned_tools=OWNED, fetch_picture=lambda p: png
    )
    view = report.messages
    assert len(view) == len(talk.messages) + 1
    attached = view[4]
    assert [m.role for m in view[1:6]] == ["assistant", "tool", "tool", "user", "assistant"]
    assert isinstance(attached.parts[0], TextPart)
    assert "[a1]" in attached.parts[0].text
    assert isinstance(attached.parts[1], ImagePart)
    assert attached.parts[1].mime_type == "image/png"
    assert base64.b64decode(attached.parts[1].base64 or "") == png
    assert [p.chunk_id for p in report.attached] == ["a1"]


@pytest.mark.parametrize(
    ("fetch", "reason"),
    [
        (lambda p: (_ for _ in ()).throw(OSError("store offline")), "fetch_failed"),
        (lambda p: None, "missing"),
        (lambda p: b"not an image", "undecodable"),
    ],
)
def test_compact_drops_an_unusable_picture_with_its_label(conversation, make_chunk, fetch, reason):
    talk = conversation()
    talk.turn(make_chunk("a1", picture_refs=["#/pictures/0"]), cite=["a1"])
    talk.ask()
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, fetch_picture=fetch)
    assert len(report.messages) == len(talk.messages)
    assert not any("#/pictures/0" in m.text for m in report.messages)
    assert [d.reason for d in report.dropped] == [reason]
    assert report.messages[2].text.startswith('<chunk id="a1"')


def test_compact_drops_only_the_picture_that_fails(conversation, make_chunk, png):
    talk = conversation()
    talk.turn(
        make_chunk("a1", document_id="good", picture_refs=["#/pictures/0"]),
        make_chunk("a2", document_id="bad", picture_refs=["#/pictures/0"]),
        cite=["a1", "a2"],
    )
    talk.ask()
    report = compact_with_report(
        talk.messages,
        talk.ledger,
        owned_tools=OWNED,
        fetch_picture=lambda p: png if p.document_id == "good" else None,
    )
    (attached,) = [m for m in report.messages if any(isinstance(p, ImagePart) for p in m.parts)]
    assert len(attached.parts) == 2
    assert "[a1]" in attached.parts[0].text
    assert [d.picture.chunk_id for d in report.dropped] == ["a2"]


def test_compact_without_a_fetcher_attaches_no_pictures(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1", picture_refs=["#/pictures/0"]), cite=["a1"])
    talk.ask()
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED)
    assert len(report.messages) == len(talk.messages)
    assert report.attached == ()


def test_compact_is_deterministic(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a2"])
    talk.turn(make_chunk("b1"), cite=["b1", "a2"])
    talk.ask()
    first = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    second = compact(
        list(talk.messages), EvidenceLedger.from_json(talk.ledger.to_json()), owned_tools=OWNED
    )
    assert [m.model_dump_json() for m in first] == [m.model_dump_json() for m in second]


def test_compact_stable_shows_cited_chunks_whole_and_names_the_rest(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    talk.ask()
    (text,) = _tool_texts(compact(talk.messages, talk.ledger, owned_tools=OWNED))
    assert make_chunk("a1").content in text
    assert make_chunk("a2").content not in text
    assert text.endswith('<not-shown title="doc" ids="a2"/>')


def test_compact_stable_fixes_a_questions_wire_form_once_it_ends(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    second = talk.ask()
    at_second = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    talk.search(make_chunk("b1"))
    talk.cite("b1", "a1")
    talk.answer()
    talk.ask()
    at_third = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert at_third[:second] == at_second[:second]
    assert at_third[second + 2] != talk.messages[second + 2]  # the second question's turn


def test_compact_stable_names_a_chunk_already_shown_instead_of_repeating_it(
    conversation, make_chunk
):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.turn(make_chunk("a1"), make_chunk("b1"), cite=["a1", "b1"])
    talk.ask()
    first, second = _tool_texts(compact(talk.messages, talk.ledger, owned_tools=OWNED))
    assert make_chunk("a1").content in first
    assert make_chunk("a1").content not in second
    assert '<chunk id="a1" shown="earlier"/>' in second


def test_compact_names_a_chunk_the_current_question_retrieves_again_by_reference(
    conversation, make_chunk
):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    boundary = talk.ask("second")
    talk.search(make_chunk("a1"), make_chunk("a2"), make_chunk("b1"))
    stored = list(talk.messages)
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED)
    current = report.messages[boundary + 2].text
    assert current == "\n\n".join(
        [
            '<chunk id="a1" shown="earlier"/>',
            f'<chunk id="a2" document="doc">\n{make_chunk("a2").content}\n</chunk>',
            f'<chunk id="b1" document="doc">\n{make_chunk("b1").content}\n</chunk>',
        ]
    )  # a2 was only receipted earlier, so it is shown whole now
    assert make_chunk("a1").content in report.messages[2].text
    assert report.referenced == ("a1",)
    assert talk.messages == stored
    assert report.messages[boundary + 2].evidence == stored[boundary + 2].evidence


def test_compact_names_a_chunk_retrieved_twice_in_the_current_question_the_second_time(
    conversation, make_chunk
):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("a1"))
    talk.search(make_chunk("a1"), make_chunk("a2"))
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[2] is talk.messages[2]
    assert view[4].text.startswith('<chunk id="a1" shown="earlier"/>\n\n<chunk id="a2"')


def test_compact_knows_a_chunk_is_shown_when_its_tool_escaped_it(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    chunk = make_chunk("a1", content="Hotels < EUR 230 & meals < EUR 40. " * 8)
    talk.search(chunk)
    escaped = render_evidence([chunk])
    talk.messages[2] = talk.messages[2].model_copy(update={"parts": (TextPart(text=escaped),)})
    talk.search(chunk)
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert view[2] is talk.messages[2]
    assert view[4].text == '<chunk id="a1" shown="earlier"/>'


def test_compact_shows_a_chunk_whole_when_max_tokens_took_it_off_the_wire(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    boundary = talk.ask()
    talk.search(make_chunk("a1"))
    full = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=100_000)
    assert full.referenced == ("a1",)
    bound = full.tokens_added - 1
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=bound)
    assert report.uncounted == ("a1",)
    assert report.referenced == ()
    assert report.messages[boundary + 2] is talk.messages[boundary + 2]


def test_compact_stable_names_an_earlier_chunks_source_once(conversation, make_chunk):
    talk = conversation()
    chunk = make_chunk("a1", title="Travel Policy", uri="travel.pdf")
    talk.turn(chunk, cite=["a1"])
    talk.ask()
    (text,) = _tool_texts(compact(talk.messages, talk.ledger, owned_tools=OWNED))
    assert text.splitlines()[0] == '<chunk id="a1" title="Travel Policy">'


def test_compact_stable_keeps_a_return_of_unknown_content_verbatim(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.messages[2] = talk.messages[2].model_copy(update={"evidence": None})
    talk.ask()
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED)
    assert report.messages[2] is talk.messages[2]
    assert report.kept_unknown == 1


def test_compact_stable_max_tokens_bounds_everything_it_writes(conversation, make_chunk):
    talk = conversation()
    for k in range(4):
        talk.turn(make_chunk(f"a{k}"), make_chunk(f"b{k}"), cite=[f"a{k}"])
    talk.ask()
    full = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=100_000)
    assert full.tokens_added is not None
    bound = full.tokens_added // 2
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=bound)
    written = sum(
        estimate_tokens(m.text)
        for m, old in zip(report.messages, talk.messages, strict=True)
        if m is not old
    )
    assert written == report.tokens_added <= bound
    assert report.uncounted[0] == "a0"  # the oldest question gives way first


def test_compact_stable_refuses_a_bound_too_small_for_a_count_and_names_the_fix(
    conversation, make_chunk
):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    with pytest.raises(CompactionRefused, match=r"max_tokens=1 .*raise max_tokens to at least"):
        compact(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=1)


def test_compact_counts_with_an_encoder_returning_tokens(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    report = compact_with_report(
        talk.messages, talk.ledger, owned_tools=OWNED, tokenizer=list, max_tokens=100_000
    )
    assert report.tokens_added == len(_tool_texts(report.messages)[0])


def test_compact_keys_evidence_by_tool_and_chunk_id(conversation):
    talk = conversation()
    talk.ask()
    talk.search(Evidence(chunk_id="1", content="from search", document_id="d"))
    talk.search(Evidence(chunk_id="1", content="from wiki", document_id="w"), tool="wiki")
    talk.cite("1")
    talk.answer()
    talk.ask()
    view = compact(talk.messages, talk.ledger, owned_tools={"search", "wiki"})
    texts = "\n".join(m.text for m in view)
    assert "from search" in texts and "from wiki" in texts


def test_compact_reports_no_token_count_without_a_bound(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask()
    assert compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED).tokens_added is None


def test_compact_gives_two_returns_of_one_question_each_its_own_cited_chunks(
    conversation, make_chunk
):
    talk = conversation()
    talk.ask()
    talk.parallel_search([make_chunk("a1")], [make_chunk("a2")])
    talk.cite("a2")
    talk.answer()
    talk.ask()
    first, second = _tool_texts(compact(talk.messages, talk.ledger, owned_tools=OWNED))
    assert first == '<not-shown title="doc" ids="a1"/>'
    assert second.startswith('<chunk id="a2"')


def test_compact_names_long_ids_by_a_prefix_recall_accepts(conversation, make_chunk):
    long_id = "3f2b8c1e-9d4a-4e7b-a6f0-2c5d8e9b1a73"
    talk = conversation()
    talk.turn(make_chunk(long_id), make_chunk("a2"), cite=["a2"])
    talk.ask()
    (text,) = _tool_texts(compact(talk.messages, talk.ledger, owned_tools=OWNED))
    assert '<not-shown title="doc" ids="3f2b8c1e*"/>' in text


# -- ended questions' cite exchanges off the wire ----------------------------------------------


def _cite_traces(messages):
    calls = [c.id for m in messages for c in m.tool_calls if c.name == "cite"]
    acks = [m.tool_call_id for m in messages if m.role == "tool" and m.tool_name == "cite"]
    return calls, acks


def test_compact_takes_an_ended_questions_cite_exchange_off_the_wire(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("a2"), cite=["a1"])
    talk.turn(make_chunk("b1"), cite=["b1"])
    talk.ask("third")
    report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED, cite_tools={"cite"})
    assert _cite_traces(report.messages) == ([], [])
    assert report.cite_calls_removed == ("call-2", "call-4")
    assert len(report.messages) == len(talk.messages) - 4
    assert make_chunk("a1").content in "\n".join(m.text for m in report.messages)


def test_compact_keeps_the_current_questions_cite_exchange(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask("second")
    talk.search(make_chunk("b1"))
    talk.cite("b1")
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED, cite_tools={"cite"})
    assert _cite_traces(view) == (["call-4"], ["call-4"])
    assert view[-2:] == talk.messages[-2:]


def test_compact_keeps_every_cite_exchange_unless_told_the_cite_tools(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask("second")
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert _cite_traces(view) == (["call-2"], ["call-2"])


def test_compact_keeps_the_other_calls_of_a_message_that_also_cites(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("a1"))
    both = (ToolCall(id="calc", name="calculator"), ToolCall(id="cite", name="cite"))
    talk.messages += [
        Message(role="assistant", parts=(TextPart(text="Checking."),), tool_calls=both),
        Message(role="tool", tool_call_id="calc", tool_name="calculator", parts=(_text("42"),)),
        Message(role="tool", tool_call_id="cite", tool_name="cite", parts=(_text("Recorded."),)),
    ]
    talk.ledger = talk.ledger.record_citations(["a1"])
    talk.answer()
    talk.ask("next")
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED, cite_tools={"cite"})
    (caller,) = [m for m in view if m.text == "Checking."]
    assert caller.tool_calls == (both[0],)
    assert [m.tool_call_id for m in view if m.role == "tool"] == ["call-1", "calc"]


def test_compact_keeps_an_assistant_text_whose_cite_call_leaves(conversation, make_chunk):
    talk = conversation()
    talk.ask()
    talk.search(make_chunk("a1"))
    call = ToolCall(id="cite", name="cite", args={"chunk_ids": ["a1"]})
    talk.messages += [
        Message(role="assistant", parts=(_text("EUR 230."),), tool_calls=(call,)),
        Message(role="tool", tool_call_id="cite", tool_name="cite", parts=(_text("Recorded."),)),
    ]
    talk.ledger = talk.ledger.record_citations(["a1"])
    talk.ask("next")
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED, cite_tools={"cite"})
    assert [(m.role, m.text, m.tool_calls) for m in view[3:]] == [
        ("assistant", "EUR 230.", ()),
        ("user", "next", ()),
    ]


def test_compact_keeps_cite_exchanges_of_a_history_adopted_before_the_ledger(
    conversation, make_chunk
):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    adopted = EvidenceLedger().begin_question(len(talk.messages))
    talk.messages.append(Message(role="user", parts=(_text("later"),)))
    view = compact(talk.messages, adopted, owned_tools=OWNED, cite_tools={"cite"})
    assert _cite_traces(view) == (["call-2"], ["call-2"])


def test_compact_leaves_the_stored_history_untouched_when_cites_leave(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    talk.ask("next")
    history = list(talk.messages)
    snapshot = [m.model_dump() for m in history]
    compact(history, talk.ledger, owned_tools=OWNED, cite_tools={"cite"})
    assert [m.model_dump() for m in history] == snapshot
    assert history == talk.messages


def _text(text: str) -> TextPart:
    return TextPart(text=text)


def test_compact_attaches_cited_pictures_where_the_cite_exchange_was(conversation, make_chunk, png):
    talk = conversation()
    talk.ask()
    talk.parallel_search([make_chunk("a1", picture_refs=["#/pictures/0"])], [make_chunk("a2")])
    talk.cite("a1")
    talk.answer()
    talk.ask()
    report = compact_with_report(
        talk.messages,
        talk.ledger,
        owned_tools=OWNED,
        fetch_picture=lambda p: png,
        cite_tools={"cite"},
    )
    roles = [m.role for m in report.messages]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant", "user"]
    assert isinstance(report.messages[4].parts[1], ImagePart)
    assert report.messages[5].text == "answer"


def test_compact_bound_holds_with_cite_exchanges_off_the_wire(conversation, make_chunk):
    talk = conversation()
    for n in range(4):
        talk.turn(make_chunk(f"q{n}"), make_chunk(f"r{n}"), cite=[f"q{n}"])
    talk.ask()
    report = compact_with_report(
        talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=120, cite_tools={"cite"}
    )
    assert report.tokens_added is not None and report.tokens_added <= 120
    assert _cite_traces(report.messages) == ([], [])


# -- a bound that moves the cached prefix in steps -----------------------------------------------


def _ended_forms(talk, bound: int, low_water: float) -> tuple[str, ...]:
    """Per question asked, the wire forms of the earlier evidence returns."""
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=bound,
                   low_water=low_water)
    return tuple(m.text for m, old in zip(view, talk.messages, strict=True)
                 if old.role == "tool" and old.tool_name == "search")


def _changes(low_water: float, conversation, make_chunk, questions: int = 20) -> list[int]:
    """Questions at which an ended question's wire form changed, under `low_water`."""
    talk = conversation()
    before: tuple[str, ...] = ()
    changed: list[int] = []
    for k in range(questions):
        talk.turn(make_chunk(f"a{k}"), make_chunk(f"b{k}"), cite=[f"a{k}"])
        talk.ask()
        forms = _ended_forms(talk, 400, low_water)
        if forms[: len(before)] != before:
            changed.append(k)
        before = forms
    return changed


def test_a_bound_degrades_in_steps_so_ended_forms_change_rarely(conversation, make_chunk):
    stepped = _changes(0.6, conversation, make_chunk)
    tight = _changes(1.0, conversation, make_chunk)
    assert stepped and tight  # the bound was reached under both policies
    assert len(stepped) <= 20 // 3  # about once per three questions (15 of 20 when tight)
    assert len(stepped) < len(tight) // 2
    assert all(b - a >= 2 for a, b in itertools.pairwise(stepped))


def test_a_stepped_bound_is_still_honoured(conversation, make_chunk):
    talk = conversation()
    for k in range(20):
        talk.turn(make_chunk(f"a{k}"), make_chunk(f"b{k}"), cite=[f"a{k}"])
        talk.ask()
        report = compact_with_report(talk.messages, talk.ledger, owned_tools=OWNED,
                                     max_tokens=400)
        assert report.tokens_added is not None and report.tokens_added <= 400


def test_low_water_outside_its_range_is_refused(conversation, make_chunk):
    talk = conversation()
    talk.turn(make_chunk("a1"), cite=["a1"])
    with pytest.raises(ValueError, match="low_water"):
        compact(talk.messages, talk.ledger, owned_tools=OWNED, max_tokens=400, low_water=0)


def test_groups_to_drop_replays_so_the_start_moves_in_steps():
    sizes = [50] * 20
    starts = [groups_to_drop(sizes[: n + 1], 300, low_water=0.5) for n in range(20)]
    assert starts == sorted(starts)  # the view's start never moves back
    moves = [n for n in range(1, 20) if starts[n] != starts[n - 1]]
    tight = [groups_to_drop(sizes[: n + 1], 300, low_water=1.0) for n in range(20)]
    tight_moves = [n for n in range(1, 20) if tight[n] != tight[n - 1]]
    assert len(moves) <= 20 // 3 < len(tight_moves)
    assert all(sum(sizes[s : n + 1]) <= 300 for n, s in enumerate(starts))


def test_a_return_kept_after_a_shortening_shows_what_its_forgotten_question_cited(
    conversation, make_chunk
):
    talk = conversation()
    talk.turn(make_chunk("a1"), make_chunk("b1"), cite=["a1"])
    talk.ask()
    # a summariser removed the first question's user message; its return stayed
    shortened = talk.messages[1:]
    ledger = talk.ledger.locate([None] * len(shortened)).reanchor(len(shortened) - 1)
    assert ledger.carried == ("a1",)
    view = compact(shortened, ledger, owned_tools=OWNED)
    (kept,) = [m.text for m, old in zip(view, shortened, strict=True)
               if old.role == "tool" and old.tool_name == "search"]
    assert "Body of a1" in kept and "b1" in kept and "Body of b1" not in kept


def test_view_cut_keeps_the_head_and_the_current_question():
    roles = ["system", *(["user", "assistant", "tool", "assistant"] * 6)]
    tokens = [30, *([10, 5, 60, 5] * 6)]
    cut = view_cut(roles, tokens, 200, notice_tokens=20, low_water=0.6)
    assert cut.dropped >= 1 and roles[cut.start] == "user"
    kept = 30 + 20 + sum(tokens[cut.start :])
    assert kept <= 200 and cut.start <= len(roles) - 4  # the current question stays


def test_view_cut_within_the_bound_drops_nothing():
    assert view_cut(["human", "ai", "human", "ai"], [10, 10, 10, 10], 100).dropped == 0


def test_view_notice_names_how_many_questions_left():
    assert view_notice(3).startswith('<not-shown questions="3" reason="token_limit"/>')
