"""`prepare`'s shortcuts give what the plain computation gives, to the last bit.

With the default scorer, `prepare` scores passages from the terms of their
sentences instead of analysing each text again, and with the default
tokenizer it adds up a passage's estimate from its sentences' counts. Both
must equal what `LexicalScorer.score` and `estimate_tokens` return on the
whole text, for any text: generated ones included, with newlines after
symbols, sentences cut inside a word, CJK full stops and stray whitespace.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.budget import LexicalScorer, Passage, estimate_tokens
from capsa.budget.compress import Doc, Seen, _body_cost, _State, prepare
from capsa.budget.sentences import MAX_UNIT_CHARS

_PIECES = st.sampled_from([
    "The hotel cap", " is EUR 165.", " Taxis need a receipt.", "\n", "\n\n", "::", "\n- ",
    "ΑΣ", " 文字。", "ЖЖЖ", " ", "\t", "Hotels", "x" * 40, "y" * 700, "(see 3.2).", "caps_1",
    "\u00a0", "!!!\n", "Dr. No", "```\ncode = 1\n```",
])
_TEXTS = st.lists(_PIECES, min_size=1, max_size=30).map("".join)


class _PlainLexical(LexicalScorer):
    """The default scorer reached through `score` only: `prepare` takes no shortcut for it."""


def _passages(texts: list[str]) -> list[Passage]:
    return [Passage(id=f"p{n}", text=text, score=float(n)) for n, text in enumerate(texts)]


def _snapshot(docs: tuple[Doc, ...]) -> list[tuple[object, ...]]:
    return [(d.tokens_full, d.whole_tokens, d.prior, d.relevance, d.linked, d.units)
            for d in docs]


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=4), st.sampled_from(["hotel cap", "文字 receipt",
                                                                  "", "code caps"]))
def test_prepare_scores_as_the_scorer_would_on_each_text(texts: list[str], query: str) -> None:
    passages = _passages(texts)
    fast = prepare(query, passages[:1], passages[1:], tokenizer=estimate_tokens,
                   scorer=LexicalScorer())
    plain = prepare(query, passages[:1], passages[1:], tokenizer=estimate_tokens,
                    scorer=_PlainLexical())
    assert _snapshot(fast.attached + fast.retrieved) == _snapshot(plain.attached + plain.retrieved)


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_prepare_counts_a_whole_passage_as_the_estimate_does(text: str) -> None:
    prepared = prepare("hotel", (), _passages([text]), tokenizer=estimate_tokens,
                       scorer=LexicalScorer())
    assert prepared.retrieved[0].tokens_full == estimate_tokens(text)


def test_a_sentence_cut_inside_a_word_is_scored_and_counted_on_the_whole_text() -> None:
    word = "y" * MAX_UNIT_CHARS  # the query is the first piece of a word cut in three
    passages = _passages(["y" * (3 * MAX_UNIT_CHARS) + ".\n", f"{word} and more."])
    fast = prepare(word, (), passages, tokenizer=estimate_tokens, scorer=LexicalScorer())
    plain = prepare(word, (), passages, tokenizer=estimate_tokens, scorer=_PlainLexical())
    cut = fast.retrieved[0]
    assert len(cut.units) > 1 and cut.tokens_full == estimate_tokens(passages[0].text)
    assert _snapshot(fast.retrieved) == _snapshot(plain.retrieved)
    assert cut.relevance < fast.retrieved[1].relevance == 1.0


_SENTENCES = " ".join(f"Sentence {n} is about hotel number {n}." for n in range(12)) + "\n"


@given(st.sets(st.integers(0, 11), max_size=11), st.integers(0, 11),
       st.sampled_from(["passages", "brief", "features"]))
def test_the_cost_of_one_more_sentence_is_the_difference_of_the_two_bodies(
        kept: set[int], k: int, shape: str) -> None:
    prepared = prepare("hotel", (), _passages([_SENTENCES]), tokenizer=estimate_tokens,
                       scorer=LexicalScorer())
    doc = prepared.retrieved[0]
    state = _State(prepared, [doc], shape, 1000, None, Seen(), None)  # type: ignore[arg-type]
    before = _body_cost(prepared, doc, sorted(kept), shape) if kept else 0  # type: ignore[arg-type]
    after = _body_cost(prepared, doc, sorted(kept | {k}), shape)  # type: ignore[arg-type]
    assert state.added_cost(doc, kept, k) == after - before
