"""LangChain retrievers: any retriever's results packed into a budget, and scored hits.

`BudgetedRetriever` does what ``ContextualCompressionRetriever(CapsaCompressor)``
does, without needing langchain-classic, and adds a ``k`` cap that can be set
per call, as LangChain's standard retriever tests expect. `ScoredRetriever` is
a vector store's search that keeps each hit's relevance score, which
``vectorstore.as_retriever()`` computes and drops, for capsa to weigh.
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, patch_config
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PositiveInt, TypeAdapter

from capsa.budget import Budget, Scorer
from capsa.langchain.compressors import (
    REPORT_EVENT,
    Counter,
    LanguageModel,
    PackSettings,
    acompress,
    compress,
    counter,
)

__all__ = ["RAW_SCORE_KEY", "BudgetedRetriever", "ScoredRetriever"]

_K: TypeAdapter[int] = TypeAdapter(PositiveInt, config=ConfigDict(title="BudgetedRetriever k"))
"""Checks a per-call ``k`` as the `BudgetedRetriever.k` field is checked."""
RAW_SCORE_KEY = "score"
"""Where `ScoredRetriever` puts a store's raw score (no 0-to-1 scale); capsa reads it."""
_CONFIG = "capsa_caller_config"
"""Keyword carrying the caller's config from `invoke` to the retrieval hook."""


class BudgetedRetriever(BaseRetriever):
    """Wraps a retriever and packs what it returns into a token budget.

    The wrapped retriever fetches candidates as usual; capsa keeps the best of
    them within `budget` (whole where they fit, their relevant sentences where
    they do not) and at most `k` documents. Kept documents are new
    `Document`s with a ``capsa_receipt`` in their metadata; the full report
    goes out as a ``capsa.compression_report`` custom event on this
    retriever's run.

    Setup:
        ``pip install 'capsa[langchain]'``

    Key init args:
        retriever: any retriever (or runnable from a query to documents).
        budget: the token ceiling on the rendered packet, and its shape.
        k: at most this many documents come back; a ``k`` invoke kwarg overrides it.
        model: a chat model whose ``get_num_tokens`` counts the budget.

    Examples:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.runnables import RunnableLambda
        >>> from capsa.budget import Budget
        >>> docs = [Document(page_content="The hotel cap is EUR 165."),
        ...         Document(page_content="Trains are booked in standard class.")]
        >>> base = RunnableLambda(lambda query: docs)
        >>> retriever = BudgetedRetriever(retriever=base, budget=Budget(max_tokens=500), k=2)

    Examples:
        >>> [d.page_content for d in retriever.invoke("hotel cap", k=1)]
        ['The hotel cap is EUR 165.']

    Use within a chain:
        ``{"context": retriever | format_packet, "question": RunnablePassthrough()}
        | prompt | model``
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: RetrieverLike
    """Fetches the candidates; its own settings decide how many."""
    budget: Budget
    """Token ceiling on the rendered packet, attachment share and shape."""
    k: PositiveInt | None = None
    """At most this many documents are returned; None leaves only `Budget.max_items`."""
    compress: bool = True
    """Keep the relevant sentences of documents that do not fit whole."""
    model: LanguageModel | None = None
    """Counts tokens with this model's ``get_num_tokens`` when `tokenizer` is None."""
    tokenizer: Counter = Field(default=None, exclude=True)
    """Token counter, in any form `as_tokenizer` takes; wins over `model`."""
    scorer: Scorer | None = Field(default=None, exclude=True)
    """Relevance scorer; capsa's lexical BM25 when None."""

    def invoke(self, input: str, config: RunnableConfig | None = None,
               **kwargs: Any) -> list[Document]:
        """Retrieve and pack; the wrapped retriever runs under the caller's whole config.

        `BaseRetriever.invoke` keeps only callbacks, tags and metadata of the
        config; a wrapped retriever whose tenant, index or filter is set
        through ``configurable`` would otherwise run with its defaults and
        answer from another tenant's documents. So the config is carried to
        the hook and handed on, with this run's callbacks as the parent.
        """
        config = ensure_config(config)
        return super().invoke(input, config, **{**kwargs, _CONFIG: config})

    async def ainvoke(self, input: str, config: RunnableConfig | None = None,
                      **kwargs: Any) -> list[Document]:
        """Async twin of `invoke`."""
        config = ensure_config(config)
        return await super().ainvoke(input, config, **{**kwargs, _CONFIG: config})

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None, **kwargs: Any,
    ) -> list[Document]:
        config = patch_config(kwargs.pop(_CONFIG, None), callbacks=run_manager.get_child())
        candidates = self.retriever.invoke(query, config=config, **kwargs)
        kept, report = compress(candidates, query, self._settings(k))
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        return kept

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None, **kwargs: Any,
    ) -> list[Document]:
        config = patch_config(kwargs.pop(_CONFIG, None), callbacks=run_manager.get_child())
        candidates = await self.retriever.ainvoke(query, config=config, **kwargs)
        kept, report = await acompress(candidates, query, self._settings(k))
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        return kept

    def _settings(self, k: int | None) -> PackSettings:
        # A per-call k is checked like the field: model_copy below would not check it,
        # and k=0 would empty every packet under a misleading "all empty" report.
        cap = self.k if k is None else _K.validate_python(k)
        budget = self.budget
        if cap is not None:
            limit = cap if budget.max_items is None else min(cap, budget.max_items)
            budget = budget.model_copy(update={"max_items": limit})
        return PackSettings(budget, self.compress, counter(self.tokenizer, self.model),
                            self.scorer)


class ScoredRetriever(BaseRetriever):
    """A vector store's search that keeps each hit's relevance score in its metadata.

    ``vectorstore.as_retriever()`` returns documents without the similarity
    its search computed, so `CapsaCompressor` and `BudgetedRetriever` see
    only the order. Given the score (``metadata["relevance_score"]``), capsa
    weighs each passage by it beside its own relevance. Measured with
    all-MiniLM-L6-v2's cosines as the scores (``benchmarks/compression.py``,
    fourteen sets, 1,425 development questions), the lexical default kept
    1,002 / 1,242 / 1,329 answers at 10 / 25 / 50 % of the tokens with them
    and 976 / 1,208 / 1,319 without; 481 / 589 / 644 against 468 / 580 / 631
    of the 685 set aside.

    The search is ``similarity_search_with_relevance_scores``, so the store's
    relevance function applies (scores from 0 to 1, higher is closer), and the
    score goes under ``relevance_score``. A store without one (LangChain's
    `InMemoryVectorStore`) is searched with ``similarity_search_with_score``,
    whose scores are a similarity in some stores and a distance in others:
    the hits come best first, so scores that rise down the list are distances
    and are negated (capsa reads only their order and gaps), and scores that
    neither rise nor fall throughout are left out. Such a raw score goes
    under ``score`` (`RAW_SCORE_KEY`), which capsa reads as it reads
    ``relevance_score``, and never under ``relevance_score``: a reranker's
    and `ShadowRetriever`'s ``relevance_score`` is from 0 to 1, and a raw
    cosine of -0.4 there made every shadow comparison refuse its capture. A
    ``score_threshold`` is refused (``ValueError``) for such a store, as
    LangChain's own threshold search refuses it: raw scores have no scale to
    hold it against. ``filter`` and the like go in `search_kwargs` or as invoke
    kwargs. Each hit comes back as a new `Document` (the same id and
    content, its metadata copied with the score added); the store's own
    documents are never changed.

    Setup:
        ``pip install 'capsa[langchain]'``

    Examples:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> store = InMemoryVectorStore.from_documents(
        ...     [Document(page_content="The hotel cap is EUR 165."),
        ...      Document(page_content="Trains are booked in standard class.")],
        ...     DeterministicFakeEmbedding(size=8))
        >>> hits = ScoredRetriever(vectorstore=store, k=2).invoke("hotel")
        >>> scores = [hit.metadata["score"] for hit in hits]  # raw: the store has no scale
        >>> scores[0] > scores[1]
        True

    Use with capsa:
        ``BudgetedRetriever(retriever=ScoredRetriever(vectorstore=store, k=10),
        budget=Budget(max_tokens=800))``
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    vectorstore: VectorStore
    """The store to search."""
    k: PositiveInt = 4
    """How many hits to fetch, as ``as_retriever()`` fetches by default."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to the search (``score_threshold``, ``filter``; a ``k`` here wins over `k`);
    invoke kwargs win over both."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any,
    ) -> list[Document]:
        search = {"k": self.k} | self.search_kwargs | kwargs
        try:
            hits = self.vectorstore.similarity_search_with_relevance_scores(query, **search)
        except NotImplementedError:  # no relevance function: raw scores, direction unknown
            _no_threshold(self.vectorstore, search)
            return _scored(self.vectorstore.similarity_search_with_score(query, **search))
        return [_with_score(document, score) for document, score in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any,
    ) -> list[Document]:
        search = {"k": self.k} | self.search_kwargs | kwargs
        try:
            hits = await self.vectorstore.asimilarity_search_with_relevance_scores(
                query, **search)
        except NotImplementedError:
            _no_threshold(self.vectorstore, search)
            return _scored(await self.vectorstore.asimilarity_search_with_score(query, **search))
        return [_with_score(document, score) for document, score in hits]


def _no_threshold(store: VectorStore, search: dict[str, Any]) -> None:
    """Refuse a ``score_threshold`` where scores are raw: silently ignoring it returns far hits.

    LangChain's own ``similarity_score_threshold`` search refuses such a store too.
    """
    if search.get("score_threshold") is not None:
        raise ValueError(
            f"{type(store).__name__} has no relevance function, so score_threshold="
            f"{search['score_threshold']!r} cannot be applied to its raw scores; drop it, or "
            "give the store a relevance_score_fn"
        )


def _scored(hits: list[tuple[Document, float]]) -> list[Document]:
    """Raw search scores as relevance, by the direction the best-first order shows."""
    scores = [float(score) for _, score in hits]
    falls = all(a >= b for a, b in itertools.pairwise(scores))
    rises = all(a <= b for a, b in itertools.pairwise(scores))
    if falls == rises:  # all equal (nothing to weigh), or no order: leave them out
        return [_with_score(document, None, RAW_SCORE_KEY) for document, _ in hits]
    sign = 1.0 if falls else -1.0
    return [_with_score(document, sign * score, RAW_SCORE_KEY) for (document, _), score in zip(
        hits, scores, strict=True)]


def _with_score(document: Document, score: float | None,
                key: str = "relevance_score") -> Document:
    """`document` again (its own class, a subclass's fields kept) with `score` under `key`;
    the store's document is never changed."""
    metadata = dict(document.metadata)
    if score is not None:
        metadata[key] = float(score)
    return document.model_copy(update={"metadata": metadata})
