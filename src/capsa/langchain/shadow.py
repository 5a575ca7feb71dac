"""LangChain shadow evaluation: serve one route, compare another off the request's path.

`ShadowRetriever` serves any baseline runnable from a query to documents and
runs the candidate in the background through a `capsa.shadow.ShadowRecorder`.
When a side is capsa's own `BudgetedRetriever` (or a chain that runs
`CapsaCompressor` inside a traced run), the packer's report, observed through
LangChain's callbacks, gives the gate's reasons, the selection and what was
rendered; any other route is captured as a plain retrieval. `ShadowMiddleware`
shows the recorder what an agent's model was sent, so the served block's
visibility is recorded too.
"""

from __future__ import annotations

import hashlib
import math
import random
import secrets
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextvars import ContextVar
from numbers import Real
from typing import Any
from uuid import UUID

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    BaseCallbackManager,
    CallbackManager,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableConfig, RunnableLambda, ensure_config, patch_config
from pydantic import ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, PrivateAttr

from capsa.errors import CaptureInvalid
from capsa.langchain.compressors import REPORT_EVENT, to_passages
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

__all__ = ["SHADOW_EVENT", "ShadowMiddleware", "ShadowRetriever"]

SHADOW_EVENT = "capsa.shadow"
"""Custom callback event sent per query: ``{"compared": bool}``, that query's fact only.

Cumulative counts stay on `ShadowRetriever.counts`: in an event, the difference
between two queries' counts would tell whoever sees the second query's trace
or stream how many rows the first one produced."""

_CALLER_CONFIG: ContextVar[RunnableConfig | None] = ContextVar("capsa_shadow_config",
                                                               default=None)


class ShadowRetriever(RecorderLifecycle, BaseRetriever):
    """Serve the baseline's documents; compare a candidate route in the background.

    For teams replacing a retrieval route on live traffic. The caller gets the
    baseline's documents as soon as the baseline returns; a sampled share of
    queries then runs the candidate in a bounded thread pool (a task on
    `ainvoke`), and the two answers are paired by document identity in
    process and handed to `sink` as `PairedDecision` rows (numbers, booleans,
    fresh random ids; no id, title, text or query). Both routes receive the
    caller's config (configurable fields, tags, metadata); the baseline its
    callbacks too, the candidate only with `trace_candidate`, since a stream
    consumer that shows the last retriever's documents as the answer's sources
    would otherwise show the candidate's. Queries skipped by sampling or by the bound on work
    in flight, and comparisons lost to a failing candidate, are counted in
    `counts`; each query sends a ``capsa.shadow`` custom event saying only
    whether it was compared. `flush()` waits for running comparisons,
    `close()` stops.

    A side that is capsa's `BudgetedRetriever`, or a chain running
    `CapsaCompressor` in a traced run, is captured whole from its packing
    report: admitted or why not, packed order, and the packed text rendered
    as the block. Any other side is captured as a plain retrieval (every
    document admitted and selected). The block is the documents' texts joined
    by blank lines, as `create_retriever_tool` sends them. Identity is
    ``Document.id``, or the SHA-256 of the text for documents without one.

    Setup:
        ``pip install 'capsa[langchain]'``

    Key init args:
        baseline: the route whose documents are served (any runnable from a
            query to documents).
        candidate: the route on trial.
        sink: receives one tuple of rows per paired query.
        sample_rate: share of queries compared.
        max_in_flight: comparisons running or waiting at once; excess dropped.

    Examples:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.runnables import RunnableLambda
        >>> a = Document(id="a", page_content="Refunds within 30 days.")
        >>> b = Document(id="b", page_content="Returns need a receipt.")
        >>> rows = []
        >>> shadow = ShadowRetriever(baseline=RunnableLambda(lambda q: [a, b]),
        ...                          candidate=RunnableLambda(lambda q: [b]), sink=rows.extend)

    Examples:
        >>> [d.id for d in shadow.invoke("refunds")]
        ['a', 'b']
        >>> shadow.flush()
        >>> (len(rows), shadow.counts.paired)
        (2, 1)
        >>> shadow.close()
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    baseline: RetrieverLike
    """The route whose documents are served, unchanged."""
    candidate: RetrieverLike
    """The route on trial; its documents are compared, never served."""
    sink: RowSink
    """Receives each paired query's rows as one tuple, e.g. ``rows.extend``."""
    sample_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    """Share of queries compared; the rest are served alone and counted."""
    max_in_flight: PositiveInt = 64
    """Comparisons running or waiting at once; a query beyond is served alone and counted."""
    max_workers: PositiveInt = 2
    """Threads running candidates on the sync path."""
    timeout_s: PositiveFloat = 10.0
    """A candidate's deadline: past it the comparison is counted as timed out and gives its
    place back, a sync candidate's thread is abandoned to it and replaced, and whatever it
    returns later is ignored."""
    wire_timeout_s: PositiveFloat = 60.0
    """How long a comparison waits for `ShadowMiddleware` to show the model's input."""
    max_abandoned_threads: NonNegativeInt = 8
    """Threads left to hung sync candidates that may run at once; past that, a hung
    worker is not replaced (`capsa.shadow.ShadowRecorder`)."""
    score_key: str | None = None
    """Metadata key holding each document's score in [0, 1]; None scores by rank."""
    trace_candidate: bool = False
    """Run the candidate under the caller's callbacks (tagged ``shadow_candidate``), so
    tracing and ``astream_events`` show it. Off by default: its runs would reach every
    handler of the request, a stream's "sources" among them."""
    random_bytes: RandomBytes = Field(default=secrets.token_bytes, exclude=True)
    """Source of the rows' fresh ids; inject a seeded one in tests."""
    sampler: Callable[[], float] = Field(default=random.random, exclude=True)
    """Draws the sampling number per query; inject a seeded one in tests."""

    _recorder: ShadowRecorder = PrivateAttr()
    _expects_wire: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        """Build the recorder that runs, pairs and counts."""
        self._recorder = ShadowRecorder(
            self.sink, sample_rate=self.sample_rate, max_in_flight=self.max_in_flight,
            max_workers=self.max_workers, timeout_s=self.timeout_s,
            wire_timeout_s=self.wire_timeout_s,
            max_abandoned_threads=self.max_abandoned_threads, random_bytes=self.random_bytes,
            sampler=self.sampler,
        )

    @property
    def counts(self) -> ShadowCounts:
        """Queries paired, skipped and lost so far, by cause."""
        return self._recorder.counts

    @property
    def recorder(self) -> ShadowRecorder:
        """The recorder behind this retriever (for `ShadowMiddleware`)."""
        return self._recorder

    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Serve the baseline's documents for `input`; the candidate runs afterwards."""
        # The entry point is wrapped only to keep the caller's whole config:
        # BaseRetriever hands the hook a run manager, not the configurable
        # fields, tags and metadata both routes must receive.
        token = _CALLER_CONFIG.set(ensure_config(config))
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            _CALLER_CONFIG.reset(token)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async `invoke`: the candidate runs as a task once the baseline has answered."""
        token = _CALLER_CONFIG.set(ensure_config(config))
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _CALLER_CONFIG.reset(token)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        config = _CALLER_CONFIG.get() or ensure_config()
        slot = self._recorder.reserve()
        served_seen = _PackerObserver() if slot else None
        try:
            served = self.baseline.invoke(
                query, _side_config(config, run_manager.get_child("shadow_baseline"),
                                    served_seen), **kwargs)
        except BaseException:
            if slot:
                slot.cancel()
            raise
        if slot and served_seen:
            snapshot = _snapshot(served)
            trial_seen = _PackerObserver()
            trial_config = self._candidate_config(config, run_manager, trial_seen)
            slot.start(
                lambda: self._capture("baseline", query, snapshot, served_seen),
                lambda: self._capture(
                    "candidate", query,
                    self.candidate.invoke(query, trial_config, **kwargs), trial_seen),
                wire_key=self._wire_key(config),
            )
        dispatch_custom_event(SHADOW_EVENT, self._event(slot is not None),
                              config={"callbacks": run_manager.get_child()})
        return served

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        config = _CALLER_CONFIG.get() or ensure_config()
        slot = self._recorder.reserve()
        served_seen = _PackerObserver() if slot else None
        try:
            served = await self.baseline.ainvoke(
                query, _side_config(config, run_manager.get_child("shadow_baseline"),
                                    served_seen), **kwargs)
        except BaseException:
            if slot:
                slot.cancel()
            raise
        if slot and served_seen:
            snapshot = _snapshot(served)
            trial_seen = _PackerObserver()
            trial_config = self._candidate_config(config, run_manager, trial_seen)

            async def trial() -> RouteCapture:
                if _only_blocking(self.candidate):
                    # LangChain would run it in the loop's default executor, where a
                    # hanging candidate takes the threads served requests need.
                    documents = await self._recorder.run_blocking(
                        lambda: self.candidate.invoke(query, trial_config, **kwargs))
                else:
                    documents = await self.candidate.ainvoke(query, trial_config, **kwargs)
                return self._capture("candidate", query, documents, trial_seen)

            slot.astart(lambda: self._capture("baseline", query, snapshot, served_seen), trial,
                        wire_key=self._wire_key(config))
        await adispatch_custom_event(SHADOW_EVENT, self._event(slot is not None),
                                     config={"callbacks": run_manager.get_child()})
        return served

    def _candidate_config(self, config: RunnableConfig,
                          run_manager: CallbackManagerForRetrieverRun
                          | AsyncCallbackManagerForRetrieverRun,
                          observer: _PackerObserver) -> RunnableConfig:
        """The candidate's config: the caller's, with its callbacks only when traced."""
        if self.trace_candidate:
            return _side_config(config, run_manager.get_child("shadow_candidate"), observer)
        return _side_config(config, CallbackManager(handlers=[]), observer)

    def _event(self, compared: bool) -> dict[str, Any]:
        """This query's event: nothing that depends on another query (see `SHADOW_EVENT`)."""
        return {"compared": compared}

    def _wire_key(self, config: RunnableConfig) -> Hashable | None:
        if not self._expects_wire:
            return None
        return _thread_id(config)

    def _capture(self, side: Side, query: str, documents: Sequence[Document],
                 seen: _PackerObserver) -> RouteCapture:
        packed = seen.packing()
        if packed is None:
            return capture_retrieved(side, query, self._candidates(documents))
        inputs, report = packed
        passages = to_passages(inputs)
        by_pid = {p.id: doc for p, doc in zip(passages, inputs, strict=True)}
        receipts = {r["passage_id"]: r.get("dropped") for r in report.get("receipts", ())}
        if set(receipts) != set(by_pid):
            raise CaptureInvalid("the packing report does not cover the packer's input",
                                 cause="packing_mismatch")
        served_pids = [(d.metadata.get("capsa_receipt") or {}).get("passage_id")
                       for d in documents]
        if served_pids != list(report.get("kept", ())):
            raise CaptureInvalid("the route changed its documents after packing",
                                 cause="packing_mismatch")
        identity = dict(zip(by_pid, _identities(inputs), strict=True))
        return capture_packed(
            side, query, self._candidates(inputs),
            {identity[pid]: reason for pid, reason in receipts.items()},
            [(identity[str(pid)], d.page_content)
             for pid, d in zip(served_pids, documents, strict=True)],
        )

    def _candidates(self, documents: Sequence[Document]) -> list[Candidate]:
        count = len(documents)
        return [
            Candidate(source_id=sid, score=self._score(doc, (count - rank) / count),
                      text=doc.page_content)
            for rank, (sid, doc) in enumerate(zip(_identities(documents), documents, strict=True))
        ]

    def _score(self, doc: Document, by_rank: float) -> float:
        if self.score_key is None:
            return by_rank
        value = doc.metadata.get(self.score_key)
        if isinstance(value, bool) or not isinstance(value, Real):  # NumPy's float32 is Real
            return math.nan  # the capture refuses it: a missing score is ambiguous
        return float(value)


class ShadowMiddleware(AgentMiddleware):
    """Show shadow retrievers what an agent's model was sent, so visibility is recorded.

    Before every model call it hands the messages (system message included)
    to each retriever's recorder under the conversation's ``thread_id``; a
    comparison started by a tool call in that thread then records whether the
    served block was visible on the wire. The request itself is passed on
    unchanged. Agents without a checkpointer have no ``thread_id``: their
    comparisons pair with visibility unknown.

    Args:
        retrievers: The `ShadowRetriever`s whose served blocks to look for.

    Examples:
        >>> from langchain_core.runnables import RunnableLambda
        >>> shadow = ShadowRetriever(baseline=RunnableLambda(lambda q: []),
        ...                          candidate=RunnableLambda(lambda q: []), sink=print)
        >>> middleware = ShadowMiddleware(shadow)
        >>> shadow.close()
    """

    def __init__(self, *retrievers: ShadowRetriever) -> None:
        super().__init__()
        if not retrievers:
            raise ValueError("ShadowMiddleware needs at least one ShadowRetriever")
        self.retrievers = retrievers
        for retriever in retrievers:
            retriever._expects_wire = True

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """Record the wire, then call the model with the request unchanged."""
        self._observe(request)
        return handler(request)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """Async `wrap_model_call`."""
        self._observe(request)
        return await handler(request)

    def _observe(self, request: ModelRequest) -> None:
        key = _request_thread_id()
        if key is None:
            return
        wire = [*([request.system_message] if request.system_message else []),
                *request.messages]
        for retriever in self.retrievers:
            retriever.recorder.observe_wire(key, wire)


class _PackerObserver(BaseCallbackHandler):
    """Collects, for one side's call, capsa packing reports and the documents packed."""

    run_inline = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outputs: list[tuple[UUID | None, list[Document]]] = []
        self._reports: list[tuple[UUID, dict[str, Any]]] = []

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID,
                         parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        with self._lock:
            self._outputs.append((parent_run_id, _snapshot(documents)))

    def on_chain_end(self, outputs: Any, *, run_id: UUID,
                     parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if isinstance(outputs, list) and all(isinstance(d, Document) for d in outputs):
            with self._lock:
                self._outputs.append((parent_run_id, _snapshot(outputs)))

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == REPORT_EVENT and isinstance(data, dict):
            with self._lock:
                self._reports.append((run_id, data))

    def packing(self) -> tuple[list[Document], dict[str, Any]] | None:
        """The last packing report and the documents its run packed; None when none."""
        with self._lock:
            if not self._reports:
                return None
            run_id, report = self._reports[-1]
            inputs = [docs for parent, docs in self._outputs if parent == run_id]
        if not inputs:
            raise CaptureInvalid("a packing report came without the documents it packed",
                                 cause="packing_mismatch")
        return inputs[-1], report


def _snapshot(documents: Sequence[Document]) -> list[Document]:
    """The documents as they are now: the caller may edit the served ones in place
    (decorate the text, pop a score) before the deferred capture reads them."""
    return [d.model_copy(update={"metadata": dict(d.metadata)}) for d in documents]


def _only_blocking(route: object) -> bool:
    """A route whose async path LangChain runs in the loop's default executor."""
    if isinstance(route, BaseRetriever):
        return type(route)._aget_relevant_documents is BaseRetriever._aget_relevant_documents
    return isinstance(route, RunnableLambda) and not hasattr(route, "afunc")


def _side_config(config: RunnableConfig, child: BaseCallbackManager,
                 observer: _PackerObserver | None) -> RunnableConfig:
    if observer is not None:
        child = child.copy()
        child.add_handler(observer, inherit=True)
    return patch_config(config, callbacks=child)


def _thread_id(config: RunnableConfig) -> Hashable | None:
    thread = (config.get("configurable") or {}).get("thread_id")
    return thread if isinstance(thread, Hashable) else None


def _request_thread_id() -> Hashable | None:
    try:
        from langgraph.config import get_config
    except ImportError:  # pragma: no cover - langgraph ships with langchain's agents
        return None
    try:
        return _thread_id(get_config())
    except RuntimeError:
        return None


def _identities(documents: Sequence[Document]) -> list[str]:
    """Each document's identity: its id, or the SHA-256 of its text.

    Documents without an id that share a text (a file and its copy, split
    alike) are told apart by their order among those with that text: the
    first copy on one route pairs with the first on the other, and since the
    copies are the same words, which one is which changes no figure.
    """
    seen: Counter[str] = Counter()
    out = []
    for doc in documents:
        if doc.id:
            out.append(doc.id)
            continue
        digest = "sha256:" + hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()
        out.append(digest if not seen[digest] else f"{digest}#{seen[digest]}")
        seen[digest] += 1
    return out
