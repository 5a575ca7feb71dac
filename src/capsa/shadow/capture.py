"""One route's decisions for one query, held in process until pairing.

A `RouteCapture` records, per candidate passage, what a retrieval route did
with it: the score it gave, whether its gate admitted it and why not, whether
ranking selected it, whether it reached the rendered context block, and whether
that block was visible in the messages sent to the model. Source identities and
texts live only inside the capture; they exist to join two routes in
`capsa.shadow.pair` and never leave it.

A capture is strict and single-use. Anything it cannot attribute with
certainty (the same source twice, a gate that contradicts the admitted set, a
block that is not made of the selected passages) is refused with
`CaptureInvalid` and the capture is discarded: a wrong comparison row is worse
than a missing one. Refusing never touches the request being served.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from capsa.errors import CaptureInvalid

__all__ = [
    "DROP_GATE_REASONS",
    "GATE_REASONS",
    "Candidate",
    "CaptureState",
    "GateObservation",
    "GateReason",
    "RenderedBlock",
    "RouteCapture",
    "Side",
    "capture_packed",
    "capture_retrieved",
]

Side = Literal["baseline", "candidate"]
"""Which route a capture observes: the one being served, or the one on trial."""

GateReason = Literal["admitted", "below_threshold", "over_budget", "filtered", "duplicate"]
"""Why a route's gate let a candidate through or stopped it: a closed set.

`admitted` passed the gate; `below_threshold` its score was under the route's
cut-off; `over_budget` the route's item or token allowance ran out before it;
`filtered` a metadata or policy filter removed it; `duplicate` the route kept
another copy of the same content instead.
"""

GATE_REASONS: frozenset[str] = frozenset(get_args(GateReason))
"""Every value `GateReason` allows, for checks at run time."""

CaptureState = Literal["fresh", "observed", "finalized", "paired", "invalid"]
"""Where a capture is in its one life: observe, finalize, pair; or discarded."""

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Candidate(BaseModel):
    """One passage a route considered for one query.

    It carries the source identity and the text, so it never leaves the
    process: `pair` reads it and releases only numbers.
    """

    model_config = _CONFIG

    source_id: str = Field(min_length=1)
    """Stable identity of the source passage, the same on both routes (a chunk id)."""
    score: float | None = Field(default=None, strict=True)
    """The route's relevance score, normalised by the route into [0, 1].

    None where the route's gate gives no score (a packer that keeps or drops,
    a filter); such a passage still has a gate reason, a rank and inclusion."""
    text: str
    """Exactly what the route renders into the context block if it selects this passage."""


class GateObservation(BaseModel):
    """What a route's gate decided about one candidate, as the gate reported it."""

    model_config = _CONFIG

    source_id: str
    """The candidate the decision is about."""
    reason: GateReason
    """`admitted`, or why the gate stopped the candidate."""


class RenderedBlock(BaseModel):
    """The context block a route rendered for one query, verbatim.

    `scaffold` declares what the renderer added around the passages (headers,
    container tags); anything else in `text` that is not a selected passage
    makes the block unattributable.
    """

    model_config = _CONFIG

    query: str
    """The query the block was rendered for; must match the observed query."""
    text: str
    """The block exactly as it was handed on towards the model."""
    scaffold: tuple[str, ...] = ()
    """Strings the renderer wrapped around the passages; whitespace needs no declaring."""
    sources: tuple[str, ...] | None = None
    """The source ids the renderer says it hydrated into the block, in order.

    When given, hydration is checked against the captured retrieval, not by
    text alone: every id must be a passage this capture selected, and each
    must be found in the block. None falls back to locating selected texts.
    """


class _Decision(BaseModel):
    """One candidate's decisions on one side; internal, it still knows the source."""

    model_config = _CONFIG

    source_id: str
    score: float | None
    reason: GateReason
    admitted: bool
    selected: bool
    rank: int | None
    included: bool = False


class RouteCapture:
    """Observe one route for one query, then hand it to `pair`.

    The life of a capture is `observe` (what the gate and ranking did),
    `finalize` (what reached the rendered block), optionally `observe_provider`
    (whether that block was on the wire), then `pair`. Each step happens at
    most once; any refusal discards the capture.

    Args:
        side: ``"baseline"`` for the route being served, ``"candidate"`` for the
            route on trial.

    Raises:
        ValueError: `side` is neither.

    Examples:
        >>> capture = RouteCapture("baseline")
        >>> capture.observe(
        ...     "refund window",
        ...     [Candidate(source_id="a", score=0.9, text="Refunds within 30 days.")],
        ...     admitted=["a"], selected=["a"],
        ...     observed_gate=[GateObservation(source_id="a", reason="admitted")],
        ... )
        >>> capture.finalize(RenderedBlock(query="refund window", text="Refunds within 30 days."))
        >>> capture.state
        'finalized'
    """

    def __init__(self, side: Side) -> None:
        if side not in ("baseline", "candidate"):
            raise ValueError(f"side must be 'baseline' or 'candidate', not {side!r}")
        self.side: Side = side
        self._state: CaptureState = "fresh"
        self._query: str | None = None
        self._decisions: dict[str, _Decision] = {}
        self._texts: dict[str, str] = {}
        self._included_texts: tuple[str, ...] = ()
        self._block = ""
        self._visible: bool | None = None
        self._wire_observed = False

    @property
    def state(self) -> CaptureState:
        """`fresh`, `observed`, `finalized`, `paired` (spent) or `invalid` (discarded)."""
        return self._state

    @property
    def query(self) -> str | None:
        """The observed query, or None before `observe` and after a discard."""
        return self._query

    def observe(
        self,
        query: str,
        candidates: Sequence[Candidate],
        admitted: Sequence[str],
        selected: Sequence[str],
        observed_gate: Sequence[GateObservation] | None,
    ) -> None:
        """Record the gate's and the ranking's decisions, once.

        Args:
            query: The query the route answered.
            candidates: Every passage the route scored, in its own order.
            admitted: Source ids the gate let through.
            selected: Source ids ranking chose from the admitted ones, best
                first; the position is the passage's released rank (1-based).
            observed_gate: The gate's own report, one entry per candidate.
                None (not observed) is refused: admission would be a guess.

        Raises:
            CaptureInvalid: the capture was used before, an identity repeats, a
                score is not a finite number in [0, 1], the gate report is
                missing or disagrees with `admitted`, or `selected` is not a
                subset of `admitted`. The capture is discarded.
        """
        with self._discard_on_refusal():
            if self._state != "fresh":
                raise CaptureInvalid(f"a capture observes once; this one is {self._state}",
                                     cause="misuse")
            self._decisions, self._texts = _decide(candidates, admitted, selected, observed_gate)
            self._query = query
            self._state = "observed"

    def finalize(self, block: RenderedBlock) -> None:
        """Resolve which selected passages reached the rendered block, once.

        Inclusion is decided per passage span, so overlapping passages (real
        chunkers' output: neighbours sharing a sentence, one chunk inside
        another, two documents with the same text) pair. A selected passage
        is included when its whole text occurs in the block, as its own
        rendering or inside a longer selected passage's; the shared span
        belongs to both. The block must consist of selected passages,
        declared scaffold and whitespace; anything else means it was
        transformed and inclusion cannot be attributed. When the block
        declares the `sources` it was hydrated from, each must be a selected
        passage found in it, and every rendering must be owed to one.

        Args:
            block: The block the route rendered for the observed query.

        Raises:
            CaptureInvalid: the capture is not freshly observed, the block is
                for another query, a selected text is empty or rendered more
                often than the passages that carry it, the block holds text
                that no selected passage or scaffold covers, or its declared
                sources are not the selected passages found in it. The capture
                is discarded.
        """
        with self._discard_on_refusal():
            if self._state != "observed":
                raise CaptureInvalid(f"finalize needs an observed capture, not a {self._state} one",
                                     cause="misuse")
            if block.query != self._query:
                raise CaptureInvalid("the rendered block is from a different query",
                                     cause="query_mismatch")
            selected = {sid: self._texts[sid] for sid, d in self._decisions.items() if d.selected}
            located = _locate(block, selected)
            _check_hydration(block.sources, selected, located)
            included = located.included
            self._decisions = {
                sid: d.model_copy(update={"included": sid in included})
                for sid, d in self._decisions.items()
            }
            self._included_texts = tuple(selected[sid] for sid in sorted(included))
            self._block = block.text
            self._state = "finalized"

    def observe_provider(self, messages: Sequence[object], *,
                         partial: Literal["refuse", "unknown"] = "refuse") -> None:
        """Record whether the block was visible in the messages sent to the model, once.

        Messages may be strings, mappings with a ``content`` key, or objects
        with a ``content`` attribute; content may be a string or a list of
        strings and ``{"type": "text", "text": ...}`` parts (other parts, such
        as images, are skipped). A message of any other shape makes the wire
        unobservable: visibility stays unknown and the capture stays valid.

        A wire that holds some of the included passages but not the block as
        rendered was transformed on the way (a synthesizer that splits the
        context over several calls, a custom separator). With ``partial=
        "unknown"`` visibility then stays unknown and the capture stays valid,
        as the live recorder wants: the rest of the comparison is sound.

        Raises:
            CaptureInvalid: the capture is not finalized, the wire was already
                observed, or (with ``partial="refuse"``, the default) the wire
                holds part of the block only. Every refusal discards the capture.
        """
        with self._discard_on_refusal():
            if self._state != "finalized" or self._wire_observed:
                raise CaptureInvalid("provider messages are observed once, after finalize",
                                     cause="misuse")
            self._wire_observed = True
            texts = _wire_texts(messages)
            if texts is None:
                return
            try:
                self._visible = _block_visible(self._block, self._included_texts, texts)
            except CaptureInvalid:
                if partial == "refuse":
                    raise
                self._visible = None

    def invalidate(self) -> None:
        """Discard the capture; the request being served is not affected."""
        self._state = "invalid"
        self._query = None
        self._decisions = {}
        self._texts = {}
        self._included_texts = ()
        self._block = ""
        self._visible = None
        self._wire_observed = False

    def _release(self) -> tuple[str, dict[str, _Decision], bool | None]:
        """Hand the decisions to `pair` and spend the capture."""
        if self._state != "finalized" or self._query is None:
            raise CaptureInvalid(f"pairing needs a finalized capture; this one is {self._state}",
                                 cause="misuse")
        query, decisions, visible = self._query, self._decisions, self._visible
        self.invalidate()
        self._state = "paired"
        return query, decisions, visible

    @contextmanager
    def _discard_on_refusal(self) -> Iterator[None]:
        """Any `CaptureInvalid` raised inside discards the capture, then propagates."""
        try:
            yield
        except CaptureInvalid:
            self.invalidate()
            raise


def capture_retrieved(
    side: Side, query: str, retrieved: Sequence[Candidate], *, separator: str = "\n\n"
) -> RouteCapture:
    """Capture a plain retriever's answer: everything returned was admitted and selected.

    A retriever that only returns documents exposes no gate and no renderer,
    so this records each returned passage as admitted and selected, renders
    them joined by `separator` (as prompt templates usually do) and finalizes
    against that. Scores, selection and rank order are what such a comparison
    measures; visibility stays unknown.

    Raises:
        CaptureInvalid: as `RouteCapture.observe` and `RouteCapture.finalize`.

    Examples:
        >>> docs = [Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")]
        >>> capture_retrieved("candidate", "refunds", docs).state
        'finalized'
    """
    capture = RouteCapture(side)
    ids = [c.source_id for c in retrieved]
    gate = [GateObservation(source_id=sid, reason="admitted") for sid in ids]
    capture.observe(query, retrieved, ids, ids, gate)
    block = separator.join(c.text for c in retrieved)
    capture.finalize(RenderedBlock(query=query, text=block, scaffold=(separator,)))
    return capture


DROP_GATE_REASONS: Mapping[str, GateReason] = {
    "budget": "over_budget",
    "max_items": "over_budget",
    "duplicate": "duplicate",
    "empty": "filtered",
    "irrelevant": "below_threshold",
}
"""The gate reason each `capsa.budget` receipt drop reason stands for."""


def capture_packed(
    side: Side,
    query: str,
    retrieved: Sequence[Candidate],
    dropped: Mapping[str, str | None],
    kept: Sequence[tuple[str, str]],
    *,
    separator: str = "\n\n",
) -> RouteCapture:
    """Capture a route that packs its retrieval into a budget (capsa's own packers).

    The packer is the route's gate and its ranking: what it kept was
    admitted and selected, in packed order; what it dropped was stopped for
    the receipt's reason (`DROP_GATE_REASONS`). The kept texts, as packed,
    are rendered joined by `separator` and the block declares them as its
    sources, so hydration is checked against this retrieval.

    Args:
        side: Which route this is.
        query: The query the route answered.
        retrieved: What went into the packer, with full texts.
        dropped: For each retrieved source id, its receipt's drop reason, or
            None when the packer kept it.
        kept: ``(source id, text as packed)`` in packed order.
        separator: What the prompt puts between kept passages.

    Raises:
        CaptureInvalid: the receipts do not cover exactly the retrieved
            passages, a drop reason is unknown, what was kept disagrees with
            the receipts, or as `RouteCapture.observe` and `finalize`.

    Examples:
        >>> docs = [Candidate(source_id="a", text="Refunds within 30 days."),
        ...         Candidate(source_id="b", text="Returns need a receipt.")]
        >>> capture = capture_packed("candidate", "refunds", docs,
        ...                          {"a": None, "b": "budget"}, [("a", "Refunds within 30 days.")])
        >>> capture.state
        'finalized'
    """
    ids = [c.source_id for c in retrieved]
    if set(dropped) != set(ids) or len(dropped) != len(ids):
        raise CaptureInvalid("the packer's receipts do not cover exactly its input",
                             cause="packing_mismatch")
    kept_ids = [sid for sid, _ in kept]
    if set(kept_ids) != {sid for sid, reason in dropped.items() if reason is None}:
        raise CaptureInvalid("what the route returned is not what its packer kept",
                             cause="packing_mismatch")
    reasons: dict[str, GateReason] = {}
    for sid, reason in dropped.items():
        if reason is not None and reason not in DROP_GATE_REASONS:
            raise CaptureInvalid("a receipt gives a drop reason outside the known set",
                                 cause="packing_mismatch")
        reasons[sid] = "admitted" if reason is None else DROP_GATE_REASONS[reason]
    texts = dict(kept)
    candidates = [c.model_copy(update={"text": texts.get(c.source_id, c.text)}) for c in retrieved]
    gate = [GateObservation(source_id=sid, reason=reasons[sid]) for sid in ids]
    capture = RouteCapture(side)
    capture.observe(query, candidates, kept_ids, kept_ids, gate)
    capture.finalize(RenderedBlock(
        query=query,
        text=separator.join(text for _, text in kept),
        scaffold=(separator,),
        sources=tuple(kept_ids),
    ))
    return capture


def _decide(
    candidates: Sequence[Candidate],
    admitted: Sequence[str],
    selected: Sequence[str],
    observed_gate: Sequence[GateObservation] | None,
) -> tuple[dict[str, _Decision], dict[str, str]]:
    ids = [c.source_id for c in candidates]
    if len(set(ids)) != len(ids):
        raise CaptureInvalid("duplicate candidate identities cannot be paired",
                             cause="duplicate_identity")
    admitted_ids, selected_ids = _unique(admitted, "admitted"), _unique(selected, "selected")
    if not admitted_ids <= set(ids):
        raise CaptureInvalid("an admitted id is not among the candidates", cause="gate_mismatch")
    if not selected_ids <= admitted_ids:
        raise CaptureInvalid("a selected id was not admitted by the gate", cause="gate_mismatch")
    reasons = _gate_reasons(observed_gate, ids)
    ranks = {sid: n for n, sid in enumerate(selected, start=1)}
    decisions: dict[str, _Decision] = {}
    for candidate in candidates:
        sid, score = candidate.source_id, candidate.score
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise CaptureInvalid("a score is not a number", cause="bad_score")
            if not math.isfinite(score) or not 0.0 <= score <= 1.0:
                raise CaptureInvalid("a score is not a finite number in [0, 1]", cause="bad_score")
            score = float(score)
        if (reasons[sid] == "admitted") != (sid in admitted_ids):
            raise CaptureInvalid("the gate observation disagrees with the admitted set",
                                 cause="gate_mismatch")
        decisions[sid] = _Decision(
            source_id=sid,
            score=score,
            reason=reasons[sid],
            admitted=sid in admitted_ids,
            selected=sid in selected_ids,
            rank=ranks.get(sid),
        )
    return decisions, {c.source_id: c.text for c in candidates}


def _unique(ids: Sequence[str], what: str) -> set[str]:
    found = set(ids)
    if len(found) != len(ids):
        raise CaptureInvalid(f"an id repeats in {what}", cause="duplicate_identity")
    return found


def _gate_reasons(
    observed_gate: Sequence[GateObservation] | None, ids: Sequence[str]
) -> dict[str, GateReason]:
    if observed_gate is None:
        raise CaptureInvalid("the gate was not observed", cause="gate_mismatch")
    reasons: dict[str, GateReason] = {}
    for observation in observed_gate:
        if observation.source_id in reasons:
            raise CaptureInvalid("the gate reported one candidate twice", cause="gate_mismatch")
        if observation.reason not in GATE_REASONS:
            raise CaptureInvalid("the gate reported a reason outside the closed set",
                                 cause="gate_mismatch")
        reasons[observation.source_id] = observation.reason
    if set(reasons) != set(ids):
        raise CaptureInvalid("the gate observations do not cover exactly the candidates",
                             cause="gate_mismatch")
    return reasons


def _locate(block: RenderedBlock, selected: Mapping[str, str]) -> _Located:
    """Find every selected text in the block; refuse only what cannot be attributed.

    Passages may overlap, as real chunkers' output does: two chunks that
    share a sentence, one chunk inside another, two documents with the same
    text, a renderer that stitches neighbouring chunks together. A passage is
    included when its whole text occurs in the block, whether as its own
    rendering or inside a longer selected passage's; a shared span belongs to
    every passage whose text covers it. What stays ambiguous, and is refused:
    an empty passage, a text rendered more often than there are passages
    carrying it, and block text that no selected passage or scaffold covers.
    """
    if any(not t.strip() for t in selected.values()):
        raise CaptureInvalid("a selected passage renders as empty text", cause="empty_passage")
    text = block.text
    found = {sid: _occurrences(text, passage) for sid, passage in selected.items()}
    every = [span for spans in found.values() for span in spans]
    own: dict[str, int] = {}
    for sid, spans in found.items():
        # An occurrence inside a longer selected passage's is that passage's
        # span, shared; only the others are this passage's own renderings.
        own[sid] = sum(1 for s, e in spans
                       if not any(s2 <= s and e <= e2 and e2 - s2 > e - s for s2, e2 in every))
    carriers = Counter(selected.values())
    if any(own[sid] > carriers[passage] for sid, passage in selected.items()):
        raise CaptureInvalid("a selected passage occurs more than once in the block",
                             cause="repeated_passage")
    residue, cursor = [], 0
    for start, end in _union(every):
        residue.append(text[cursor:start])
        cursor = end
    residue.append(text[cursor:])
    rest = "\n".join(residue)
    for piece in block.scaffold:
        if piece:
            rest = rest.replace(piece, "\n")
    if rest.strip():
        raise CaptureInvalid("the block was transformed: it holds text that is no selected passage",
                             cause="transformed_block")
    return _Located(included=frozenset(sid for sid, spans in found.items() if spans), own=own)


@dataclass(frozen=True)
class _Located:
    """Which selected passages a block includes, and how often each is rendered on its own."""

    included: frozenset[str]
    own: Mapping[str, int]


def _occurrences(text: str, passage: str) -> list[tuple[int, int]]:
    """Every span of `passage` in `text`, overlapping occurrences included."""
    spans, start = [], text.find(passage)
    while start != -1:
        spans.append((start, start + len(passage)))
        start = text.find(passage, start + 1)
    return spans


def _union(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans merged into disjoint, sorted intervals."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _check_hydration(
    sources: tuple[str, ...] | None, selected: Mapping[str, str], located: _Located
) -> None:
    """Refuse a block whose declared sources are not what this capture selected and found.

    Every declared source must be a selected passage found in the block, and
    every rendering of a text must be owed to a declared passage carrying it.
    A selected passage found only inside a declared one's span may go
    undeclared: the renderer hydrated the longer passage, and the shared
    span belongs to both.
    """
    if sources is None:
        return
    if len(set(sources)) != len(sources):
        raise CaptureInvalid("the block declares one source twice", cause="hydration_mismatch")
    if not set(sources) <= set(selected):
        raise CaptureInvalid("the block was hydrated from passages this capture did not select",
                             cause="hydration_mismatch")
    declared = Counter(selected[sid] for sid in sources)
    if not set(sources) <= located.included or any(
        located.own[sid] > declared[passage] for sid, passage in selected.items()
    ):
        raise CaptureInvalid("the block's declared sources are not the passages found in it",
                             cause="hydration_mismatch")


def _wire_texts(messages: Sequence[object]) -> list[str] | None:
    """Every text part on the wire, or None when some message cannot be read."""
    texts: list[str] = []
    for message in messages:
        if isinstance(message, str):
            texts.append(message)
            continue
        content = message.get("content") if isinstance(message, Mapping) else getattr(
            message, "content", None
        )
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif not isinstance(part, Mapping):
                    return None
        else:
            return None
    return texts


def _block_visible(block: str, included: Sequence[str], texts: Sequence[str]) -> bool:
    """Whether the block is on the wire; whitespace is layout, so runs of it compare equal."""
    block, wire = _squeeze(block), [_squeeze(text) for text in texts]
    if not block or not included:
        return False
    if any(block in text for text in wire):
        return True
    if any(_squeeze(passage) in text for passage in included for text in wire):
        raise CaptureInvalid("the wire holds part of the block but not the block as rendered",
                             cause="partial_wire")
    return False


def _squeeze(text: str) -> str:
    return " ".join(text.split())
