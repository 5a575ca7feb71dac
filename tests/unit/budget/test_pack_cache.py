"""What packing remembers between calls: prepared inputs and token counts.

Packing one retrieval for several budgets splits, counts and scores it once;
a hit must give exactly what a fresh computation gives, and inputs that differ
in any way (text, id, counter) must never share an entry.
"""

from __future__ import annotations

import sys

import pytest

from capsa.budget import Budget, LexicalScorer, Passage, estimate_tokens, pack
from capsa.budget.compress import prepare

from .conftest import HOTEL, MEALS, TRAINS, counting

QUERY = "hotel cap"


def _passages(hotel: str = HOTEL) -> list[Passage]:
    return [Passage(id="hotel", text=hotel), Passage(id="trains", text=TRAINS),
            Passage(id="meals", text=MEALS)]


def test_packing_again_for_other_budgets_counts_no_sentence_twice() -> None:
    count, seen = counting(estimate_tokens)
    first = [pack(QUERY, _passages(), Budget(max_tokens=n), tokenizer=count) for n in (40, 90)]
    assert seen.count("Taxis need a receipt.") == 1
    again = [pack(QUERY, _passages(), Budget(max_tokens=n), tokenizer=count) for n in (40, 90)]
    assert seen.count("Taxis need a receipt.") == 1  # not even once more
    assert [p.as_dict() for p in again] == [p.as_dict() for p in first]


def test_a_cached_packet_is_the_packet_of_a_fresh_process_state() -> None:
    count, _ = counting(estimate_tokens)
    warm = pack(QUERY, _passages(), Budget(max_tokens=60), tokenizer=count)
    pack(QUERY, _passages(), Budget(max_tokens=60), tokenizer=count)
    fresh = pack(QUERY, _passages(), Budget(max_tokens=60), tokenizer=lambda t: estimate_tokens(t))
    assert warm.render() == fresh.render() and warm.as_dict() == fresh.as_dict()


def test_a_changed_text_under_the_same_id_is_prepared_again() -> None:
    count, _ = counting(estimate_tokens)
    before = pack(QUERY, _passages(), Budget(max_tokens=200), tokenizer=count)
    changed = HOTEL.replace("EUR 165", "EUR 199")
    after = pack(QUERY, _passages(changed), Budget(max_tokens=200), tokenizer=count)
    assert "EUR 165" in before.render() and "EUR 165" not in after.render()
    assert "EUR 199" in after.render()


def test_the_same_passages_on_another_page_are_prepared_again() -> None:
    """The page is rendered in the tag, so it is counted: a hit would plan the old page."""
    count, _ = counting(estimate_tokens)
    for page in ("3", "1234567890 (appendix, second volume)"):
        passages = [p.model_copy(update={"page": page}) for p in _passages()]
        packet = pack(QUERY, passages, Budget(max_tokens=90), tokenizer=count)
        fresh = pack(QUERY, passages, Budget(max_tokens=90),
                     tokenizer=lambda t: estimate_tokens(t))
        assert packet.render() == fresh.render() and f'page="{page}"' in packet.render()
        assert estimate_tokens(packet.render()) <= 90


def test_a_hit_hands_back_the_callers_own_passages() -> None:
    """Packing never reads metadata, so it shares an entry; the packet holds the caller's."""
    count, _ = counting(estimate_tokens)
    for user in ("alice", "bob"):
        passages = [p.model_copy(update={"metadata": {"user": user}}) for p in _passages()]
        packet = pack(QUERY, passages, Budget(max_tokens=200), tokenizer=count)
        assert packet.passages and all(
            any(p is given for given in passages) for p in packet.passages)
        assert {p.metadata["user"] for p in packet.passages} == {user}


def test_prepared_counts_remember_each_text_apart() -> None:
    count, seen = counting(estimate_tokens)
    prepared = prepare(QUERY, (), _passages(), tokenizer=count, scorer=LexicalScorer())
    before = len(seen)
    texts = ["one two", "one two ", "one  two three", "one two"]
    counts = [prepared.count(text) for text in texts]
    assert counts == [estimate_tokens(text) for text in texts]
    assert seen[before:] == texts[:3]  # the repeat is remembered, the near-equals are not


def test_a_large_input_leaves_the_cache_once_newer_ones_come(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules["capsa.budget.pack"], "_PREPARED_CHARS", 1000)
    count, seen = counting(estimate_tokens)
    large = [Passage(id="big", text="The hotel cap is high. " * 60)]  # 1,380 characters
    pack(QUERY, large, Budget(max_tokens=50), tokenizer=count)
    pack(QUERY, large, Budget(max_tokens=90), tokenizer=count)  # the newest stays: a hit
    assert seen.count(large[0].text) == 1
    pack(QUERY, _passages(), Budget(max_tokens=50), tokenizer=count)
    pack(QUERY, large, Budget(max_tokens=50), tokenizer=count)  # evicted: prepared again
    assert seen.count(large[0].text) == 2
