"""LangChain retriever wrapper: any retriever's results, packed into a token budget.

`BudgetedRetriever` does what ``ContextualCompressionRetriever(CapsaCompressor)``
does, without needing langchain-classic, and adds a ``k`` cap that can be set
per call, as LangChain's standard retriever tests expect.
"""

from __future__ import annotations

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
from pydantic import ConfigDict, Field, PositiveInt

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

__all__ = ["BudgetedRetriever"]

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
        cap = self.k if k is None else k
        budget = self.budget
        if cap is not None:
            limit = cap if budget.max_items is None else min(cap, budget.max_items)
            budget = budget.model_copy(update={"max_items": limit})
        return PackSettings(budget, self.compress, counter(self.tokenizer, self.model),
                            self.scorer)
