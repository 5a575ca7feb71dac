"""LlamaIndex node postprocessor: retrieved nodes packed into a token budget.

Use it wherever LlamaIndex takes ``node_postprocessors``: query engines
(``index.as_query_engine(node_postprocessors=[...])``), ``ContextChatEngine``,
``CondensePlusContextChatEngine``. It returns new nodes (the caller's are never
changed) whose text is what was kept, with the receipt in metadata that is
excluded from what the LLM and the embedder see, and it emits a
`CapsaCompressionEvent` through LlamaIndex's instrumentation.

The budget is measured on what the synthesizer sends: each node as
``get_content(metadata_mode=MetadataMode.LLM)`` renders it (its LLM-visible
metadata through its own templates, then its text), joined by blank lines.
capsa's tags are never charged, because LlamaIndex never sends them.
`budget_for_llm` turns an LLM's window into that budget.
"""

from __future__ import annotations

import asyncio
import pickle
import re
from collections.abc import Sequence
from typing import Annotated, Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    BaseNode,
    MediaResource,
    MetadataMode,
    Node,
    NodeWithScore,
    QueryBundle,
)
from llama_index_instrumentation import get_dispatcher
from pydantic import AfterValidator

from capsa.budget import (
    Budget,
    Packet,
    Passage,
    Scorer,
    TokenizerLike,
    as_tokenizer,
    pack,
    plan_window,
)
from capsa.budget.render import Layout, source_label
from capsa.budget.window import warn_if_empty
from capsa.guard.shapes import distinct_ids, label_of, page_of

__all__ = ["RECEIPT_KEY", "CapsaCompressionEvent", "CapsaNodePostprocessor", "budget_for_llm"]

_SEPARATOR = "\n\n"
"""How LlamaIndex's synthesizers join node texts (``PromptHelper.repack``)."""
_SENTINEL = "\x00capsa-body\x00"
_ABSOLUTE_PATH = re.compile(r"(?:/|[A-Za-z]:[\\/]|\\\\)[^\n]*\Z")

RECEIPT_KEY = "capsa_receipt"
"""Metadata key of each kept node's receipt."""

_dispatcher = get_dispatcher(__name__)


class CapsaCompressionEvent(BaseEvent):
    """What a `CapsaNodePostprocessor` call kept and dropped, and why."""

    query: str
    """The query the nodes were packed for."""
    max_tokens: int
    """The budget."""
    used_tokens: int
    """Tokens of the rendered packet."""
    kept: list[str]
    """Node ids that reached the packet, in packed order."""
    dropped: list[dict[str, Any]]
    """``{"id", "reason", "detail"}`` for every node that kept nothing."""
    emptied_by: str | None = None
    """When no node was kept, the rule that emptied the packet (`capsa.budget.EmptyReason`)."""
    respelt: list[list[str]] = Field(default_factory=list)
    """``[typed, read as]`` for each mistyped query word read as a node's word
    (`capsa.budget.Packet.respelt`)."""

    @classmethod
    def class_name(cls) -> str:
        return "CapsaCompressionEvent"


def _counts_tokens(value: TokenizerLike | None) -> TokenizerLike | None:
    as_tokenizer(value)  # refuse what cannot count at construction, not at the first query
    return value


class CapsaNodePostprocessor(BaseNodePostprocessor):
    """Packs retrieved nodes into a token budget; returns new nodes with receipts.

    Nodes that fit whole stay whole, the others keep their sentences most
    relevant to the query (in order, ``…`` for gaps), the rest are dropped;
    nothing is dropped without a receipt in the `CapsaCompressionEvent`. The
    budget pays for what the synthesizer sends, node text and the metadata
    the LLM sees, measured with the tokenizer: never more than `budget`.

    A query engine is never left with nothing when nodes were retrieved: the
    top node (highest score) is never dropped as irrelevant unless
    ``Budget(strict_floor=True)``, and when no node fits whole the best one
    is cut to fit, its text ending in a truncation marker and its receipt
    ``truncated``. Only a budget too small for the node's metadata and a few
    words leaves it empty; that is logged as a warning naming the rule, and
    the event's ``emptied_by`` says it too.
    With `hide_paths`, metadata holding an absolute path (``file_path``) is
    hidden from the LLM and ``file_name`` shown instead.

    The tokenizer and scorer are code, not configuration: `to_dict` refuses to
    drop them (rebuild with ``CapsaNodePostprocessor.from_dict(data,
    tokenizer=...)``), and pickling keeps them or fails.

    Examples:
        >>> from llama_index.core.schema import TextNode
        >>> from capsa.budget import Budget
        >>> post = CapsaNodePostprocessor(budget=Budget(max_tokens=500))
        >>> nodes = [NodeWithScore(node=TextNode(text="The hotel cap is EUR 165.", id_="n1"))]
        >>> [n.node.get_content() for n in post.postprocess_nodes(nodes, query_str="hotel cap")]
        ['The hotel cap is EUR 165.']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    budget: Budget = Field(description="Token ceiling on what is sent, item cap and shape.")
    compress: bool = Field(default=True,
                           description="Keep the relevant sentences of nodes that do not fit.")
    hide_paths: bool = Field(
        default=True,
        description="Hide metadata holding absolute paths from the LLM; show file_name.")
    tokenizer: Annotated[TokenizerLike | None, AfterValidator(_counts_tokens)] = Field(
        default=None, exclude=True,
        description="Token counter in any form as_tokenizer takes (Settings.tokenizer, "
                    "enc.encode, str -> int); capsa's offline estimate when None.")
    scorer: Scorer | None = Field(default=None, exclude=True,
                                  description="Relevance scorer; lexical BM25 when None.")

    @classmethod
    def class_name(cls) -> str:
        return "CapsaNodePostprocessor"

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """Serialise the configuration; refuse rather than drop a tokenizer or scorer."""
        for name in ("tokenizer", "scorer"):
            if getattr(self, name) is not None:
                raise TypeError(
                    f"CapsaNodePostprocessor.to_dict cannot serialise its {name} "
                    f"({getattr(self, name)!r}) and will not drop it: serialise without it "
                    f"and pass it back with CapsaNodePostprocessor.from_dict(data, {name}=...)")
        return super().to_dict(**kwargs)

    def __getstate__(self) -> dict[Any, Any]:
        for name in ("tokenizer", "scorer"):
            value = getattr(self, name)
            if value is not None:
                try:
                    pickle.dumps(value)
                except Exception as error:
                    raise TypeError(
                        f"CapsaNodePostprocessor cannot be pickled with its {name} "
                        f"({value!r}): {error}; use a module-level function") from error
        return super().__getstate__()

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        sent, packet = self._sent_and_packed(nodes, query_bundle)
        _dispatcher.event(_event(packet))
        return _to_nodes(packet, sent)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        # In a worker thread, always: packing grows with the text and the tokenizer or
        # scorer may be slow, so the loop must not wait on it (context is copied in).
        sent, packet = await asyncio.to_thread(self._sent_and_packed, nodes, query_bundle)
        await _dispatcher.aevent(_event(packet))
        return _to_nodes(packet, sent)

    def _sent_and_packed(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
                         ) -> tuple[list[NodeWithScore], Packet]:
        sent = self._as_sent(nodes)
        return sent, self._pack(sent, query_bundle)

    def _as_sent(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        """Copies of the nodes as they will be sent: receipt key excluded, paths hidden."""
        return [NodeWithScore(node=_as_sent(item.node, self.hide_paths), score=item.score)
                for item in nodes]

    def _pack(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Packet:
        if query_bundle is None:
            raise ValueError("CapsaNodePostprocessor needs the query to rank sentences")
        passages = _to_passages(nodes)
        frames = {p.id: _frame(item.node) for p, item in zip(passages, nodes, strict=True)}
        packet = pack(query_bundle.query_str, passages, self.budget,
                      compress=self.compress, tokenizer=self.tokenizer, scorer=self.scorer,
                      layout=Layout(frames=frames, separator=_SEPARATOR))
        warn_if_empty(packet, what="nodes")
        return packet


def budget_for_llm(
    llm: Any,
    *,
    system_prompt: str | None = None,
    chat_history: Sequence[Any] = (),
    tools: Sequence[Any] = (),
    prompt_template: str | Any = "",
    output_tokens: int | None = None,
    margin_tokens: int = 0,
    tokenizer: TokenizerLike | None = None,
    **fields: Any,
) -> Budget:
    """The budget left for retrieved nodes in a LlamaIndex LLM's window.

    Reads ``llm.metadata.context_window`` and reserves ``metadata.num_output``
    for the answer (as LlamaIndex's ``PromptHelper`` does), the system prompt
    (the LLM's own ``system_prompt`` when None), the chat history, the tools'
    schemas and the prompt template around the context; the rest is the
    budget's ``max_tokens``.

    Args:
        llm: a LlamaIndex LLM.
        system_prompt: the system prompt; ``llm.system_prompt`` when None.
        chat_history: ``ChatMessage``s sent with the request, the question included.
        tools: ``BaseTool``s (their OpenAI schemas are counted) or schema dicts.
        prompt_template: the template the context is put in (a string or a
            ``PromptTemplate``), counted without its variables.
        output_tokens: room for the answer; ``metadata.num_output`` when None.
        margin_tokens: kept free for what is not counted (message framing).
        tokenizer: counts the reservations; pass ``Settings.tokenizer`` for the
            model's own count; capsa's estimate when None.
        **fields: other `Budget` fields (``attachment_share``, ``shape``, ``max_items``).

    Raises:
        BudgetError: the reservations leave no room for context.
    """
    system = system_prompt if system_prompt is not None else getattr(llm, "system_prompt", None)
    template = getattr(prompt_template, "template", prompt_template)
    history = [f"{getattr(m, 'role', '')}: {getattr(m, 'content', m)}" for m in chat_history]
    schemas = [_tool_schema(tool) for tool in tools]
    plan = plan_window(llm, system=f"{system or ''}\n{template or ''}".strip(),
                       history=history, tools=schemas, output_tokens=output_tokens,
                       margin_tokens=margin_tokens, tokenizer=tokenizer)
    return plan.budget(**fields)


def _tool_schema(tool: Any) -> Any:
    metadata = getattr(tool, "metadata", None)
    to_openai = getattr(metadata, "to_openai_tool", None)
    return to_openai() if callable(to_openai) else tool


def _as_sent(node: BaseNode, hide_paths: bool) -> BaseNode:
    excluded = _with_key(node.excluded_llm_metadata_keys)
    if hide_paths:
        paths = [key for key, value in node.metadata.items()
                 if isinstance(value, str) and _ABSOLUTE_PATH.match(value)]
        if paths:
            excluded = [key for key in excluded if key != "file_name"] + [
                key for key in paths if key not in excluded]
    return node.model_copy(update={
        "excluded_llm_metadata_keys": excluded,
        "excluded_embed_metadata_keys": _with_key(node.excluded_embed_metadata_keys),
    })


def _frame(node: BaseNode) -> tuple[str, str]:
    """The text LlamaIndex sends around this node's body, from its own templates."""
    rendered = _with_text(node, _SENTINEL).get_content(metadata_mode=MetadataMode.LLM)
    before, _, after = rendered.partition(_SENTINEL)
    return before, after


def _to_passages(nodes: list[NodeWithScore]) -> list[Passage]:
    passages = []
    for ident, item in zip(distinct_ids([item.node.node_id for item in nodes]), nodes,
                           strict=True):
        metadata = item.node.metadata
        passages.append(Passage(
            id=ident, text=item.node.get_content(metadata_mode=MetadataMode.NONE),
            source=source_label(metadata.get("file_name") or metadata.get("source"),
                                metadata.get("title") or metadata.get("document_title")),
            title=label_of(metadata.get("title")) or label_of(metadata.get("document_title")),
            score=item.score,  # NaN or an infinity is no score (`Passage`)
            page=page_of(metadata),
        ))
    return passages


def _to_nodes(packet: Packet, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    by_id = dict(zip(_ids(nodes), nodes, strict=True))
    receipts = {r.passage_id: r for r in packet.receipts}
    kept = []
    for passage, text in zip(packet.passages, packet.texts, strict=True):
        original = by_id[passage.id]
        node = original.node
        metadata = {**node.metadata, RECEIPT_KEY: receipts[passage.id].model_dump(mode="json")}
        kept.append(NodeWithScore(node=_with_text(node, text, metadata=metadata),
                                  score=original.score))
    return kept


def _with_text(node: BaseNode, text: str, **update: Any) -> BaseNode:
    """A copy of `node` whose content is `text`, whatever the node class keeps it in.

    `TextNode` and its kin hold a ``text`` field; `Document` and `ImageDocument`
    (`Node` subclasses) hold it in ``text_resource``, and their ``text`` is a
    read-only property that ``model_copy(update={"text": ...})`` would not change.
    """
    if isinstance(node, Node):
        resource = node.text_resource
        update["text_resource"] = (MediaResource(text=text) if resource is None
                                   else resource.model_copy(update={"text": text}))
    else:
        update["text"] = text
    return node.model_copy(update=update)


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [p.id for p in _to_passages(nodes)]


def _with_key(keys: list[str]) -> list[str]:
    return keys if RECEIPT_KEY in keys else [*keys, RECEIPT_KEY]


def _event(packet: Packet) -> CapsaCompressionEvent:
    return CapsaCompressionEvent(
        query=packet.query,
        max_tokens=packet.budget.max_tokens,
        used_tokens=packet.used_tokens,
        kept=[p.id for p in packet.passages],
        dropped=[{"id": r.passage_id, "reason": r.dropped, "detail": r.detail}
                 for r in packet.dropped],
        emptied_by=packet.emptied_by,
        respelt=[list(pair) for pair in packet.respelt],
    )
