"""The packer's rewritten hot paths give what their plain forms gave, exactly.

Each fast path of `capsa.budget` against the plain form it replaced, on generated
inputs:

- `_State.added_cost` with `_join` written out, against the old form (and, with no
  excerpt mark, the difference of the two bodies it stands for), for any kept set,
  gap, trail, excerpt cost and shape;
- `_whole_cost` against `_body_cost` of every sentence;
- `_State.utility` reading the decayed weights `consider` keeps, against the
  old formula (``weights[t] * _COVERAGE_DECAY ** covered[t]``), bit for bit,
  after real greedy passes;
- the starting queue, sorted once and kept on `Prepared.queues`, against the old
  heapified list: the same entries, popped in the same order;
- `terms_of`'s one-pass path against its old two-step form;
- `Body.raw`, joined once at construction, against joining the pieces;
- a passage's reading (`_read`), remembered by its text, against splitting and
  reading the text in place, as `prepare` did; its token counts (`_counts`,
  kept on the reading for `estimate_tokens`) against counting each piece;
- `Unit.mass`, summed once in `prepare`, against summing the weights of its terms.

The plain forms are written out here, so a later change to the fast path that
gives a different number fails. Whole packets were also compared byte for byte
over every benchmark question before and after each change (28,286 packets).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.budget import LexicalScorer, Passage, StaticScorer, estimate_tokens
from capsa.budget.compress import (
    _ASCII_WORD,
    _COVERAGE_DECAY,
    _READ_CHARS,
    Doc,
    Prepared,
    Seen,
    _body_cost,
    _counts,
    _estimate_whole,
    _read,
    _separated,
    _State,
    _whole_cost,
    prepare,
)
from capsa.budget.relevance import _TERMS, _WORD, _term, mend
from capsa.budget.relevance import terms_of as new_terms_of
from capsa.budget.render import Body, build_body
from capsa.budget.sentences import split_sentences

_WORDS = ["hotel", "cap", "EUR", "165", "taxis", "receipt", "trains", "the", "of", "Paris",
          "night", "3.0", "film", "score", "naïve", "東京"]
_SEPARATORS = [" ", "  ", "\n", "\n\n", "\n- ", " \t", ". "]


@st.composite
def _texts(draw: st.DrawFn) -> list[str]:
    passages = []
    for _ in range(draw(st.integers(1, 4))):
        parts = []
        for _ in range(draw(st.integers(1, 14))):
            words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=9))
            parts.append(" ".join(words) + draw(st.sampled_from([".", "!", "?", ":", ""])))
            parts.append(draw(st.sampled_from(_SEPARATORS)))
        passages.append("".join(parts))
    return passages


def _words_count(text: str) -> int:
    return len(text.split())


_TOKENIZERS = st.sampled_from([estimate_tokens, _words_count, len])
_SHAPES = st.sampled_from(["passages", "brief", "features"])


def _prepared(texts: list[str], query: str, tokenizer: object, scorer: object = None) -> Prepared:
    passages = [Passage(id=f"p{n}", text=text) for n, text in enumerate(texts)]
    return prepare(query, (), passages, tokenizer=tokenizer,  # type: ignore[arg-type]
                   scorer=scorer or LexicalScorer())


# --- the old forms -----------------------------------------------------------------------


def _old_join(doc: Doc, a: int, b: int, gap: int) -> int:
    return doc.joins[a] if b == a + 1 else gap


def _old_added_cost(state: _State, doc: Doc, kept: set[int], k: int) -> int:
    if k in kept:
        return 0
    if not kept or state.shape == "features":
        before = _body_cost(state.prepared, doc, sorted(kept), state.shape) if kept else 0
        return _body_cost(state.prepared, doc, sorted(kept | {k}), state.shape) - before
    order = sorted(kept)
    at = bisect.bisect_left(order, k)
    gap, last = state.prepared.gap, len(doc.units) - 1
    cost = doc.units[k].tokens
    if 0 < at < len(order):
        cost -= _old_join(doc, order[at - 1], order[at], gap)
    if at > 0:
        cost += _old_join(doc, order[at - 1], k, gap)
    elif order[0] > 0 and k == 0:
        cost -= gap
    if at < len(order):
        cost += _old_join(doc, k, order[at], gap)
    elif order[-1] < last and k == last:
        cost -= gap + state.prepared.trail
    return cost


def _old_utility(state: _State, n: int, k: int) -> float:
    doc = state.docs[n]
    unit = doc.units[k]
    lead = 0.1 if k == 0 and state.shape != "brief" else 0.0
    if state.dense and n in state.kept:
        lead += state.dense
    terms = unit.terms
    if not terms or state.covered_terms.isdisjoint(terms):
        return unit.relevance + doc.prior + lead
    weights = state.prepared.weights
    mass = sum([weights[t] for t in terms])
    novelty = 1.0
    if mass > 0:
        novelty = sum([weights[t] * _COVERAGE_DECAY ** state.covered.get(t, 0)
                       for t in terms]) / mass
    return unit.relevance * novelty + doc.prior + lead


def _old_entries(state: _State) -> list[tuple[float, int, int, int]]:
    lead = 0.1 if state.shape != "brief" else 0.0
    return [(-(doc.units[k].relevance + doc.prior + (lead if k == 0 else 0.0)), n, k, 0)
            for n, doc in enumerate(state.docs) if n not in state.irrelevant
            for k in range(len(doc.units)) if state.eligible(n, k)]


def _old_terms_of(words: list[str]) -> tuple[str, ...]:
    parts = list(map(_TERMS.get, words))
    if None in parts:
        for n, part in enumerate(parts):
            if part is None:
                term = _term(words[n])
                parts[n] = _TERMS[words[n]] = tuple(term.split(" ")) if term else ()
    return tuple(itertools.chain.from_iterable(parts))  # type: ignore[arg-type]


def _old_reading(text: str) -> dict[str, object]:
    """What `prepare` computed in place for one passage, before readings were remembered."""
    spans = split_sentences(text)
    texts = [text[s:e] for s, e in spans]
    lowered = [mend(sentence.lower()) for sentence in texts]
    words = [tuple((_ASCII_WORD if sentence.isascii() else _WORD).findall(sentence))
             for sentence in lowered]
    return {"spans": spans, "texts": tuple(texts), "lowered": tuple(lowered),
            "words": tuple(words), "terms": tuple(new_terms_of(w) for w in words),
            "keys": tuple(" ".join(w) for w in words),
            "wordsets": tuple(frozenset(w) for w in words),
            "separated": _separated(text, spans)}


def _old_counts(text: str, count: Callable[[str], int],
                ) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """What `prepare` counted in place for one passage: each sentence, each join, the whole."""
    spans = split_sentences(text)
    tokens = tuple(count(text[s:e]) for s, e in spans)
    joins = tuple(count(text[end:start]) for (_, end), (start, _) in itertools.pairwise(spans))
    if count is estimate_tokens and _separated(text, spans):
        return tokens, joins, _estimate_whole(text, spans, sum(tokens) + sum(joins))
    return tokens, joins, count(text)


# --- the tests ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(_texts(), _TOKENIZERS, _SHAPES, st.integers(0, 3), st.integers(0, 3), st.integers(0, 9),
       st.data())
def test_added_cost_is_the_old_form_and_the_difference_of_two_bodies(
        texts: list[str], tokenizer: object, shape: str, gap: int, trail: int, excerpt: int,
        data: st.DataObject) -> None:
    prepared = replace(_prepared(texts, "hotel cap", tokenizer), gap=gap, trail=trail,
                       excerpt=excerpt)
    for doc in prepared.retrieved:
        if not doc.units:
            continue
        state = _State(prepared, [doc], shape, 10_000, None, Seen(), None)  # type: ignore[arg-type]
        size = len(doc.units)
        kept = data.draw(st.sets(st.integers(0, size - 1), max_size=size))
        for k in range(size):
            new = state.added_cost(doc, kept, k)
            assert new == _old_added_cost(state, doc, kept, k)
            if k not in kept and not excerpt:  # both forms leave out an excerpt mark's going
                before = _body_cost(prepared, doc, sorted(kept), shape) if kept else 0  # type: ignore[arg-type]
                assert new == _body_cost(prepared, doc, sorted(kept | {k}), shape) - before  # type: ignore[arg-type]
        first = data.draw(st.integers(0, size - 1))  # consider's cost of a passage's first sentence
        assert (_body_cost(prepared, doc, (first,), shape)  # type: ignore[arg-type]
                == _old_added_cost(state, doc, set(), first))


@settings(max_examples=100, deadline=None)
@given(_texts(), _TOKENIZERS, _SHAPES, st.integers(0, 9))
def test_the_whole_cost_is_the_body_cost_of_every_sentence(texts: list[str], tokenizer: object,
                                                           shape: str, excerpt: int) -> None:
    prepared = replace(_prepared(texts, "cap", tokenizer), excerpt=excerpt)
    for doc in prepared.retrieved:
        assert _whole_cost(prepared, doc, shape) == _body_cost(  # type: ignore[arg-type]
            prepared, doc, list(range(len(doc.units))), shape)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(_texts(), _TOKENIZERS, _SHAPES, st.integers(1, 400),
       st.sampled_from(["hotel cap Paris", "film score 165", "the night trains", "東京 3.0"]),
       st.booleans())
def test_utility_and_queue_are_the_old_ones_after_a_greedy_pass(
        texts: list[str], tokenizer: object, shape: str, budget: int, query: str,
        static: bool) -> None:
    prepared = _prepared(texts, query, tokenizer, StaticScorer() if static else None)
    docs = prepared.retrieved
    state = _State(prepared, docs, shape, budget, None, Seen(), 0.0)  # type: ignore[arg-type]
    old = _old_entries(state)
    assert list(state.entries) == sorted(old)
    heap = list(old)
    heapq.heapify(heap)
    fresh = list(state.heap)
    assert [heapq.heappop(heap) for _ in range(len(heap))] == [
        heapq.heappop(fresh) for _ in range(len(fresh))]
    again = _State(prepared, docs, shape, budget * 2, None, Seen(), 0.0)  # type: ignore[arg-type]
    assert again.entries is state.entries  # remembered for the next budget
    state.run()
    for n, doc in enumerate(docs):
        for k in range(len(doc.units)):
            assert state.utility(n, k) == _old_utility(state, n, k)  # bit for bit


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["hotels", "the", "booked", "3.0", "東京", "naïve", "x_y", "_"]
                                + [f"w{n}" for n in range(40)]), max_size=20))
def test_terms_of_is_the_old_two_step_form(words: list[str]) -> None:
    expected = _old_terms_of(list(words))
    if len(words) % 3 == 0:
        for word in words:  # sometimes unknown again: the fallback path
            _TERMS.pop(word, None)
    assert new_terms_of(words) == expected


@settings(max_examples=100, deadline=None)
@given(_texts(), _SHAPES, st.booleans(), st.data())
def test_a_body_is_joined_once_as_its_pieces_join(texts: list[str], shape: str, compact: bool,
                                                   data: st.DataObject) -> None:
    from capsa.budget.sentences import split_sentences

    for text in texts:
        spans = split_sentences(text)
        if not spans:
            continue
        kept = sorted(data.draw(st.sets(st.integers(0, len(spans) - 1), min_size=1)))
        cut = data.draw(st.none() | st.integers(spans[kept[-1]][0] + 1, spans[kept[-1]][1]))
        body = build_body(text, spans, kept, shape, cut=cut, compact=compact)  # type: ignore[arg-type]
        assert body.raw == "".join(piece for _, piece in body.pieces)
        plain = replace(body, excerpt=None)
        assert plain.raw == body.raw and plain == Body(body.pieces)


@settings(max_examples=100, deadline=None)
@given(_texts(), st.booleans())
def test_a_remembered_reading_is_the_text_read_in_place(texts: list[str], long: bool) -> None:
    if long:  # past what is remembered: read afresh every time
        texts[0] = (texts[0] + " ") * (_READ_CHARS // 10 // max(len(texts[0]), 1) + 1)
    for text in texts:
        expected = _old_reading(text)
        for reading in (_read(text), _read(text)):  # read, then (for a chunk) remembered
            assert {name: getattr(reading, name) for name in expected} == expected
@settings(max_examples=150, deadline=None)
@given(_texts(), _TOKENIZERS)
def test_a_readings_counts_are_each_piece_counted(texts: list[str],
                                                  tokenizer: Callable[[str], int]) -> None:
    for text in texts:
        expected = _old_counts(text, tokenizer)
        for _ in range(2):  # the second time from the reading, for estimate_tokens
            assert _counts(_read(text), text, tokenizer, {}) == expected


@settings(max_examples=100, deadline=None)
@given(_texts(), st.sampled_from(["hotel cap Paris", "film score 165", "the night trains",
                                  "東京 3.0 naïve"]))
def test_a_units_mass_is_its_terms_weights_summed_in_order(texts: list[str], query: str) -> None:
    prepared = _prepared(texts, query, estimate_tokens)
    weights = prepared.weights
    for doc in prepared.retrieved:
        for unit in doc.units:
            expected = float(sum([weights[t] for t in unit.terms])) if unit.terms else 0.0
            assert unit.mass.hex() == expected.hex()  # bit for bit
