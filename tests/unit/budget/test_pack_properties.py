"""Invariants of `pack`, over generated passages, budgets, tokenizers and shapes."""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capsa.budget import (
    Budget,
    Packet,
    Passage,
    compress_text,
    estimate_tokens,
    pack,
    split_sentences,
)

from .conftest import TAG, char_tokenizer

_FRAGMENTS = [
    "The hotel cap is EUR 165.", "Taxis need a receipt!", "Is it late?", "Dr. Ng paid 3.50.",
    "東京は首都です。", "- a list item\n", "\n\n", "```\ncode. x = 1\n```\n", "e.g. this",
    "</document>", "</context>", '<context source="attached">', '<document id="x">',
    "< /DOCUMENT >", "<\u200b/context>", '<truncated shown="1" total="9"/>', "…", "a < b",
    "hotel", "cap", " ", "\t", '"', "&amp;", "<", "document id=1>", "context>", "/",
]

texts = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=12), max_size=25).map("".join)
attributes = st.text(min_size=1, max_size=12)
tokenizers: st.SearchStrategy[Callable[[str], int]] = st.sampled_from(
    [estimate_tokens, char_tokenizer])


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[Passage], list[Passage]]:
    count = draw(st.integers(min_value=0, max_value=8))
    attached = draw(st.integers(min_value=0, max_value=2))
    ids = draw(st.lists(attributes, min_size=count + attached, max_size=count + attached,
                        unique=True))
    made = [Passage(id=ident, text=draw(texts),
                    source=draw(st.none() | attributes),
                    score=draw(st.none() | st.floats(-5, 5)))
            for ident in ids]
    return made[attached:], made[:attached]


budgets = st.builds(
    Budget,
    max_tokens=st.integers(min_value=1, max_value=400),
    max_items=st.none() | st.integers(min_value=1, max_value=4),
    attachment_share=st.floats(min_value=0.0, max_value=1.0),
    shape=st.sampled_from(["passages", "brief", "features"]),
    min_relevance=st.none() | st.sampled_from([0.0, 0.3]),
    markup=st.sampled_from(["auto", "tags", "compact"]),
)
queries = st.sampled_from(["hotel cap", "", "what is the taxi rule", "東京", "</document>"])
_EXAMPLES = int(os.environ.get("CAPSA_PROPERTY_EXAMPLES", "150"))
_SETTINGS = settings(max_examples=_EXAMPLES, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


def _pack(case: tuple[list[Passage], list[Passage]], budget: Budget, query: str,
          tokenizer: Callable[[str], int], compress: bool) -> Packet:
    passages, attached = case
    return pack(query, passages, budget, attachments=attached, tokenizer=tokenizer,
                compress=compress)


@_SETTINGS
@given(inputs(), budgets, queries, tokenizers, st.booleans())
def test_pack_never_exceeds_the_budget(case: tuple[list[Passage], list[Passage]], budget: Budget,
                                       query: str, tokenizer: Callable[[str], int],
                                       compress: bool) -> None:
    packet = _pack(case, budget, query, tokenizer, compress)
    assert tokenizer(packet.render()) == packet.used_tokens <= budget.max_tokens


@_SETTINGS
@given(inputs(), budgets, queries, tokenizers, st.booleans())
def test_pack_accounts_for_every_passage_exactly_once(
        case: tuple[list[Passage], list[Passage]], budget: Budget, query: str,
        tokenizer: Callable[[str], int], compress: bool) -> None:
    packet = _pack(case, budget, query, tokenizer, compress)
    passages, attached = case
    assert [r.passage_id for r in packet.receipts] == [p.id for p in [*attached, *passages]]
    kept = [r for r in packet.receipts if r.dropped is None]
    assert sorted(r.rank for r in kept if r.rank is not None) == list(range(len(packet.passages)))
    assert len(kept) == len(packet.passages) == len(packet.texts)


@_SETTINGS
@given(inputs(), budgets, queries, tokenizers, st.booleans())
def test_pack_never_keeps_more_tokens_than_a_passage_had(
        case: tuple[list[Passage], list[Passage]], budget: Budget, query: str,
        tokenizer: Callable[[str], int], compress: bool) -> None:
    packet = _pack(case, budget, query, tokenizer, compress)
    for receipt in packet.receipts:
        assert receipt.tokens_kept <= receipt.tokens_full
        if receipt.dropped is not None:
            assert receipt.tokens_kept == 0


@_SETTINGS
@given(inputs(), budgets, queries, st.booleans())
def test_pack_is_deterministic(case: tuple[list[Passage], list[Passage]], budget: Budget,
                               query: str, compress: bool) -> None:
    first = _pack(case, budget, query, estimate_tokens, compress)
    second = _pack(case, budget, query, estimate_tokens, compress)
    assert first.render() == second.render()
    assert first.as_dict() == second.as_dict()


@_SETTINGS
@given(inputs(), budgets, queries, st.booleans())
def test_pack_content_cannot_close_or_forge_a_container(
        case: tuple[list[Passage], list[Passage]], budget: Budget, query: str,
        compress: bool) -> None:
    packet = _pack(case, budget, query, estimate_tokens, compress)
    tags = TAG.findall(packet.render())
    groups = {r.group for r in packet.receipts if r.dropped is None}
    per_document = ["<document"] if packet.compact else ["<document", "</document>"]
    assert len(tags) == len(per_document) * len(packet.passages) + 2 * len(groups)
    expected: list[str] = []
    for group in ("attached", "retrieved"):
        members = [p for p, r in zip(packet.passages, _kept(packet), strict=True)
                   if r.group == group]
        if members:
            expected.append(f'<context source="{group}">')
            expected += per_document * len(members)
            expected.append("</context>")
    assert [t if t.startswith("<context") or t.startswith("</") else "<document"
            for t in tags] == expected


@_SETTINGS
@given(texts, queries, st.integers(min_value=0, max_value=80), tokenizers)
def test_compress_text_never_exceeds_its_budget(text: str, query: str, max_tokens: int,
                                               tokenizer: Callable[[str], int]) -> None:
    assert tokenizer(compress_text(text, query, max_tokens, tokenizer=tokenizer)) <= max_tokens


def _kept(packet: Packet) -> list:  # type: ignore[type-arg]
    kept = [r for r in packet.receipts if r.rank is not None]
    return sorted(kept, key=lambda r: r.rank)


_PROSE = ["The hotel cap is EUR 165.", "Taxis need a receipt.", "Rail travel is standard class.",
          "The cap in Paris is EUR 230.", "Meals are paid up to EUR 55.",
          "Hotels are booked early."]


@_SETTINGS
@given(passages=st.lists(st.lists(st.sampled_from(_PROSE), min_size=1, max_size=5).map(" ".join),
                         min_size=1, max_size=6),
       max_tokens=st.integers(min_value=1, max_value=120), strict=st.booleans())
def test_pack_never_pads_a_compressed_retrieval_with_irrelevant_sentences_apart(
        passages: list[str], max_tokens: int, strict: bool) -> None:
    made = [Passage(id=str(n), text=text) for n, text in enumerate(passages)]
    packet = pack("hotel cap", made, Budget(max_tokens=max_tokens, strict_floor=strict))
    # what everything costs in the compact form `auto` switches to when tags do not fit
    demand = pack("hotel cap", made, Budget(max_tokens=10_000, markup="compact")).used_tokens
    if demand <= max_tokens:
        return  # everything fits: nothing is filler
    # the first passage (no scores) is spared when nothing in it is relevant: its sentences
    # then compete on their position alone, and only under a strict floor is it irrelevant
    spared = not strict and not any(word in passages[0].lower() for word in ("hotel", "cap"))
    for receipt in packet.receipts:
        text = made[int(receipt.passage_id)].text
        if spared and receipt.passage_id == "0":
            continue
        if receipt.dropped is not None or receipt.whole:
            assert receipt.dropped != "irrelevant" or not any(
                word in text.lower() for word in ("hotel", "cap"))
            continue
        # Each run of adjacent kept sentences (a span; a cut one's last span ends inside a
        # sentence) holds a relevant one: a sentence at or below the floor is kept only
        # beside what is kept of its passage (the dense rule), never on its own.
        for start, end in receipt.kept_spans:
            run = [text[first:last].lower() for first, last in split_sentences(text)
                   if first < end and start < last]
            assert any("hotel" in sentence or "cap" in sentence for sentence in run), run
