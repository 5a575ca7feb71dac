"""Budgeted evidence: a retrieval return packed for the question asked, every chunk recallable.

What a question writes to the prompt cache is mostly its retrieval returns,
taken whole, and every later request carries them until the question ends.
`render_budgeted` returns instead a packet (capsa's own `pack`) of the retrieved
chunks for the query: the most relevant chunks whole, as many as the budget
holds, the rest only by id, and the text says that `recall` brings any of them
back whole. The host keeps the chunks whole beside the return (LangChain's tool
artifact, `CapsuleMemory`'s stored return), so nothing is lost.

Whole chunks first, rather than the most relevant sentences of every chunk: a
chunk the answer cites but the packet showed in part has to be recalled, and a
recall is one more model call that reads the whole conversation again and
writes the chunk anyway. On the capsule benchmark a packet of parts at 500
tokens showed none of the 20 questions' chunks whole (18 recalls, 0.56x of full
history's bill at 0.1/1.25); whole chunks first showed the cited chunk whole in
13 of 22 citations at the same budget, and the number of whole chunks only grows
with the budget (``benchmarks/capsule.py``, ``budgeted_evidence``). Only when
not even the most relevant chunk fits whole does the packet show parts.
"""

from __future__ import annotations

from collections.abc import Sequence

from capsa.budget import Budget, Passage, pack
from capsa.capsule.capsule import TokenCounter, estimate_tokens
from capsa.capsule.messages import Evidence
from capsa.capsule.render import (
    NO_RESULTS,
    escape_attribute,
    escape_body,
    render_chunk,
    render_unshown,
)

__all__ = ["RECALL_HINT", "render_budgeted"]

RECALL_HINT = "<recall-hint>Parts and ids named here come back whole through recall.</recall-hint>"
"""Closes a packet that left any chunk out or in part."""


def _part(evidence: Evidence, text: str) -> str:
    title = evidence.title or evidence.uri or evidence.document_id
    return (
        f'<part id="{escape_attribute(evidence.chunk_id)}" title="{escape_attribute(title)}">\n'
        f"{escape_body(text)}\n</part>"
    )


def render_budgeted(
    query: str,
    evidence: Sequence[Evidence],
    max_tokens: int,
    *,
    tokenizer: TokenCounter = estimate_tokens,
) -> str:
    """Retrieved chunks packed for `query` into about `max_tokens`, the rest named by id.

    The most relevant chunks that fit stay whole, in relevance order (`pack`
    with ``compress=False``), rendered as usual ``<chunk>`` elements (the cite
    tool accepts them and compaction treats them as shown); the rest are named
    in a ``<not-shown>`` receipt. When not even one chunk fits whole, the packet
    holds parts instead: ``<part id=...>`` elements with the most relevant
    sentences (or a cut, with its marker). Parts are never parsed back as
    chunks, so nothing downstream mistakes a part for the whole. A larger
    budget never shows fewer chunks whole. Pure: same input, same text.

    Args:
        query: What the question asked; ranks the chunks' sentences.
        evidence: The retrieved chunks, in the retriever's order.
        max_tokens: The packet's budget, tags included (whole chunks' markup is
            counted by `pack` as its own containers, so the text may differ by a
            few tokens per chunk).
        tokenizer: Counts tokens for the budget.

    Examples:
        >>> long = " ".join(f"Clause {i} covers case {i}." for i in range(40))
        >>> chunks = [Evidence(chunk_id="c0", content="The hotel cap is EUR 165.", document_id="d"),
        ...           Evidence(chunk_id="c1", content=long, document_id="d")]
        >>> print(render_budgeted("hotel cap", chunks, 60))
        <chunk id="c0" document="d">
        The hotel cap is EUR 165.
        </chunk>
        <not-shown title="d" ids="c1"/>
        <recall-hint>Parts and ids named here come back whole through recall.</recall-hint>
    """
    unique = list({e.chunk_id: e for e in evidence}.values())
    if not unique:
        return NO_RESULTS
    passages = [
        Passage(id=e.chunk_id, text=e.content, source=e.title or e.uri or e.document_id)
        for e in unique
    ]
    budget = Budget(max_tokens=max_tokens)
    packet = pack(query, passages, budget, tokenizer=tokenizer, compress=False)
    if not any(r.whole for r in packet.receipts):  # nothing fits whole: the best parts
        packet = pack(query, passages, budget, tokenizer=tokenizer)
    by_id = {e.chunk_id: e for e in unique}
    whole = {r.passage_id for r in packet.receipts if r.whole}
    lines: list[str] = []
    shown: set[str] = set()
    for passage, text in zip(packet.passages, packet.texts, strict=True):
        chunk = by_id[passage.id]
        shown.add(chunk.chunk_id)
        lines.append(render_chunk(chunk) if passage.id in whole else _part(chunk, text))
    rest = [e for e in unique if e.chunk_id not in shown]
    if rest:
        lines.append(render_unshown(rest))
    if rest or len(whole) < len(shown):
        lines.append(RECALL_HINT)
    return "\n".join(lines)
