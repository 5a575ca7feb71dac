"""LlamaIndex node postprocessor: retrieved nodes packed into a token budget.

Use it wherever LlamaIndex takes ``node_postprocessors``: query engines
(``index.as_query_engine(node_postprocessors=[...])``), ``ContextChatEngine``,
``CondensePlusContextChatEngine``. It returns new nodes (the caller's are never
changed) whose text is what was kept, with the receipt in metadata that is
excluded from what the LLM and the embedder see, and it emits a
`CapsaCompressionEvent` through LlamaIndex's instrumentation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index_instrumentation import get_dispatcher

from capsa.budget import Budget, Packet, Passage, Scorer, pack

__all__ = ["RECEIPT_KEY", "CapsaCompressionEvent", "CapsaNodePostprocessor"]

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

    @classmethod
    def class_name(cls) -> str:
        return "CapsaCompressionEvent"


class CapsaNodePostprocessor(BaseNodePostprocessor):
    """Packs retrieved nodes into a token budget; returns new nodes with receipts.

    Nodes that fit whole stay whole, the others keep their sentences most
    relevant to the query (in order, ``…`` for gaps), the rest are dropped;
    nothing is dropped without a receipt in the `CapsaCompressionEvent`.

    Examples:
        >>> from llama_index.core.schema import TextNode
        >>> from capsa.budget import Budget
        >>> post = CapsaNodePostprocessor(budget=Budget(max_tokens=500))
        >>> nodes = [NodeWithScore(node=TextNode(text="The hotel cap is EUR 165.", id_="n1"))]
        >>> [n.node.get_content() for n in post.postprocess_nodes(nodes, query_str="hotel cap")]
        ['The hotel cap is EUR 165.']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    budget: Budget = Field(description="Token ceiling on the packet, item cap and shape.")
    compress: bool = Field(default=True,
                           description="Keep the relevant sentences of nodes that do not fit.")
    tokenizer: Callable[[str], int] | None = Field(
        default=None, exclude=True,
        description="Token counter; capsa's offline estimate when None.")
    scorer: Scorer | None = Field(default=None, exclude=True,
                                  description="Relevance scorer; lexical BM25 when None.")

    @classmethod
    def class_name(cls) -> str:
        return "CapsaNodePostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        packet = self._pack(nodes, query_bundle)
        _dispatcher.event(_event(packet))
        return _to_nodes(packet, nodes)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        packet = self._pack(nodes, query_bundle)
        await _dispatcher.aevent(_event(packet))
        return _to_nodes(packet, nodes)

    def _pack(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Packet:
        if query_bundle is None:
            raise ValueError("CapsaNodePostprocessor needs the query to rank sentences")
        return pack(query_bundle.query_str, _to_passages(nodes), self.budget,
                    compress=self.compress, tokenizer=self.tokenizer, scorer=self.scorer)


def _to_passages(nodes: list[NodeWithScore]) -> list[Passage]:
    seen: set[str] = set()
    passages = []
    for n, item in enumerate(nodes):
        ident = item.node.node_id if item.node.node_id not in seen else f"{item.node.node_id}#{n}"
        seen.add(ident)
        metadata = item.node.metadata
        source = metadata.get("file_name") or metadata.get("source")
        passages.append(Passage(
            id=ident, text=item.node.get_content(metadata_mode=MetadataMode.NONE),
            source=None if source is None else str(source), score=item.score,
        ))
    return passages


def _to_nodes(packet: Packet, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    by_id = dict(zip(_ids(nodes), nodes, strict=True))
    receipts = {r.passage_id: r for r in packet.receipts}
    kept = []
    for passage, text in zip(packet.passages, packet.texts, strict=True):
        original = by_id[passage.id]
        node = original.node
        update = {
            "text": text,
            "metadata": {**node.metadata,
                         RECEIPT_KEY: receipts[passage.id].model_dump(mode="json")},
            "excluded_llm_metadata_keys": _with_key(node.excluded_llm_metadata_keys),
            "excluded_embed_metadata_keys": _with_key(node.excluded_embed_metadata_keys),
        }
        kept.append(NodeWithScore(node=node.model_copy(update=update), score=original.score))
    return kept


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
    )
