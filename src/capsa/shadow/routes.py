"""Two bundled retrieval routes over the sample corpus, for `capsa shadow`.

The CLI needs routes it can run offline and observe completely: every
candidate's score, the gate's reason for each, the ranking's choice, the block
it renders, and the prompt it would send. Both routes retrieve with BM25 over
the paragraphs of `capsa.demo.corpus_source` and are deterministic:

- ``lexical``: the baseline a team might run today. Top 10 candidates, a gate
  at 0.2 of the best score, the 3 best admitted passages rendered whole.
- ``budgeted``: the same retrieval with a lower gate (0.1), then
  `capsa.budget.pack` into a 160-token budget: passages are kept whole,
  compressed to their query-relevant sentences, or dropped, and the packet's
  receipts become the gate's reasons (``over_budget``, ``duplicate``).
  Everything packed is rendered, as capsa's tagged containers.
"""

from __future__ import annotations

import math
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from capsa.budget import Budget, DropReason, pack
from capsa.budget import Passage as BudgetPassage
from capsa.errors import CaptureInvalid
from capsa.shadow.capture import (
    Candidate,
    GateObservation,
    GateReason,
    RenderedBlock,
    RouteCapture,
    Side,
)
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair

__all__ = [
    "ROUTES",
    "BudgetedRoute",
    "LexicalRoute",
    "Passage",
    "Route",
    "RouteRun",
    "ShadowRun",
    "capture_route",
    "compare_routes",
    "prompt_for",
    "sample_passages",
]

_SEPARATOR = "\n\n"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Passage:
    """One retrievable paragraph of the sample corpus."""

    source_id: str
    """``<file name>#<paragraph number>``, stable across runs."""
    text: str
    """The paragraph as written in the corpus."""


@dataclass(frozen=True)
class RouteRun:
    """Everything one route did for one query, ready for `RouteCapture`."""

    candidates: tuple[Candidate, ...]
    admitted: tuple[str, ...]
    selected: tuple[str, ...]
    gate: tuple[GateObservation, ...]
    block: RenderedBlock


class Route(Protocol):
    """A retrieval route the CLI can observe end to end."""

    name: str

    def run(self, query: str) -> RouteRun:
        """Retrieve, gate, select and render for `query`."""
        ...


@dataclass(frozen=True)
class ShadowRun:
    """The rows of a run over many queries and how many queries produced none."""

    rows: tuple[PairedDecision, ...]
    invalidated: int


@cache
def sample_passages() -> tuple[Passage, ...]:
    """Split the sample corpus into paragraphs of six words or more.

    Tables and notices, whose rows are single lines, are split per line.
    """
    from capsa.demo.corpus_source import DOCUMENTS

    passages = []
    for doc in DOCUMENTS:
        blocks = doc.text.split("\n\n")
        if doc.kind in ("xlsx", "png"):
            blocks = [line for block in blocks for line in block.split("\n")]
        for number, block in enumerate(blocks):
            if len(block.split()) >= 6:
                passages.append(Passage(f"{doc.name}#{number}", block))
    return tuple(passages)


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class _Bm25:
    """Okapi BM25 over a fixed set of passages."""

    def __init__(self, passages: Sequence[Passage], *, k1: float, b: float) -> None:
        self._docs = [Counter(_terms(p.text)) for p in passages]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg = sum(self._lengths) / len(self._lengths)
        df = Counter(term for d in self._docs for term in d)
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self._k1, self._b = k1, b

    def scores(self, query: str) -> list[float]:
        terms = set(_terms(query))
        out = []
        for doc, length in zip(self._docs, self._lengths, strict=True):
            norm = self._k1 * (1 - self._b + self._b * length / self._avg)
            out.append(
                sum(self._idf[t] * doc[t] * (self._k1 + 1) / (doc[t] + norm)
                    for t in terms if t in doc)
            )
        return out


class LexicalRoute:
    """BM25 retrieval, a score gate, then the top k admitted passages rendered whole.

    Scores are divided by the query's best score, so they lie in [0, 1].

    Args:
        name: The route's name on the command line.
        passages: What to retrieve from.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation, 0 (none) to 1 (full).
        candidates: How many top-scoring passages the route considers.
        gate: The lowest normalised score the gate admits.
        top_k: How many admitted passages ranking selects.
    """

    def __init__(
        self,
        name: str,
        passages: Sequence[Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        candidates: int = 10,
        gate: float = 0.2,
        top_k: int = 3,
    ) -> None:
        if not passages:
            raise ValueError("a route needs at least one passage")
        self.name = name
        self._passages = tuple(passages)
        self._bm25 = _Bm25(self._passages, k1=k1, b=b)
        self._candidates, self._gate, self._top_k = candidates, gate, top_k

    def retrieve(self, query: str) -> tuple[Candidate, ...]:
        """The top candidates for `query`, best first, scores normalised to [0, 1]."""
        raw = self._bm25.scores(query)
        ranked = sorted((i for i, s in enumerate(raw) if s > 0), key=lambda i: (-raw[i], i))
        ranked = ranked[: self._candidates]
        best = raw[ranked[0]] if ranked else 1.0
        return tuple(
            Candidate(source_id=self._passages[i].source_id, score=raw[i] / best,
                      text=self._passages[i].text)
            for i in ranked
        )

    def run(self, query: str) -> RouteRun:
        """Retrieve, gate, select and render for `query`."""
        candidates = self.retrieve(query)
        reasons: dict[str, GateReason] = {
            c.source_id: "admitted" if c.score >= self._gate else "below_threshold"
            for c in candidates
        }
        admitted = tuple(c.source_id for c in candidates if reasons[c.source_id] == "admitted")
        selected = admitted[: self._top_k]
        texts = {c.source_id: c.text for c in candidates}
        return RouteRun(
            candidates=candidates,
            admitted=admitted,
            selected=selected,
            gate=_gate(candidates, reasons),
            block=RenderedBlock(
                query=query,
                text=_SEPARATOR.join(texts[s] for s in selected),
                scaffold=(_SEPARATOR,),
            ),
        )


_DROP_REASONS: Mapping[DropReason, GateReason] = {
    "budget": "over_budget",
    "max_items": "over_budget",
    "duplicate": "duplicate",
    "empty": "filtered",
}

# The tags `capsa.budget` renders around retrieved passages, declared as the
# block's scaffold. Should that format change, every capture of this route is
# refused as transformed, and the tests over the sample corpus fail loudly.
_OPEN_CONTEXT = '<context source="retrieved">'
_CLOSE_CONTEXT = "</context>"
_CLOSE_DOCUMENT = "</document>"


class BudgetedRoute:
    """BM25 retrieval, a score gate, then `capsa.budget.pack` into a token budget.

    What the packet keeps is admitted and selected, as the packed (possibly
    compressed) text; what it drops is refused with the receipt's reason.

    Args:
        name: The route's name on the command line.
        retrieval: The lexical route whose candidates are packed.
        gate: The lowest normalised score the gate lets into packing.
        max_tokens: The packet's budget, tags included, in estimated tokens.
    """

    def __init__(
        self, name: str, retrieval: LexicalRoute, *, gate: float = 0.1, max_tokens: int = 160
    ) -> None:
        self.name = name
        self._retrieval = retrieval
        self._gate = gate
        self._budget = Budget(max_tokens=max_tokens)

    def run(self, query: str) -> RouteRun:
        """Retrieve, gate, pack and render for `query`."""
        retrieved = self._retrieval.retrieve(query)
        reasons: dict[str, GateReason] = {
            c.source_id: "admitted" if c.score >= self._gate else "below_threshold"
            for c in retrieved
        }
        eligible = [BudgetPassage(id=c.source_id, text=c.text, score=c.score)
                    for c in retrieved if reasons[c.source_id] == "admitted"]
        packet = pack(query, eligible, self._budget)
        for receipt in packet.dropped:
            reasons[receipt.passage_id] = _DROP_REASONS[receipt.dropped or "budget"]
        packed = {p.id: text for p, text in zip(packet.passages, packet.texts, strict=True)}
        candidates = tuple(c.model_copy(update={"text": packed.get(c.source_id, c.text)})
                           for c in retrieved)
        kept = tuple(p.id for p in packet.passages)
        return RouteRun(
            candidates=candidates,
            admitted=kept,
            selected=kept,
            gate=_gate(candidates, reasons),
            block=RenderedBlock(
                query=query,
                text=packet.render(),
                scaffold=(_OPEN_CONTEXT, _CLOSE_CONTEXT, _CLOSE_DOCUMENT,
                          *(f'<document id="{i}">' for i in kept)),
            ),
        )


def _gate(
    candidates: Sequence[Candidate], reasons: Mapping[str, GateReason]
) -> tuple[GateObservation, ...]:
    return tuple(GateObservation(source_id=c.source_id, reason=reasons[c.source_id])
                 for c in candidates)


ROUTES: Mapping[str, Callable[[], Route]] = {
    "lexical": lambda: LexicalRoute("lexical", sample_passages()),
    "budgeted": lambda: BudgetedRoute("budgeted", LexicalRoute("lexical", sample_passages())),
}
"""The bundled routes by name; each factory builds its index on call."""


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
    """Run both routes on every query, pair the captures and count the invalidated ones."""
    rows: list[PairedDecision] = []
    invalidated = 0
    for query in queries:
        try:
            b = capture_route("baseline", query, baseline)
            c = capture_route("candidate", query, candidate)
            paired = pair(b, c, random_bytes=random_bytes)
        except CaptureInvalid:
            invalidated += 1
            continue
        rows.extend(paired)
    return ShadowRun(rows=tuple(rows), invalidated=invalidated)
