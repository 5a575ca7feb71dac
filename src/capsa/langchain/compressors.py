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

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.callbacks import (
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import convert_to_messages, get_buffer_string
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import (
    ensure_config,
    get_callback_manager_for_config,
    patch_config,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import AfterValidator, ConfigDict, Field

from capsa.budget import (
    Budget,
    Group,
    Packet,
    Passage,
    Receipt,
    Scorer,
    Tokenizer,
    TokenizerLike,
    as_tokenizer,
    pack,
    plan_window,
)
from capsa.budget.render import Excerpt, render_passages, source_label
from capsa.budget.window import warn_if_empty
from capsa.guard.shapes import distinct_ids, label_of, page_of

__all__ = ["REPORT_EVENT", "CapsaCompressor", "budget_for_model", "format_packet"]

if TYPE_CHECKING:
    LanguageModel = BaseLanguageModel[Any]
else:  # pydantic must see the bare class: a parametrised one is re-validated, not checked
    LanguageModel = BaseLanguageModel

REPORT_EVENT = "capsa.compression_report"
"""Name of the custom callback event carrying a packing report."""
RECEIPT_KEY = "capsa_receipt"
"""Metadata key of each kept document's receipt (under the document's real id)."""
HANDLE_KEY = "capsa_handle"
"""Metadata key of the short handle a kept document is shown under (``"2"``)."""
EXCERPT_KEY = "capsa_excerpt"
"""Metadata key of ``[shown, total]`` characters of a document shortened to its best sentences."""
COMPACT_KEY = "capsa_compact"
"""Metadata key set to True on documents packed in the compact form (`Budget.markup`)."""
_MARKS = frozenset({RECEIPT_KEY, HANDLE_KEY, EXCERPT_KEY, COMPACT_KEY})


def _counts_tokens(value: TokenizerLike | None) -> TokenizerLike | None:
    as_tokenizer(value)  # refuse what cannot count at construction, not at the first query
    return value


Counter = Annotated[TokenizerLike | None, AfterValidator(_counts_tokens)]
"""A tokenizer field: anything `as_tokenizer` takes, checked when the object is built."""


class CapsaCompressor(BaseDocumentCompressor):
    """Packs retrieved documents into a token budget, most relevant sentences first.

    Documents that fit whole stay whole; the others keep their query-relevant
    sentences in order, with ``…`` for gaps; documents with no room are
    dropped. What `format_packet` renders of them never counts more than the
    budget with the compressor's tokenizer. The top document (highest
    ``relevance_score``, else the first) is never dropped as irrelevant
    unless ``Budget(strict_floor=True)``, so a retriever's hit that shares no
    word with the question still reaches the model. Every input is accounted
    for: kept documents carry a ``capsa_receipt`` in their metadata, and the
    full report (kept and dropped, with reasons, and ``emptied_by`` when
    nothing was kept) goes out as a ``capsa.compression_report`` custom event
    when the call runs inside a traced run (a retriever, a chain).

    Setup:
        ``pip install 'capsa[langchain]'``; ``ContextualCompressionRetriever``
        also needs ``langchain-classic``.

    Key init args:
        budget: the token ceiling on the rendered packet, item cap and shape.
        model: a chat model whose ``get_num_tokens`` counts the budget.
        tokenizer: a counter (``enc.encode``, ``str -> int``, ...); wins over `model`.

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
    tokenizer: Counter = Field(default=None, exclude=True)
    """Token counter, in any form `as_tokenizer` takes; wins over `model`."""
    scorer: Scorer | None = Field(default=None, exclude=True)
    """Relevance scorer; capsa's lexical BM25 when None."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Pack `documents` for `query`; return the kept ones as new documents."""
        kept, report = compress(documents, query, self._settings())
        callbacks = _enclosing(callbacks)
        if _can_dispatch(callbacks):
            dispatch_custom_event(REPORT_EVENT, report, config=_event_config(callbacks))
        return kept

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of `compress_documents`; packs in a worker thread (see `acompress`)."""
        kept, report = await acompress(documents, query, self._settings())
        callbacks = _enclosing(callbacks)
        if _can_dispatch(callbacks):
            await adispatch_custom_event(REPORT_EVENT, report, config=_event_config(callbacks))
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


def counter(tokenizer: TokenizerLike | None, model: LanguageModel | None) -> Tokenizer | None:
    """The explicit tokenizer, else the model's ``get_num_tokens``, else None (capsa's estimate)."""
    if tokenizer is not None:
        return as_tokenizer(tokenizer)
    return as_tokenizer(model) if model is not None else None


def compress(documents: Sequence[Document], query: str,
             settings: PackSettings) -> tuple[list[Document], dict[str, Any]]:
    """Convert, pack once, convert back: the kept documents and the report.

    The packet is packed exactly as `format_packet` renders it: each document
    under a short handle (its position, ``1``, ``2``, ...) and its source's file
    name, so the budget pays for what the model is sent. Receipts and the
    report name the documents' real ids; each kept document carries its handle
    as ``capsa_handle``, to map a citation like ``[2]`` back.
    """
    ids = _unique_ids(documents)
    passages = [_passage(document, str(n + 1)) for n, document in enumerate(documents)]
    packet = pack(query, passages, settings.budget, compress=settings.compress,
                  tokenizer=settings.tokenizer, scorer=settings.scorer)
    real = {str(n + 1): ident for n, ident in enumerate(ids)}
    receipts = {r.passage_id: r.model_copy(update={"passage_id": real[r.passage_id]})
                for r in packet.receipts}
    kept = [
        _kept_document(documents[int(passage.id) - 1], passage.id, text, receipts[passage.id],
                       marked=settings.budget.mark_excerpts, compact=packet.compact)
        for passage, text in zip(packet.passages, packet.texts, strict=True)
    ]
    warn_if_empty(packet, what="documents")
    return kept, report(packet, [receipts[r.passage_id] for r in packet.receipts])


async def acompress(documents: Sequence[Document], query: str,
                    settings: PackSettings) -> tuple[list[Document], dict[str, Any]]:
    """`compress` in a worker thread, so the event loop keeps serving while it packs.

    Always off the loop, whatever the input's size: packing is CPU work that
    grows with the text (about a second for a few megabytes), and a caller's
    tokenizer or scorer may be slow or even call a model, so size alone cannot
    tell a cheap call. A thread hop costs well under a millisecond. The
    caller's context variables (LangChain's run context among them) are copied
    into the thread.
    """
    return await asyncio.to_thread(compress, documents, query, settings)


def to_passages(documents: Sequence[Document]) -> list[Passage]:
    """Documents as passages under the ids receipts and reports name them by.

    Each document's own id when unique, else its position; the packet itself
    shows short handles instead (see `compress`).
    """
    return [_passage(document, ident)
            for ident, document in zip(_unique_ids(documents), documents, strict=True)]


def _unique_ids(documents: Sequence[Document]) -> list[str]:
    """Each document's id when it is the first to carry it, else its position (`distinct_ids`)."""
    return distinct_ids([document.id for document in documents])


def _passage(document: Document, handle: str) -> Passage:
    return Passage(id=handle, text=document.page_content, source=_source(document.metadata),
                   title=label_of(document.metadata.get("title")),
                   page=page_of(document.metadata),
                   score=_score(document.metadata))


def _score(metadata: dict[str, Any]) -> float | None:
    """The retriever's or reranker's score: ``relevance_score`` if set, else ``score``.

    Any real number counts, NumPy's among them (FlashRank and FAISS give
    ``float32``, which is not a `float`); a flag or text is no score, and
    `Passage` takes NaN or an infinity for none.
    """
    value = metadata.get("relevance_score", metadata.get("score"))
    if isinstance(value, Real) and not isinstance(value, bool):
        return float(value)
    return None


def _source(metadata: dict[str, Any]) -> str | None:
    """The one rule for packing (`to_passages`) and rendering (`format_packet`),
    so the prompt is the packet the budget was counted on."""
    return source_label(metadata.get("source"), metadata.get("title"))


def report(packet: Packet, receipts: Sequence[Receipt]) -> dict[str, Any]:
    """The JSON-ready report sent as the custom event, under the documents' real ids."""
    by_handle = dict(zip((r.passage_id for r in packet.receipts), receipts, strict=True))
    return {
        "query": packet.query,
        "max_tokens": packet.budget.max_tokens,
        "used_tokens": packet.used_tokens,
        "kept": [by_handle[p.id].passage_id for p in packet.passages],
        "dropped": [{"id": r.passage_id, "reason": r.dropped, "detail": r.detail}
                    for r in receipts if r.dropped is not None],
        "emptied_by": packet.emptied_by,
        "respelt": [list(pair) for pair in packet.respelt],
        "receipts": [r.model_dump(mode="json") for r in receipts],
    }


def _kept_document(original: Document, handle: str, text: str, receipt: Receipt, *,
                   marked: bool, compact: bool) -> Document:
    # An earlier packing's marks describe that packing, not this one: a document
    # packed twice (two stages, a merged ensemble) is marked for this pass alone.
    metadata = {key: value for key, value in original.metadata.items() if key not in _MARKS}
    metadata.update({RECEIPT_KEY: receipt.model_dump(mode="json"), HANDLE_KEY: handle})
    if compact:
        metadata[COMPACT_KEY] = True
    if marked and not receipt.whole and not receipt.truncated:
        shown = sum(end - start for start, end in receipt.kept_spans)
        metadata[EXCERPT_KEY] = [shown, len(original.page_content)]
    # the caller's own class, a subclass's fields kept: a copy, never the original changed
    return original.model_copy(update={"page_content": text, "metadata": metadata})


def _enclosing(callbacks: Callbacks | None) -> Callbacks | None:
    """The call's callbacks, else those of the run it is made in.

    A chain step or a graph node that calls the compressor itself passes no
    callbacks, yet runs inside a run whose handlers expect the report; outside
    any run this is None, and nothing is sent.
    """
    return callbacks if callbacks is not None else ensure_config().get("callbacks")


def _can_dispatch(callbacks: Callbacks | None) -> bool:
    """Custom events need a parent run; outside one there is nobody to tell."""
    if callbacks is None:
        return False
    manager = get_callback_manager_for_config({"callbacks": callbacks})
    return manager.parent_run_id is not None


def budget_for_model(
    model: LanguageModel | int,
    *,
    system_prompt: str = "",
    messages: Sequence[Any] = (),
    tools: Sequence[Any] = (),
    output_tokens: int | None = None,
    margin_tokens: int = 0,
    tokenizer: TokenizerLike | None = None,
    **fields: Any,
) -> Budget:
    """The budget left for context in a chat model's window, after everything else it is sent.

    Reads the model's window from ``model.profile["max_input_tokens"]`` and
    reserves its answer (the model's ``max_tokens`` setting, else
    ``profile["max_output_tokens"]``), the system prompt, the messages sent
    with the request (the history and the question) and the tools' schemas,
    as LangChain converts them for the provider. What is left is the budget's
    ``max_tokens``, shared between attachments and retrieval by
    ``attachment_share``.

    Args:
        model: a chat model with a profile, or the window size in tokens.
        system_prompt: the system prompt, if not among `messages`.
        messages: messages (or anything ``convert_to_messages`` takes) sent
            besides the context.
        tools: tools bound to the model (anything ``convert_to_openai_tool`` takes).
        output_tokens: room for the answer; what the model declares when None.
        margin_tokens: kept free for message framing and counting error.
        tokenizer: counts the reservations, in any form `as_tokenizer` takes
            (``tokenizer=model`` uses its ``get_num_tokens``); capsa's estimate when None.
        **fields: other `Budget` fields (``attachment_share``, ``shape``, ``max_items``).

    Raises:
        ValueError: the model has no profile; pass the window size instead.
        BudgetError: the reservations leave no room for context.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> budget = budget_for_model(8192, system_prompt="Answer from the context.",
        ...                           messages=[HumanMessage("What is the hotel cap?")],
        ...                           output_tokens=1024)
        >>> 7000 < budget.max_tokens < 8192 - 1024
        True
    """
    history = [get_buffer_string([message]) for message in convert_to_messages(messages)]
    schemas = [convert_to_openai_tool(tool) for tool in tools]
    plan = plan_window(model, system=system_prompt, history=history, tools=schemas,
                       output_tokens=output_tokens, margin_tokens=margin_tokens,
                       tokenizer=tokenizer)
    return plan.budget(**fields)


def _event_config(callbacks: Callbacks) -> RunnableConfig:
    """The caller's whole config (configurable, tags, metadata) with this call's callbacks."""
    return patch_config(ensure_config(), callbacks=get_callback_manager_for_config(
        {"callbacks": callbacks}))


def _format_packet(documents: Sequence[Document]) -> str:
    items: list[tuple[Group, Passage, bool, Excerpt]] = []
    handles = [str(document.metadata.get(HANDLE_KEY) or n + 1)
               for n, document in enumerate(documents)]
    # Handles are unique within one packet; documents merged from two packets (an
    # ensemble of budgeted retrievers) can repeat one, and then a citation could
    # not be mapped back: every document is shown under its position instead.
    if len(set(handles)) < len(handles):
        handles = [str(n + 1) for n in range(len(documents))]
    for n, document in enumerate(documents):
        receipt = document.metadata.get(RECEIPT_KEY) or {}
        handle = handles[n]
        passage = Passage(id=str(handle), text=document.page_content,
                          source=_source(document.metadata),
                          page=page_of(document.metadata))
        group: Group = "attached" if receipt.get("group") == "attached" else "retrieved"
        excerpt = document.metadata.get(EXCERPT_KEY)
        shown = (int(excerpt[0]), int(excerpt[1])) if isinstance(excerpt, list | tuple) else None
        items.append((group, passage, bool(receipt.get("truncated")), shown))
    compact = any(document.metadata.get(COMPACT_KEY) is True for document in documents)
    return render_passages(items, compact=compact)


format_packet: RunnableLambda[Sequence[Document], str] = RunnableLambda(
    _format_packet, name="format_packet"
)
"""Render documents in capsa's ``<context>``/``<document>`` containers, for a prompt.

A runnable: pipe a retriever into it (``retriever | format_packet``) or call
``format_packet.invoke(documents)``. Each document is shown under a short
handle (``id="2"``: its ``capsa_handle`` when packed by `CapsaCompressor` or
`BudgetedRetriever`, else its position; every document under its position when
handles repeat, as in documents merged from two packets) and its source's file
name, never a server path; packed documents keep their truncation markers, any other
document renders whole. Documents packed in the compact form (a tight budget,
`Budget.markup`) are rendered compact again, so the prompt is the packet the
budget was counted on. Passage text is escaped so it cannot close or forge a
container.
"""
