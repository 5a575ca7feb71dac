"""Two bundled retrieval routes over the sample corpus, for `capsa shadow` and the demo.

They live beside the demo, not in `capsa.shadow`, because they read the demo's
corpus: the shadow core imports nothing above itself.

The CLI needs routes it can run offline and observe completely: every
candidate's score, the gate's reason for each, the ranking's choice, the block
it renders, and the prompt it would send. Both routes retrieve with BM25 over
the paragraphs of `capsa.demo.corpus_source` and are deterministic:

- ``lexical``: the baseline a team might run today. Top 10 candidates, a gate
  at 0.2 of the best score, the 3 best admitted passages rendered whole.
- ``budgeted``: the same retrieval with a lower gate (0.1), then
  `capsa.budget.pack` into a 160-token budget: passages are kept whole,
  compressed to their query-relevant sentences, or dropped, and the packet's
  receipts become the gate's reasons (``over_budget``, ``duplicate``, and
  ``below_threshold`` for what the relevance floor found irrelevant).
  Everything packed is rendered, as capsa's tagged containers.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import cache

from capsa.budget import Budget, pack
from capsa.budget import Passage as BudgetPassage
from capsa.shadow import (
    DROP_GATE_REASONS,
    Candidate,
    GateObservation,
    GateReason,
    RenderedBlock,
    Route,
    RouteRun,
    ShadowRun,
    capture_route,
    compare_routes,
    prompt_for,
)
from capsa.shadow import CorpusPassage as Passage

__all__ = [
    "ROUTES",
    "BudgetedRoute",
    "LexicalRoute",
    "Passage",
    "Route",
    "RouteRun",
    "ShadowRun",
    "budgeted_route",
    "capture_route",
    "compare_routes",
    "lexical_route",
    "prompt_for",
    "sample_passages",
]

_SEPARATOR = "\n\n"
_WORD = re.compile(r"[a-z0-9]+")


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
            c.source_id: "admitted" if (c.score or 0.0) >= self._gate else "below_threshold"
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


# The tags `capsa.budget` renders around retrieved passages (compact documents
# when the budget is tight: openers only), declared as the block's scaffold.
# Should that format change, every capture of this route is refused as
# transformed, and the tests over the sample corpus fail loudly.
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
            c.source_id: "admitted" if (c.score or 0.0) >= self._gate else "below_threshold"
            for c in retrieved
        }
        eligible = [BudgetPassage(id=c.source_id, text=c.text, score=c.score)
                    for c in retrieved if reasons[c.source_id] == "admitted"]
        packet = pack(query, eligible, self._budget)
        for receipt in packet.dropped:
            reasons[receipt.passage_id] = DROP_GATE_REASONS[receipt.dropped or "budget"]
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
                scaffold=(_OPEN_CONTEXT, _CLOSE_CONTEXT,
                          *(() if packet.compact else (_CLOSE_DOCUMENT,)),
                          *(f"<document {i}>" if packet.compact else f'<document id="{i}">'
                            for i in kept)),
            ),
        )


def _gate(
    candidates: Sequence[Candidate], reasons: Mapping[str, GateReason]
) -> tuple[GateObservation, ...]:
    return tuple(GateObservation(source_id=c.source_id, reason=reasons[c.source_id])
                 for c in candidates)


def lexical_route(passages: Sequence[Passage] | None = None) -> LexicalRoute:
    """The bundled ``lexical`` route over `passages` (the sample corpus by default)."""
    return LexicalRoute("lexical", sample_passages() if passages is None else passages)


def budgeted_route(passages: Sequence[Passage] | None = None) -> BudgetedRoute:
    """The bundled ``budgeted`` route over `passages` (the sample corpus by default)."""
    return BudgetedRoute("budgeted", lexical_route(passages))


ROUTES: Mapping[str, Callable[[], Route]] = {
    "lexical": lexical_route,
    "budgeted": budgeted_route,
}
"""The bundled routes by name; each factory builds its index on call."""
