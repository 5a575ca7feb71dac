from __future__ import annotations

import pytest

from capsa.budget import estimate_tokens


def test_estimate_tokens_is_zero_for_empty_text() -> None:
    assert estimate_tokens("") == 0


def test_estimate_tokens_counts_one_per_short_word_and_symbol() -> None:
    assert estimate_tokens("The cap is high.") == 5


@pytest.mark.parametrize(("text", "expected"), [
    ("reimbursement", 2),  # 13 letters: one token plus one per further seven
    ("1", 1),
    ("2025", 2),           # one token per three digits
    ("123456", 2),
    ("...", 2),            # ASCII symbol runs cost one per pair
    ("東京都", 3),           # one per CJK character
    ("a\nb", 3),           # newlines are paid for
    ("   ", 0),            # other whitespace is free
])
def test_estimate_tokens_prices_each_kind_of_piece(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_tokens_is_additive_over_whitespace_separated_pieces() -> None:
    left, right = "The hotel cap is EUR 165.", "Taxis need a receipt."
    assert estimate_tokens(f"{left} {right}") == estimate_tokens(left) + estimate_tokens(right)


def test_estimate_tokens_charges_for_container_markup() -> None:
    assert estimate_tokens('<document id="p1" source="a.pdf"></document>') >= 12
