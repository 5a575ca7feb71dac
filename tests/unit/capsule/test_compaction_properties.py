"""Invariants of `compact` over generated conversations."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capsa.capsule import EvidenceLedger, compact
from capsa.capsule.render import render_reference

OWNED = {"search"}
POOL = [f"chunk-{i:02d}" for i in range(12)]

_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _grow(data, conversation, make_chunk):
    """Draw a conversation of finished questions followed by one in progress."""
    talk = conversation()
    talk.snapshots = []
    talk.requests = []
    questions = data.draw(st.integers(min_value=0, max_value=6), label="finished questions")

    def request() -> None:
        talk.requests.append((len(talk.messages), talk.ledger))

    for _ in range(questions + 1):
        talk.ask()
        talk.snapshots.append((len(talk.messages), talk.ledger))
        request()
        for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
            ids = data.draw(st.lists(st.sampled_from(POOL), max_size=3, unique=True))
            talk.search(*(make_chunk(i) for i in ids))
            request()
        if data.draw(st.booleans()):
            talk.other_tool()
            request()
        citable = list(talk.ledger.citable_ids())
        if citable:
            cited = data.draw(st.lists(st.sampled_from(citable), max_size=3, unique=True))
            if cited:
                talk.cite(*cited)
                request()
        talk.answer()
    return talk


@_settings
@given(data=st.data())
def test_compact_never_changes_the_stored_history(data, conversation, make_chunk):
    talk = _grow(data, conversation, make_chunk)
    history = list(talk.messages)
    snapshot = [m.model_dump() for m in history]
    compact(history, talk.ledger, owned_tools=OWNED)
    assert [m.model_dump() for m in history] == snapshot
    assert history == talk.messages


@_settings
@given(data=st.data())
def test_compact_rewrites_only_earlier_evidence_returns(data, conversation, make_chunk):
    talk = _grow(data, conversation, make_chunk)
    boundary = talk.ledger.question
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    assert len(view) == len(talk.messages)
    for index, (before, after) in enumerate(zip(talk.messages, view, strict=True)):
        assert (after.role, after.tool_call_id, after.tool_calls) == (
            before.role,
            before.tool_call_id,
            before.tool_calls,
        )
        if before.role != "tool" or before.tool_name not in OWNED:
            assert after is before
        elif index >= boundary and after is not before:
            # a current return changes only to name chunks visible whole before it
            wire = "\n".join(m.text for m in view[:index])
            for chunk in before.evidence:
                assert chunk.content in after.text or (
                    render_reference(chunk) in after.text and chunk.content in wire
                )
            assert any(render_reference(chunk) in after.text for chunk in before.evidence)


@_settings
@given(data=st.data())
def test_compact_every_request_extends_the_previous_ones_wire_form(data, conversation, make_chunk):
    talk = _grow(data, conversation, make_chunk)
    views = [
        compact(talk.messages[:length], ledger, owned_tools=OWNED)
        for length, ledger in talk.requests
    ]
    for (length, ledger), (_, later), before, after in zip(
        talk.requests, talk.requests[1:], views, views[1:], strict=False
    ):
        # within a question the whole request is a prefix of the next; across, up to the question
        shared = length if later.question == ledger.question else ledger.question
        assert after[:shared] == before[:shared]


@_settings
@given(data=st.data())
def test_compact_stable_shares_the_previous_requests_prefix_up_to_the_newest_question(
    data, conversation, make_chunk
):
    talk = _grow(data, conversation, make_chunk)
    views = [
        compact(talk.messages[:length], ledger, owned_tools=OWNED)
        for length, ledger in talk.snapshots
    ]
    for (_, ledger), before, after in zip(talk.snapshots, views, views[1:], strict=False):
        assert after[: ledger.question] == before[: ledger.question]


@_settings
@given(data=st.data(), layout=st.sampled_from(["stable", "moving"]))
def test_compact_names_every_earlier_chunk_it_does_not_show(data, conversation, make_chunk, layout):
    talk = _grow(data, conversation, make_chunk)
    boundary = talk.ledger.question
    wire = "\n".join(m.text for m in compact(talk.messages, talk.ledger, owned_tools=OWNED))
    for message in talk.messages[:boundary]:
        for chunk in message.evidence or ():
            assert chunk.content in wire or chunk.chunk_id in wire


@_settings
@given(data=st.data())
def test_compact_keeps_every_earlier_cited_chunk_visible(data, conversation, make_chunk):
    talk = _grow(data, conversation, make_chunk)
    boundary = talk.ledger.question
    cited = {
        e.evidence.chunk_id for e in talk.ledger.entries if any(q < boundary for q in e.cited_in)
    }
    has_earlier_return = any(
        m.role == "tool" and m.tool_name in OWNED for m in talk.messages[:boundary]
    )
    wire = "\n".join(m.text for m in compact(talk.messages, talk.ledger, owned_tools=OWNED))
    if has_earlier_return:
        assert all(make_chunk(chunk_id).content in wire for chunk_id in cited)


@_settings
@given(data=st.data())
def test_compact_is_idempotent_and_deterministic(data, conversation, make_chunk):
    talk = _grow(data, conversation, make_chunk)
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    restored = EvidenceLedger.from_json(talk.ledger.to_json())
    assert compact(list(talk.messages), restored, owned_tools=OWNED) == view
    assert compact(view, talk.ledger, owned_tools=OWNED) == view


# -- ended questions' cite exchanges off the wire ----------------------------------------------

CITES = {"cite"}


def _is_cite_exchange(message) -> bool:
    if message.role == "tool":
        return message.tool_name == "cite"
    return bool(message.tool_calls) and all(c.name == "cite" for c in message.tool_calls)


@_settings
@given(data=st.data())
def test_compact_takes_off_exactly_the_ended_questions_cite_exchanges(
    data, conversation, make_chunk
):
    talk = _grow(data, conversation, make_chunk)
    boundary = talk.ledger.question
    kept = compact(talk.messages, talk.ledger, owned_tools=OWNED)
    view = compact(talk.messages, talk.ledger, owned_tools=OWNED, cite_tools=CITES)
    assert view == [m for i, m in enumerate(kept) if i >= boundary or not _is_cite_exchange(m)]


@_settings
@given(data=st.data())
def test_compact_without_cite_exchanges_leaves_no_call_or_return_unpaired(
    data, conversation, make_chunk
):
    talk = _grow(data, conversation, make_chunk)
    for length, ledger in talk.requests:
        view = compact(talk.messages[:length], ledger, owned_tools=OWNED, cite_tools=CITES)
        calls = [c.id for m in view for c in m.tool_calls]
        assert calls == [m.tool_call_id for m in view if m.role == "tool"]
        assert all(m.parts or m.tool_calls for m in view)


@_settings
@given(data=st.data())
def test_compact_without_cite_exchanges_never_changes_the_stored_history(
    data, conversation, make_chunk
):
    talk = _grow(data, conversation, make_chunk)
    history = list(talk.messages)
    snapshot = [m.model_dump() for m in history]
    compact(history, talk.ledger, owned_tools=OWNED, cite_tools=CITES)
    assert [m.model_dump() for m in history] == snapshot


@_settings
@given(data=st.data())
def test_compact_without_cite_exchanges_every_request_extends_the_previous_ones_wire_form(
    data, conversation, make_chunk
):
    talk = _grow(data, conversation, make_chunk)
    views = [
        compact(talk.messages[:length], ledger, owned_tools=OWNED, cite_tools=CITES)
        for length, ledger in talk.requests
    ]
    for (_, ledger), (_, later), before, after in zip(
        talk.requests, talk.requests[1:], views, views[1:], strict=False
    ):
        if later.question == ledger.question:  # the whole request leads the next one
            assert after[: len(before)] == before
        else:  # the question ended: everything up to its own message stays byte for byte
            asked = talk.messages[ledger.question]
            upto = next(i for i, m in enumerate(before) if m is asked) + 1
            assert after[:upto] == before[:upto]
