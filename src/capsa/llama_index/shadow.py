"""LlamaIndex shadow evaluation: serve one route, compare another off the request's path.

`ShadowRetriever` serves the baseline's nodes and runs the candidate in the
background through a `capsa.shadow.ShadowRecorder`. Either side may be any
`BaseRetriever` or a query engine's retriever path (anything with
``retrieve``/``aretrieve``, such as `RetrieverQueryEngine`, whose
postprocessors then run). When a side runs capsa's `CapsaNodePostprocessor`,
its `CapsaCompressionEvent` and the retrieval it packed, observed through
LlamaIndex's instrumentation, give the gate's reasons, the selection and
what was rendered. `ShadowEventHandler`, registered on the root dispatcher,
does that observing and, with ``observe_wire=True``, records whether the
served block was visible in what the LLM was sent.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Hashable, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation.events.llm import (
    LLMChatStartEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.base import BaseEvent
from llama_index_instrumentation.event_handlers import BaseEventHandler

from capsa.errors import CaptureInvalid
from capsa.llama_index.postprocessors import RECEIPT_KEY, CapsaCompressionEvent
from capsa.shadow import (
    Candidate,
    RandomBytes,
    RecorderLifecycle,
    RouteCapture,
    RowSink,
    ShadowCounts,
    ShadowRecorder,
    Side,
    capture_packed,
    capture_retrieved,
)

__all__ = ["ShadowEventHandler", "ShadowQueryEvent", "ShadowRetriever"]

_dispatcher = get_dispatcher(__name__)

_OBSERVED: ContextVar[list[BaseEvent] | None] = ContextVar("capsa_shadow_observed",
                                                           default=None)
_WIRE: ContextVar[tuple[ShadowRecorder, object] | None] = ContextVar("capsa_shadow_wire",
                                                                     default=None)


class ShadowQueryEvent(BaseEvent):
    """Instrumentation event per served query: whether it was compared, and nothing else.

    It carries that query's own fact only. Cumulative counts stay on
    `ShadowRetriever.counts`: in an event, the difference between two queries'
    counts would tell whoever sees the second query's trace how many rows the
    first one produced.
    """

    compared: bool
    """A comparison was started; False when sampling or the bound on work skipped it."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for LlamaIndex's instrumentation."""
        return "ShadowQueryEvent"


class _Retrieves(Protocol):
    """A retriever, or a query engine's retrieve path (postprocessors included)."""

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]: ...

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]: ...


class ShadowEventHandler(BaseEventHandler):
    """Observes, for shadow retrievers, what their routes packed and what the LLM was sent.

    Registered once on the root dispatcher by the first `ShadowRetriever`; it
    only records while a shadow route is being run or its served block is
    waiting for the LLM call in the same context, and ignores every other
    event.
    """

    @classmethod
    def class_name(cls) -> str:
        """Stable name for LlamaIndex's instrumentation."""
        return "ShadowEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        """Keep packing and retrieval events of an observed route; show the wire."""
        observed = _OBSERVED.get()
        if observed is not None and isinstance(event, RetrievalEndEvent | CapsaCompressionEvent):
            observed.append(event)
        wire = _WIRE.get()
        if wire is None:
            return
        if isinstance(event, LLMChatStartEvent):
            messages: list[object] = list(event.messages)
        elif isinstance(event, LLMCompletionStartEvent):
            messages = [event.prompt]
        else:
            return
        _WIRE.set(None)
        recorder, key = wire
        recorder.observe_wire(key, messages)


_HANDLER = ShadowEventHandler()


def _register_handler() -> None:
    root = get_dispatcher()
    if not any(h is _HANDLER for h in root.event_handlers):
        root.add_event_handler(_HANDLER)


class ShadowRetriever(RecorderLifecycle, BaseRetriever):
    """Serve the baseline's nodes; compare a candidate route in the background.

    For teams replacing a retrieval route on live traffic. The caller gets the
    baseline's nodes as soon as the baseline returns; a sampled share of
    queries then runs the candidate in a bounded thread pool (a task on
    `aretrieve`), and the two answers are paired by node id in process and
    handed to `sink` as anonymous `PairedDecision` rows (numbers, booleans,
    fresh random ids; no id, text or query). Queries skipped by sampling or by
    the bound on work in flight, and comparisons lost to a failing candidate,
    are counted in `counts`; each query sends a `ShadowQueryEvent` saying only
    whether it was compared. `flush()` waits for running comparisons,
    `close()` stops.

    A side that runs `CapsaNodePostprocessor` (a `RetrieverQueryEngine` with
    it among its postprocessors) is captured whole: admitted or why not,
    packed order, and the packed text rendered as the block. Any other side
    is captured as a plain retrieval. The block is the nodes' LLM-facing
    content joined by blank lines, as LlamaIndex's synthesizers build the
    context. With `observe_wire`, the next LLM call in the same context (the
    query engine's synthesis) records whether that block was visible.

    Args:
        baseline: The route whose nodes are served.
        candidate: The route on trial; its nodes are compared, never served.
        sink: Receives each paired query's rows as one tuple, e.g. ``rows.extend``.
        sample_rate: Share of queries compared.
        max_in_flight: Comparisons running or waiting at once; excess dropped.
        max_workers: Threads running candidates on the sync path.
        timeout_s: A candidate's deadline: past it the comparison is counted as
            timed out and gives its place back, and a sync candidate's thread is
            abandoned to it and replaced.
        wire_timeout_s: How long a comparison waits for the LLM call.
        max_abandoned_threads: Threads left to hung sync candidates that may
            run at once (`capsa.shadow.ShadowRecorder`).
        observe_wire: Record the served block's visibility at the next LLM call.
        use_node_scores: Compare `NodeWithScore.score` (must lie in [0, 1]);
            by default nodes are scored by rank, which suits any retriever.
        random_bytes: Source of the rows' fresh ids; inject a seeded one in tests.
        sampler: Draws the sampling number per query.
        callback_manager: Passed to LlamaIndex's `BaseRetriever`.

    Raises:
        ValueError: a rate outside [0, 1], a non-positive bound or timeout, or
            a negative thread bound.

    Examples:
        >>> from llama_index.core.schema import TextNode
        >>> class Fixed(BaseRetriever):
        ...     def __init__(self, nodes):
        ...         super().__init__()
        ...         self.nodes = nodes
        ...     def _retrieve(self, query_bundle):
        ...         return self.nodes
        >>> a = NodeWithScore(node=TextNode(id_="a", text="Refunds within 30 days."), score=0.9)
        >>> b = NodeWithScore(node=TextNode(id_="b", text="Returns need a receipt."), score=0.4)
        >>> rows = []
        >>> shadow = ShadowRetriever(Fixed([a, b]), Fixed([b]), rows.extend)
        >>> [n.node.node_id for n in shadow.retrieve("refunds")]
        ['a', 'b']
        >>> shadow.flush()
        >>> (len(rows), shadow.counts.paired)
        (2, 1)
        >>> shadow.close()
    """

    def __init__(
        self,
        baseline: _Retrieves,
        candidate: _Retrieves,
        sink: RowSink,
        *,
        sample_rate: float = 1.0,
        max_in_flight: int = 64,
        max_workers: int = 2,
        timeout_s: float = 10.0,
        wire_timeout_s: float = 60.0,
        max_abandoned_threads: int = 8,
        observe_wire: bool = False,
        use_node_scores: bool = False,
        random_bytes: RandomBytes = secrets.token_bytes,
        sampler: Any = random.random,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.baseline = baseline
        self.candidate = candidate
        self.use_node_scores = use_node_scores
        self.observe_wire = observe_wire
        self._recorder = ShadowRecorder(
            sink, sample_rate=sample_rate, max_in_flight=max_in_flight,
            max_workers=max_workers, timeout_s=timeout_s, wire_timeout_s=wire_timeout_s,
            max_abandoned_threads=max_abandoned_threads, random_bytes=random_bytes,
            sampler=sampler,
        )
        _register_handler()

    @classmethod
    def class_name(cls) -> str:
        """Stable name for LlamaIndex's serialisation and instrumentation."""
        return "ShadowRetriever"

    @property
    def counts(self) -> ShadowCounts:
        """Queries paired, skipped and lost so far, by cause."""
        return self._recorder.counts

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self._forget_wire()
        slot = self._recorder.reserve()
        _dispatcher.event(self._event(slot is not None))
        if slot is None:
            return self.baseline.retrieve(query_bundle)
        seen: list[BaseEvent] = []
        token = _OBSERVED.set(seen)
        try:
            served = self.baseline.retrieve(query_bundle)
        except BaseException:
            slot.cancel()
            raise
        finally:
            _OBSERVED.reset(token)
        query, snapshot = query_bundle.query_str, _snapshot(served)

        def trial() -> RouteCapture:
            events: list[BaseEvent] = []
            _OBSERVED.set(events)
            _WIRE.set(None)  # the candidate's own LLM calls are not the served wire
            nodes = self.candidate.retrieve(query_bundle)
            _OBSERVED.set(None)
            return self._capture("candidate", query, nodes, events)

        slot.start(lambda: self._capture("baseline", query, snapshot, seen), trial,
                   wire_key=self._wire_key())
        return served

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self._forget_wire()
        slot = self._recorder.reserve()
        await _dispatcher.aevent(self._event(slot is not None))
        if slot is None:
            return await self.baseline.aretrieve(query_bundle)
        events: list[BaseEvent] = []
        seen: list[BaseEvent] = []
        token = _OBSERVED.set(seen)
        try:
            served = await self.baseline.aretrieve(query_bundle)
        except BaseException:
            slot.cancel()
            raise
        finally:
            _OBSERVED.reset(token)
        query, snapshot = query_bundle.query_str, _snapshot(served)

        async def trial() -> RouteCapture:
            _OBSERVED.set(events)
            _WIRE.set(None)  # the candidate's own LLM calls are not the served wire
            if _blocks_the_loop(self.candidate):
                # run_blocking copies this context: the events list, no wire.
                nodes = await self._recorder.run_blocking(
                    lambda: self.candidate.retrieve(query_bundle))
            else:
                nodes = await self.candidate.aretrieve(query_bundle)
            _OBSERVED.set(None)
            return self._capture("candidate", query, nodes, events)

        slot.astart(lambda: self._capture("baseline", query, snapshot, seen), trial,
                    wire_key=self._wire_key())
        return served

    def _event(self, compared: bool) -> ShadowQueryEvent:
        return ShadowQueryEvent(compared=compared)

    def _forget_wire(self) -> None:
        """A new query: an earlier one whose LLM call never came must not take this one's.

        That earlier comparison pairs now, its visibility unknown, instead of holding
        its place for `wire_timeout_s` (an app that retrieves and then prompts its own
        client held every place within a minute).
        """
        if not self.observe_wire:
            return
        pending = _WIRE.get()
        if pending is not None:
            recorder, key = pending
            recorder.forget_wire(key)
        _WIRE.set(None)

    def _wire_key(self) -> Hashable | None:
        if not self.observe_wire:
            return None
        key = object()
        _WIRE.set((self._recorder, key))
        return key

    def _capture(self, side: Side, query: str, nodes: Sequence[NodeWithScore],
                 events: Sequence[BaseEvent]) -> RouteCapture:
        packings = [n for n, e in enumerate(events) if isinstance(e, CapsaCompressionEvent)]
        if not packings:
            return capture_retrieved(side, query, self._candidates(nodes))
        report = events[packings[-1]]
        assert isinstance(report, CapsaCompressionEvent)
        retrievals = [e for e in events[: packings[-1]] if isinstance(e, RetrievalEndEvent)]
        if not retrievals:
            raise CaptureInvalid("a packing event came without the retrieval it packed",
                                 cause="packing_mismatch")
        inputs = retrievals[-1].nodes
        dropped = {str(d.get("id")): d.get("reason") for d in report.dropped}
        outcomes = {n.node.node_id: dropped.get(n.node.node_id) for n in inputs}
        served_ids = [(n.node.metadata.get(RECEIPT_KEY) or {}).get("passage_id") for n in nodes]
        if served_ids != list(report.kept):
            raise CaptureInvalid("the route changed its nodes after packing",
                                 cause="packing_mismatch")
        return capture_packed(
            side, query, self._candidates(inputs), outcomes,
            [(str(sid), _text(n)) for sid, n in zip(served_ids, nodes, strict=True)],
        )

    def _candidates(self, nodes: Sequence[NodeWithScore]) -> list[Candidate]:
        count = len(nodes)
        return [
            Candidate(source_id=item.node.node_id,
                      score=self._score(item, (count - rank) / count), text=_text(item))
            for rank, item in enumerate(nodes)
        ]

    def _score(self, item: NodeWithScore, by_rank: float) -> float:
        if not self.use_node_scores:
            return by_rank
        # A node without a score is ambiguous: NaN makes the capture refuse it.
        return math.nan if item.score is None else float(item.score)


def _snapshot(served: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The served nodes as served: later in-place edits (a postprocessor replacing
    a node's text or rescoring it) must not reach the baseline's deferred capture."""
    return [NodeWithScore(node=n.node.model_copy(update={"metadata": dict(n.node.metadata)}),
                          score=n.score) for n in served]


def _blocks_the_loop(route: object) -> bool:
    """A retriever (or a query engine's) whose async path is LlamaIndex's default:
    it calls the blocking `_retrieve` on the event loop."""
    retriever = route if isinstance(route, BaseRetriever) else getattr(route, "retriever", None)
    return (isinstance(retriever, BaseRetriever)
            and type(retriever)._aretrieve is BaseRetriever._aretrieve)


def _text(item: NodeWithScore) -> str:
    return item.node.get_content(metadata_mode=MetadataMode.LLM)
