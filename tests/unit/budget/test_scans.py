"""The packer's hot scans give what their plain forms give.

`sentences._END` and `relevance._WORD` open with one character class so the
regex engine can skip to the next candidate in one scan; they must match
exactly what the plain patterns below match. `Seen` finds near duplicates
through an index of words, which must answer as comparing a sentence with
every packed one would.
"""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.budget import LexicalScorer, Passage, estimate_tokens
from capsa.budget.compress import _NEAR_DUPLICATE, _NEAR_DUPLICATE_WORDS, Seen, Unit, prepare
from capsa.budget.relevance import _WORD
from capsa.budget.sentences import _END

_PLAIN_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'’”)\]]*+(?=\s)|[。！？]++[」』）\"”]*+")
_PLAIN_WORD = re.compile(r"\d+(?:\.\d+)+|\w+")


def test_sentence_ends_are_the_plain_patterns_at_any_bounds() -> None:
    rng = random.Random(7)
    alphabet = ".!?…。！？」』）\"”'’)] \n\ta1"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        assert ([m.span() for m in _END.finditer(text, start, end)]
                == [m.span() for m in _PLAIN_END.finditer(text, start, end)]), text


def test_words_are_the_plain_patterns() -> None:
    rng = random.Random(1)
    alphabet = "0123456789..a_b é\u0663\u00b2 -x"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert _WORD.findall(text) == _PLAIN_WORD.findall(text), text
        assert bool(_WORD.fullmatch(text)) == bool(_PLAIN_WORD.fullmatch(text)), text


def _near(a: Unit, b: Unit) -> bool:
    if len(a.words) < _NEAR_DUPLICATE_WORDS or len(b.words) < _NEAR_DUPLICATE_WORDS:
        return False
    return (a.numbers == b.numbers
            and len(a.words & b.words) >= _NEAR_DUPLICATE * len(a.words | b.words))


_VOCABULARY = [f"w{n}" for n in range(24)] + ["7", "8"]


@st.composite
def _sentences(draw: st.DrawFn) -> list[str]:
    """Sentences and near copies of them: a word dropped, added or changed, the added or
    changed one sometimes a word no other sentence holds."""
    sentences: list[list[str]] = []
    for fresh in range(draw(st.integers(1, 12))):
        if sentences and draw(st.booleans()):
            words = list(draw(st.sampled_from(sentences)))
            edit = draw(st.sampled_from(["drop", "add", "change"]))
            at = draw(st.integers(0, len(words) - 1))
            word = draw(st.sampled_from([*_VOCABULARY, f"new{fresh}"]))
            if edit == "drop" and len(words) > 1:
                del words[at]
            elif edit == "add":
                words.insert(at, word)
            else:
                words[at] = word
        else:
            words = draw(st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=14))
        sentences.append(words)
    return [" ".join(words) + "." for words in sentences]


@settings(max_examples=300, deadline=None)
@given(_sentences())
def test_seen_finds_exactly_the_duplicates_a_full_comparison_finds(sentences: list[str]) -> None:
    text = "\n\n".join(sentences)
    prepared = prepare("w1", (), [Passage(id="p", text=text)], tokenizer=estimate_tokens,
                       scorer=LexicalScorer())
    seen, packed = Seen(), []
    for unit in prepared.retrieved[0].units:
        expected = any(unit.key == other.key or _near(unit, other) for other in packed)
        assert seen.covers(unit) is expected
        seen.add(unit)
        packed.append(unit)


def test_a_near_duplicate_with_a_word_no_packed_sentence_holds_is_found() -> None:
    # seven shared words and one new: the new word is the least held, so one look-up
    # would miss the copy; prefix filtering's bound looks at two
    text = "w1 w2 w3 w4 w5 w6 w7.\n\nw1 w2 w3 w4 w5 w6 w7 fresh."
    prepared = prepare("w1", (), [Passage(id="p", text=text)], tokenizer=estimate_tokens,
                       scorer=LexicalScorer())
    first, second = prepared.retrieved[0].units
    seen = Seen()
    seen.add(first)
    assert _near(second, first) and seen.covers(second)
