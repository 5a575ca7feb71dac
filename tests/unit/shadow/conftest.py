"""Factories for shadow tests: candidates, observed and finalized captures, counting ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pytest

from capsa.shadow import (
    Candidate,
    GateObservation,
    GateReason,
    RenderedBlock,
    RouteCapture,
    Side,
)

QUERY = "how long is the refund window"

TEXTS = {
    "a": "Refunds are accepted within 30 days of delivery.",
    "b": "Returned goods must be unused and in their original packaging.",
    "c": "Shipping costs are refunded only when the item arrived damaged.",
    "d": "Store credit never expires.",
}


def make_candidates(scores: dict[str, float]) -> list[Candidate]:
    """Candidates with the fixture texts, in the given order."""
    return [Candidate(source_id=sid, score=s, text=TEXTS[sid]) for sid, s in scores.items()]


def gate_for(candidates: Sequence[Candidate], admitted: Sequence[str]) -> list[GateObservation]:
    """The honest gate report for `admitted`: everything else below threshold."""

    def reason(sid: str) -> GateReason:
        return "admitted" if sid in admitted else "below_threshold"

    return [GateObservation(source_id=c.source_id, reason=reason(c.source_id)) for c in candidates]


class CaptureFactory(Protocol):
    """Builds a capture; every argument has a default (a, b, c all admitted and selected)."""

    def __call__(
        self,
        side: Side = ...,
        scores: dict[str, float] | None = ...,
        admitted: Sequence[str] | None = ...,
        selected: Sequence[str] | None = ...,
        query: str = ...,
    ) -> RouteCapture: ...


def _observe(
    side: Side = "baseline",
    scores: dict[str, float] | None = None,
    admitted: Sequence[str] | None = None,
    selected: Sequence[str] | None = None,
    query: str = QUERY,
) -> RouteCapture:
    scores = {"a": 0.9, "b": 0.6, "c": 0.3} if scores is None else scores
    candidates = make_candidates(scores)
    admitted = list(scores) if admitted is None else list(admitted)
    selected = admitted if selected is None else list(selected)
    capture = RouteCapture(side)
    capture.observe(query, candidates, admitted, selected, gate_for(candidates, admitted))
    return capture


def block_of(ids: Sequence[str], query: str = QUERY) -> RenderedBlock:
    """The block a plain renderer makes of `ids`: texts joined by blank lines."""
    return RenderedBlock(query=query, text="\n\n".join(TEXTS[i] for i in ids))


@pytest.fixture
def observe() -> CaptureFactory:
    """Build an observed capture; by default a, b, c all admitted and selected."""
    return _observe


@pytest.fixture
def finalized() -> CaptureFactory:
    """Build a finalized capture whose block holds exactly the selected passages."""

    def build(
        side: Side = "baseline",
        scores: dict[str, float] | None = None,
        admitted: Sequence[str] | None = None,
        selected: Sequence[str] | None = None,
        query: str = QUERY,
    ) -> RouteCapture:
        scores = {"a": 0.9, "b": 0.6, "c": 0.3} if scores is None else scores
        admitted = list(scores) if admitted is None else list(admitted)
        selected = admitted if selected is None else list(selected)
        capture = _observe(side, scores, admitted, selected, query)
        capture.finalize(block_of(selected, query))
        return capture

    return build


@pytest.fixture
def query() -> str:
    """The query every factory capture observes."""
    return QUERY


@pytest.fixture
def texts() -> dict[str, str]:
    """The fixture passages by source id."""
    return dict(TEXTS)


@pytest.fixture
def counting_bytes() -> CountingBytes:
    """A fresh deterministic random source."""
    return CountingBytes()


class CountingBytes:
    """A deterministic random source: 1, 2, 3, ... as big-endian bytes."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, n: int) -> bytes:
        self.calls += 1
        return self.calls.to_bytes(n, "big")
