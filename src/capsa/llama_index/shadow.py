"""LlamaIndex `ShadowRetriever`: serve one retriever, observe another beside it."""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.base import BaseEvent

from capsa.shadow import (
    Candidate,
    RandomBytes,
    RowSink,
    ShadowCounts,
    Shadowed,
    ShadowOutcome,
    ShadowRecorder,
)

__all__ = ["ShadowOutcomeEvent", "ShadowRetriever"]

_dispatcher = get_dispatcher(__name__)


class ShadowOutcomeEvent(BaseEvent):
    """Instrumentation event: what became of one query's shadow comparison."""

    outcome: ShadowOutcome
    """``paired``, or why the query produced no rows."""
    counts: dict[str, int]
    """The retriever's `ShadowCounts` after this query."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for LlamaIndex's instrumentation."""
        return "ShadowOutcomeEvent"


class ShadowRetriever(BaseRetriever):
    """Serve the baseline retriever's nodes; run a candidate beside it and compare.

    For teams replacing a retrieval route: the candidate sees the same live
    queries, and each query's two answers are paired by node id in process and
    handed to `sink` as anonymous `PairedDecision` rows (numbers, booleans,
    fresh random ids; no id, text or query). What the caller receives is always
    the baseline's nodes, unchanged. A candidate that raises, runs past
    `timeout_s`, or returns an answer the capture refuses (the same node twice,
    a missing score when node scores are used) costs that query's comparison,
    counted in `counts`; a `ShadowOutcomeEvent` reports each query's outcome.
    On `aretrieve` the two retrievers run concurrently as tasks; on `retrieve`
    the candidate runs in a worker thread.

    A retriever only returns nodes, so each is recorded as admitted and
    selected, and the two answers compare on selection overlap, recall of the
    baseline's nodes and rank order.

    Args:
        baseline: The retriever whose nodes are served.
        candidate: The retriever on trial; its nodes are compared, never served.
        sink: Receives each paired query's rows as one tuple, e.g. ``rows.extend``.
        timeout_s: Seconds to wait for the candidate, from when both started.
        use_node_scores: Compare `NodeWithScore.score` (must lie in [0, 1]);
            by default nodes are scored by rank, which suits any retriever.
        random_bytes: Source of the rows' fresh ids; inject a seeded one in tests.
        callback_manager: Passed to LlamaIndex's `BaseRetriever`.

    Raises:
        ValueError: `timeout_s` is not a positive number.

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
        >>> (len(rows), shadow.counts.paired)
        (2, 1)
    """

    def __init__(
        self,
        baseline: BaseRetriever,
        candidate: BaseRetriever,
        sink: RowSink,
        *,
        timeout_s: float = 10.0,
        use_node_scores: bool = False,
        random_bytes: RandomBytes = secrets.token_bytes,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.baseline = baseline
        self.candidate = candidate
        self.use_node_scores = use_node_scores
        self._recorder = ShadowRecorder(sink, timeout_s=timeout_s, random_bytes=random_bytes)

    @classmethod
    def class_name(cls) -> str:
        """Stable name for LlamaIndex's serialisation and instrumentation."""
        return "ShadowRetriever"

    @property
    def counts(self) -> ShadowCounts:
        """Queries paired so far, and queries whose comparison was lost, by cause."""
        return self._recorder.counts

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self._recorder.serve(
            query_bundle.query_str,
            lambda: self.baseline.retrieve(query_bundle),
            lambda: self.candidate.retrieve(query_bundle),
            self._candidates,
        )
        self._report(result)
        return list(result.served)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self._recorder.aserve(
            query_bundle.query_str,
            lambda: self.baseline.aretrieve(query_bundle),
            lambda: self.candidate.aretrieve(query_bundle),
            self._candidates,
        )
        self._report(result)
        return list(result.served)

    def _candidates(self, nodes: Sequence[NodeWithScore]) -> list[Candidate]:
        count = len(nodes)
        return [
            Candidate(
                source_id=item.node.node_id,
                score=self._score(item, (count - rank) / count),
                text=item.node.get_content(),
            )
            for rank, item in enumerate(nodes)
        ]

    def _score(self, item: NodeWithScore, by_rank: float) -> float:
        if not self.use_node_scores:
            return by_rank
        # A node without a score is ambiguous: NaN makes the capture refuse it.
        return math.nan if item.score is None else float(item.score)

    def _report(self, result: Shadowed[NodeWithScore]) -> None:
        _dispatcher.event(
            ShadowOutcomeEvent(outcome=result.outcome, counts=self.counts.model_dump())
        )
