"""Compare two fully observable routes over a list of queries, offline.

`capsa shadow` and the demo use this: a `Route` reports everything it did for
one query as a `RouteRun` (every candidate with its score, the gate's reason
for each, the selection, the rendered block), `capture_route` turns that into
a finalized capture with the wire observed, and `compare_routes` pairs the two
routes query by query. Routes are built by factories that take the corpus as
`CorpusPassage`s, so the same route runs over the sample corpus or a user's
own documents.
"""

from __future__ import annotations

import logging
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from capsa import telemetry
from capsa.errors import CaptureInvalid
from capsa.shadow.capture import Candidate, GateObservation, RenderedBlock, RouteCapture, Side
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair

_log = logging.getLogger("capsa.shadow")

__all__ = [
    "CorpusPassage",
    "Route",
    "RouteFactory",
    "RouteRun",
    "ShadowRun",
    "capture_route",
    "compare_routes",
    "prompt_for",
]


@dataclass(frozen=True)
class CorpusPassage:
    """One retrievable passage of a corpus a route is built over."""

    source_id: str
    """Stable identity, such as ``<file name>#<paragraph number>``."""
    text: str
    """The passage as written."""


@dataclass(frozen=True)
class RouteRun:
    """Everything one route did for one query, ready for `RouteCapture`."""

    candidates: tuple[Candidate, ...]
    admitted: tuple[str, ...]
    selected: tuple[str, ...]
    gate: tuple[GateObservation, ...]
    block: RenderedBlock


class Route(Protocol):
    """A retrieval route that can be observed end to end."""

    name: str

    def run(self, query: str) -> RouteRun:
        """Retrieve, gate, select and render for `query`."""
        ...


class RouteFactory(Protocol):
    """Builds a route over a corpus; what ``capsa shadow`` imports as ``module:factory``."""

    def __call__(self, passages: Sequence[CorpusPassage]) -> Route:
        """The route, indexed over `passages`."""
        ...


@dataclass(frozen=True)
class ShadowRun:
    """The rows of a run over many queries, and how many queries produced none and why."""

    rows: tuple[PairedDecision, ...]
    invalidated: int
    causes: Mapping[str, int] = field(default_factory=dict)
    """Invalidated queries by `capsa.errors.RefusalCause`; the counts add up to `invalidated`."""
    unretrieved: int = 0
    """Queries paired without fault where neither route retrieved a candidate: no row to
    release, and counted here so every query is accounted for."""


def prompt_for(query: str, block: str) -> list[dict[str, str]]:
    """The messages a simple RAG chain would send for `query` with `block` as context."""
    return [
        {"role": "system", "content": "Answer only from the context. Say so if it is missing."},
        {"role": "user", "content": f"Context:\n\n{block}\n\nQuestion: {query}"},
    ]


def capture_route(side: Side, query: str, route: Route) -> RouteCapture:
    """Run `route` for `query` and capture it fully, wire included.

    Raises:
        CaptureInvalid: the run was ambiguous; the capture is discarded.
    """
    run = route.run(query)
    capture = RouteCapture(side)
    capture.observe(query, run.candidates, run.admitted, run.selected, run.gate)
    capture.finalize(run.block)
    capture.observe_provider(prompt_for(query, run.block.text))
    return capture


def compare_routes(
    queries: Iterable[str],
    baseline: Route,
    candidate: Route,
    *,
    random_bytes: RandomBytes = secrets.token_bytes,
) -> ShadowRun:
    """Run both routes on every query, pair the captures and count the invalidated ones by cause.

    Every query is accounted for: paired into rows, invalidated (by cause), or
    `ShadowRun.unretrieved` when neither route found a candidate. A route that
    raises loses its query as ``other``, and the run goes on. Rows
    come out in the order of their random ids, not the queries': rows in the
    queries' order would tell anyone holding the queries file which query each
    group of rows answers.
    """
    rows: list[PairedDecision] = []
    causes: Counter[str] = Counter()
    unretrieved = 0
    for query in queries:
        try:
            b = capture_route("baseline", query, baseline)
            c = capture_route("candidate", query, candidate)
            paired = pair(b, c, random_bytes=random_bytes)
        except CaptureInvalid as refused:
            causes[refused.cause] += 1
            telemetry.shadow_invalidated(refused.cause)
            continue
        except Exception as error:  # noqa: BLE001 - one query lost, never the run
            # its message may hold the query: only the type is said
            _log.debug("a route raised %s; the query is counted as other", type(error).__name__)
            causes["other"] += 1
            telemetry.shadow_invalidated("other")
            continue
        unretrieved += not paired
        rows.extend(paired)
    return ShadowRun(rows=tuple(sorted(rows, key=lambda row: row.row_id)),
                     invalidated=causes.total(), causes=dict(sorted(causes.items())),
                     unretrieved=unretrieved)
