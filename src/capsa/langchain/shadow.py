"""LangChain `ShadowRetriever`: serve one retriever, observe another beside it."""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PositiveFloat, PrivateAttr

from capsa.shadow import (
    Candidate,
    RandomBytes,
    RowSink,
    ShadowCounts,
    Shadowed,
    ShadowRecorder,
)

__all__ = ["ShadowRetriever"]

_EVENT = "capsa.shadow"


class ShadowRetriever(BaseRetriever):
    """Serve the baseline retriever's documents; run a candidate beside it and compare.

    For teams replacing a retrieval route: the candidate sees the same live
    queries, and each query's two answers are paired by document identity in
    process and handed to `sink` as anonymous `PairedDecision` rows (numbers,
    booleans, fresh random ids; no id, title, text or query). What the caller
    receives is always the baseline's list, unchanged. A candidate that
    raises, runs past `timeout_s`, or returns an answer the capture refuses
    (the same document twice, a non-numeric score) costs that query's
    comparison, counted in `counts`; a ``capsa.shadow`` custom event reports
    each query's outcome. On `ainvoke` the two retrievers run concurrently as
    tasks; on `invoke` the candidate runs in a worker thread.

    A retriever only returns documents, so each is recorded as admitted and
    selected, and the two answers compare on selection overlap, recall of the
    baseline's documents and rank order. Identity is ``Document.id``, or the
    SHA-256 of the content for documents without one.

    Setup:
        ``pip install 'capsa[langchain]'``

    Key init args:
        baseline: the retriever whose documents are served.
        candidate: the retriever on trial.
        sink: receives one tuple of rows per paired query.
        timeout_s: how long to wait for the candidate.
        score_key: metadata key holding a score in [0, 1]; None ranks by position.

    Examples:
        >>> from langchain_core.retrievers import BaseRetriever
        >>> from langchain_core.documents import Document
        >>> class Fixed(BaseRetriever):
        ...     docs: list[Document]
        ...     def _get_relevant_documents(self, query, *, run_manager):
        ...         return self.docs
        >>> a = Document(id="a", page_content="Refunds within 30 days.")
        >>> b = Document(id="b", page_content="Returns need a receipt.")
        >>> rows = []
        >>> shadow = ShadowRetriever(baseline=Fixed(docs=[a, b]), candidate=Fixed(docs=[b]),
        ...                          sink=rows.extend)

    Examples:
        >>> [d.id for d in shadow.invoke("refunds")]
        ['a', 'b']
        >>> (len(rows), shadow.counts.paired)
        (2, 1)
    """

    baseline: BaseRetriever
    """The retriever whose documents are served, unchanged."""
    candidate: BaseRetriever
    """The retriever on trial; its documents are compared, never served."""
    sink: RowSink
    """Receives each paired query's rows as one tuple, e.g. ``rows.extend``."""
    timeout_s: PositiveFloat = 10.0
    """Seconds to wait for the candidate, counted from when both retrievers started."""
    score_key: str | None = None
    """Metadata key holding each document's score in [0, 1]; None scores by rank."""
    random_bytes: RandomBytes = Field(default=secrets.token_bytes, exclude=True)
    """Source of the rows' fresh ids; inject a seeded one in tests."""

    _recorder: ShadowRecorder = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Build the recorder that pairs and counts."""
        self._recorder = ShadowRecorder(
            self.sink, timeout_s=self.timeout_s, random_bytes=self.random_bytes
        )

    @property
    def counts(self) -> ShadowCounts:
        """Queries paired so far, and queries whose comparison was lost, by cause."""
        return self._recorder.counts

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = self._recorder.serve(
            query,
            lambda: self.baseline.invoke(
                query, {"callbacks": run_manager.get_child("shadow_baseline")}, **kwargs
            ),
            lambda: self.candidate.invoke(
                query, {"callbacks": run_manager.get_child("shadow_candidate")}, **kwargs
            ),
            self._candidates,
        )
        dispatch_custom_event(
            _EVENT, self._event(result), config={"callbacks": run_manager.get_child()}
        )
        return list(result.served)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = await self._recorder.aserve(
            query,
            lambda: self.baseline.ainvoke(
                query, {"callbacks": run_manager.get_child("shadow_baseline")}, **kwargs
            ),
            lambda: self.candidate.ainvoke(
                query, {"callbacks": run_manager.get_child("shadow_candidate")}, **kwargs
            ),
            self._candidates,
        )
        await adispatch_custom_event(
            _EVENT, self._event(result), config={"callbacks": run_manager.get_child()}
        )
        return list(result.served)

    def _candidates(self, documents: Sequence[Document]) -> list[Candidate]:
        count = len(documents)
        return [
            Candidate(
                source_id=_identity(doc),
                score=self._score(doc, (count - rank) / count),
                text=doc.page_content,
            )
            for rank, doc in enumerate(documents)
        ]

    def _score(self, doc: Document, by_rank: float) -> float:
        if self.score_key is None:
            return by_rank
        value = doc.metadata.get(self.score_key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return math.nan  # the capture refuses it: a missing score is ambiguous
        return float(value)

    def _event(self, result: Shadowed[Document]) -> dict[str, Any]:
        return {"outcome": result.outcome, **self._recorder.counts.model_dump()}


def _identity(doc: Document) -> str:
    if doc.id:
        return doc.id
    return "sha256:" + hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()
