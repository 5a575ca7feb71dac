"""LangChain document compressor: budgeted packing with receipts, and `format_packet`.

`CapsaCompressor` is a `BaseDocumentCompressor`, so it drops into
langchain-classic's ``ContextualCompressionRetriever`` and
``DocumentCompressorPipeline``; `BudgetedRetriever` (in `capsa.langchain.retrievers`)
does the same job without langchain-classic. Both return *new* `Document`s
whose ``page_content`` is what was kept and whose ``capsa_receipt`` metadata
says what happened, and both report through LangChain's callbacks as a
``capsa.compression_report`` custom event. `format_packet` renders such
documents in capsa's provenance-tagged containers for a prompt template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import get_callback_manager_for_config
from pydantic import ConfigDict, Field

from capsa.budget import Budget, Group, Packet, Passage, Receipt, Scorer, Tokenizer, pack
from capsa.budget.render import render_passages

__all__ = ["REPORT_EVENT", "CapsaCompressor", "format_packet"]

if TYPE_CHECKING:
    LanguageModel = BaseLanguageModel[Any]
else:  # pydantic must see the bare class: a parametrised one is re-validated, not checked
    LanguageModel = BaseLanguageModel

REPORT_EVENT = "capsa.compression_report"
"""Name of the custom callback event carrying a packing report."""


class CapsaCompressor(BaseDocumentCompressor):
    """Packs retrieved documents into a token budget, most relevant sentences first.

    Documents that fit whole stay whole; the others keep their query-relevant
    sentences in order, with ``…`` for gaps; documents with no room are
    dropped. Every input is accounted for: kept documents carry a
    ``capsa_receipt`` in their metadata, and the full report (kept and dropped,
    with reasons) goes out as a ``capsa.compression_report`` custom event when
    the call runs inside a traced run (a retriever, a chain).

    Setup:
        ``pip install 'capsa[langchain]'``; ``ContextualCompressionRetriever``
        also needs ``langchain-classic``.

    Key init args:
        budget: the token ceiling on the rendered packet, item cap and shape.
        model: a chat model whose ``get_num_tokens`` counts the budget.
        tokenizer: any ``str -> int`` counter; wins over `model`.

    Examples:
        >>> from capsa.budget import Budget
        >>> compressor = CapsaCompressor(budget=Budget(max_tokens=2000))

    Examples:
        >>> from langchain_core.documents import Document
        >>> docs = [Document(page_content="The hotel cap is EUR 165. Trains are slow.", id="d1")]
        >>> kept = compressor.compress_documents(docs, "hotel cap")
        >>> kept[0].metadata["capsa_receipt"]["passage_id"]
        'd1'

    Use within a chain:
        ``ContextualCompressionRetriever(base_compressor=compressor,
        base_retriever=retriever) | format_packet``
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    budget: Budget
    """Token ceiling, item cap, attachment share and shape of the packet."""
    compress: bool = True
    """Keep the relevant sentences of documents that do not fit whole."""
    model: LanguageModel | None = None
    """Counts tokens with this model's ``get_num_tokens`` when `tokenizer` is None."""
    tokenizer: Callable[[str], int] | None = Field(default=None, exclude=True)
    """Token counter; capsa's offline estimate when neither this nor `model` is set."""
    scorer: Scorer | None = Field(default=None, exclude=True)
    """Relevance scorer; capsa's lexical BM25 when None."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Pack `documents` for `query`; return the kept ones as new documents."""
        kept, report = compress(documents, query, self._settings())
        if _can_dispatch(callbacks):
            dispatch_custom_event(REPORT_EVENT, report, config={"callbacks": callbacks})
        return kept

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of `compress_documents` (packing itself does no I/O)."""
        kept, report = compress(documents, query, self._settings())
        if _can_dispatch(callbacks):
            await adispatch_custom_event(REPORT_EVENT, report, config={"callbacks": callbacks})
        return kept

    def _settings(self) -> PackSettings:
        return PackSettings(self.budget, self.compress, counter(self.tokenizer, self.model),
                            self.scorer)


@dataclass(frozen=True, slots=True)
class PackSettings:
    """What one packing call needs, shared by the compressor and the retriever."""

    budget: Budget
    compress: bool
    tokenizer: Tokenizer | None
    scorer: Scorer | None


def counter(tokenizer: Callable[[str], int] | None,
            model: LanguageModel | None) -> Tokenizer | None:
    """The explicit tokenizer, else the model's ``get_num_tokens``, else None (capsa's estimate)."""
    if tokenizer is not None:
        return tokenizer
    return model.get_num_tokens if model is not None else None


def compress(documents: Sequence[Document], query: str,
             settings: PackSettings) -> tuple[list[Document], dict[str, Any]]:
    """Convert, pack once, convert back: the kept documents and the report."""
    passages = to_passages(documents)
    packet = pack(query, passages, settings.budget, compress=settings.compress,
                  tokenizer=settings.tokenizer, scorer=settings.scorer)
    by_id = dict(zip((p.id for p in passages), documents, strict=True))
    receipts = {r.passage_id: r for r in packet.receipts}
    kept = [
        _kept_document(by_id[passage.id], text, receipts[passage.id])
        for passage, text in zip(packet.passages, packet.texts, strict=True)
    ]
    return kept, report(packet)


def to_passages(documents: Sequence[Document]) -> list[Passage]:
    """Documents as passages: the document id when unique, else its position."""
    seen: set[str] = set()
    passages = []
    for n, document in enumerate(documents):
        ident = document.id if document.id and document.id not in seen else str(n)
        while ident in seen:
            ident = f"{ident}#{n}"
        seen.add(ident)
        source = document.metadata.get("source")
        score = document.metadata.get("relevance_score", document.metadata.get("score"))
        passages.append(Passage(
            id=ident, text=document.page_content,
            source=None if source is None else str(source),
            score=float(score) if isinstance(score, int | float) else None,
        ))
    return passages


def report(packet: Packet) -> dict[str, Any]:
    """The JSON-ready report sent as the custom event."""
    return {
        "query": packet.query,
        "max_tokens": packet.budget.max_tokens,
        "used_tokens": packet.used_tokens,
        "kept": [p.id for p in packet.passages],
        "dropped": [{"id": r.passage_id, "reason": r.dropped, "detail": r.detail}
                    for r in packet.dropped],
        "receipts": [r.model_dump(mode="json") for r in packet.receipts],
    }


def _kept_document(original: Document, text: str, receipt: Receipt) -> Document:
    metadata = {**original.metadata, "capsa_receipt": receipt.model_dump(mode="json")}
    return Document(page_content=text, metadata=metadata, id=original.id)


def _can_dispatch(callbacks: Callbacks | None) -> bool:
    """Custom events need a parent run; outside one there is nobody to tell."""
    if callbacks is None:
        return False
    manager = get_callback_manager_for_config({"callbacks": callbacks})
    return manager.parent_run_id is not None


def _format_packet(documents: Sequence[Document]) -> str:
    items: list[tuple[Group, Passage, bool]] = []
    for n, document in enumerate(documents):
        receipt = document.metadata.get("capsa_receipt") or {}
        ident = receipt.get("passage_id") or document.id or str(n)
        source = receipt.get("source", document.metadata.get("source"))
        passage = Passage(id=str(ident), text=document.page_content,
                          source=None if source is None else str(source))
        group: Group = "attached" if receipt.get("group") == "attached" else "retrieved"
        items.append((group, passage, bool(receipt.get("truncated"))))
    return render_passages(items)


format_packet: RunnableLambda[Sequence[Document], str] = RunnableLambda(
    _format_packet, name="format_packet"
)
"""Render documents in capsa's ``<context>``/``<document>`` containers, for a prompt.

A runnable: pipe a retriever into it (``retriever | format_packet``) or call
``format_packet.invoke(documents)``. Documents packed by `CapsaCompressor` or
`BudgetedRetriever` keep their ids, sources and truncation markers; any other
document renders whole, under its id or position. Passage text is escaped so
it cannot close or forge a container.
"""
