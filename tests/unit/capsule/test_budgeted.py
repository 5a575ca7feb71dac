"""Budgeted evidence: a packet for the question, every chunk named, parts never parsed as whole."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.capsule import (
    NO_RESULTS,
    RECALL_HINT,
    Evidence,
    as_tokenizer,
    budget_floor,
    estimate_tokens,
    parse_evidence,
    render_budgeted,
    render_evidence,
)
from capsa.capsule.render import render_chunk
from capsa.errors import BudgetError


def _chunks() -> list[Evidence]:
    return [
        Evidence(
            chunk_id=f"c{i}",
            content=" ".join(
                f"Rule {i}.{j} sets limit {i * 10 + j} for case {j}." for j in range(12)
            ),
            document_id="policy.pdf",
        )
        for i in range(5)
    ]


def test_a_budgeted_return_is_smaller_and_names_every_chunk():
    chunks = _chunks()
    text = render_budgeted("rule 0.3 limit", chunks, 200)
    assert estimate_tokens(text) < estimate_tokens(render_evidence(chunks)) / 2
    assert all(f"c{i}" in text for i in range(5))  # whole, in part, or in a receipt
    assert text.endswith(RECALL_HINT)
    assert "Rule 0.3 sets limit 3" in text  # the sentence the query asks about


def test_parts_are_never_read_back_as_whole_chunks():
    chunks = _chunks()
    text = render_budgeted("rule 0.3 limit", chunks, 200)
    for parsed in parse_evidence(text) or ():
        whole = next(c for c in chunks if c.chunk_id == parsed.chunk_id)
        assert parsed.content == whole.content


def test_a_budget_that_holds_everything_changes_nothing_but_the_form():
    chunks = _chunks()
    text = render_budgeted("rule", chunks, 100_000)
    assert RECALL_HINT not in text
    assert [e.content for e in parse_evidence(text) or ()] == [c.content for c in chunks]


def test_no_chunks_is_no_results_and_the_same_input_the_same_text():
    assert render_budgeted("q", [], 100) == NO_RESULTS
    assert render_budgeted("rule 1", _chunks(), 150) == render_budgeted("rule 1", _chunks(), 150)


def _whole_ids(text: str) -> set[str]:
    return {e.chunk_id for e in parse_evidence(text) or ()}


def test_a_packet_shows_the_most_relevant_chunk_whole_rather_than_parts_of_all():
    chunks = _chunks()
    text = render_budgeted("rule 2.5 limit 25", chunks, 200)
    assert _whole_ids(text) == {"c2"}
    assert "<part" not in text


def test_a_packet_falls_back_to_parts_when_no_chunk_fits_whole():
    text = render_budgeted("rule 0.3 limit", _chunks(), 100)
    # which chunk's part wins is pack's ranking ("0.3" and "3.0" share their words)
    assert _whole_ids(text) == set() and '<part id="c' in text


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=50),
)
def test_a_budget_that_holds_every_chunk_whole_shows_them_all_in_order(lengths, more):
    # `pack` may show fewer chunks whole at a slightly larger budget (a larger, more
    # relevant chunk crowds out two small ones), so the count is not monotone below this
    chunks = [
        Evidence(
            chunk_id=f"c{i}",
            content=" ".join(f"Clause {i}.{j} caps item {j}." for j in range(n)),
            document_id="d",
        )
        for i, n in enumerate(lengths)
    ]
    whole = estimate_tokens("\n".join(render_chunk(c) for c in chunks))
    text = render_budgeted("clause caps item", chunks, whole + more)
    assert [e.chunk_id for e in parse_evidence(text) or ()] == [c.chunk_id for c in chunks]
    assert RECALL_HINT not in text


def test_chunks_that_fit_whole_are_returned_below_the_floor():
    chunk = Evidence(chunk_id="c0", content="The cap is EUR 165.", document_id="d")
    text = render_budgeted("cap", [chunk], 25)
    assert estimate_tokens(text) <= 25 < budget_floor(1)
    assert _whole_ids(text) == {"c0"}


def _words(text: str) -> list[str]:
    """An encoder that returns tokens, as tiktoken's ``encode`` does: one per word."""
    return text.split()


_COUNTED = re.compile(r'<not-shown count="(\d+)" reason="budget"/>')
_PART = re.compile(r'<part id="([^"]+)"')
_NAMED = re.compile(r'<not-shown title="[^"]*" ids="([^"]+)"/>')


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=15), st.sampled_from(["a.pdf", "b.md"])),
        min_size=0,
        max_size=8,
    ),
    st.integers(min_value=-40, max_value=600),
    st.sampled_from([estimate_tokens, _words, len]),
)
def test_the_budget_bounds_the_whole_text_and_every_chunk_is_accounted_for(
    shapes, extra, tokenizer
):
    chunks = [
        Evidence(
            chunk_id=f"c{i}",
            content=" ".join(f"Clause {i}.{j} caps item {j} at {j * 7} euros." for j in range(n)),
            document_id=source,
        )
        for i, (n, source) in enumerate(shapes)
    ]
    floor = budget_floor(len(chunks), tokenizer=tokenizer)
    budget = max(1, floor + extra)
    count = as_tokenizer(tokenizer)
    try:
        text = render_budgeted("clause caps item euros", chunks, budget, tokenizer=tokenizer)
    except BudgetError:  # below the floor, refused unless every chunk fits whole
        assert budget < floor
        return
    assert count(text) <= budget
    whole = _whole_ids(text)
    parts = set(_PART.findall(text))
    named = {i for ids in _NAMED.findall(text) for i in ids.split()}
    counted = sum(int(n) for n in _COUNTED.findall(text))
    ids = {c.chunk_id for c in chunks}
    accounted = whole | parts | named
    assert accounted <= ids and not (whole & parts) and not ((whole | parts) & named)
    assert len(ids - accounted) == counted  # nothing lost silently


def test_a_budget_below_the_floor_is_refused_naming_both():
    chunks = _chunks()
    floor = budget_floor(len(chunks))
    assert render_budgeted("rule", chunks, floor).endswith(RECALL_HINT)
    with pytest.raises(BudgetError, match=f"budget={floor - 1} tokens .* at least {floor}"):
        render_budgeted("rule", chunks, floor - 1)


def test_the_issue_example_stays_within_sixty_tokens():
    text = render_budgeted("rule 0.3 limit", _chunks(), 60)
    assert estimate_tokens(text) <= 60
    assert all(f"c{i}" in text for i in range(5))  # named: the ids fit where no part does
