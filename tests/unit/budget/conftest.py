"""Builders for budget tests: passages and tokenizers written in code, and benchmark rows."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from pathlib import Path

import pytest

from capsa.budget import Passage


def answer_form(text: str) -> str:
    """SQuAD's answer normalisation, as the benchmarks count an answer kept."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def qa_row(path: Path, question_id: str) -> dict[str, object]:
    """One question of a benchmark set (``benchmarks/data/*-qa.jsonl``), by its id."""
    return next(row for line in path.read_text("utf-8").splitlines()
                if (row := json.loads(line))["question_id"] == question_id)


TAG = re.compile(r"<\s*/?\s*(?:context|document)\b[^>]*>", re.IGNORECASE)
"""Anything a reader could take for one of capsa's container tags."""

HOTEL = (
    "Flights are booked in economy class. The nightly hotel cap is EUR 165 including taxes. "
    "In high-cost cities the hotel cap is EUR 230. Travellers choose hotels from the preferred "
    "list. Taxis need a receipt."
)
TRAINS = (
    "Rail travel is booked in standard class. First class may be used when a journey is longer "
    "than four hours. Tickets are bought 14 days ahead."
)
MEALS = (
    "Travellers receive a daily meal allowance of EUR 55. The allowance is reduced when a meal "
    "is provided. Alcohol is never reimbursed."
)


def rules(prefix: str, count: int = 30) -> str:
    """A long text of distinct sentences (nothing for deduplication to remove)."""
    return " ".join(f"{prefix} rule {n}: the hotel cap in city {n} is EUR {100 + n}."
                    for n in range(count))


def make_passage(
    text: str = HOTEL, *, id: str = "p1", source: str | None = None, score: float | None = None
) -> Passage:
    """A passage with sensible defaults; every argument can be overridden."""
    return Passage(id=id, text=text, source=source, score=score)


@pytest.fixture
def passages() -> list[Passage]:
    """Three policy passages; only the first talks about hotels."""
    return [
        make_passage(TRAINS, id="trains", source="travel.pdf"),
        make_passage(HOTEL, id="hotel", source="travel.pdf"),
        make_passage(MEALS, id="meals", source="meals.md"),
    ]


def char_tokenizer(text: str) -> int:
    """One token per four characters, rounded up: a simple, non-additive counter."""
    return -(-len(text) // 4)


def counting(tokenizer: Callable[[str], int]) -> tuple[Callable[[str], int], list[str]]:
    """Wrap a tokenizer so a test can see every string it was asked to count."""
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return tokenizer(text)

    return count, seen
