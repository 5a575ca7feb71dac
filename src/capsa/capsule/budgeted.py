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
from capsa.capsule.capsule import TokenCounter, as_tokenizer, estimate_tokens
from capsa.capsule.messages import Evidence
from capsa.capsule.render import (
    NO_RESULTS,
    escape_attribute,
    escape_body,
    render_chunk,
    render_unshown,
)
from capsa.errors import BudgetError

__all__ = ["RECALL_HINT", "TOOL_FLOOR_CHUNKS", "budget_floor", "check_tool_budget",
           "render_budgeted"]

RECALL_HINT = "<recall-hint>Parts and ids named here come back whole through recall.</recall-hint>"
"""Closes a packet that left any chunk out or in part."""


def _part(evidence: Evidence, text: str) -> str:
    title = evidence.title or evidence.uri or evidence.document_id
    return (
        f'<part id="{escape_attribute(evidence.chunk_id)}" title="{escape_attribute(title)}">\n'
        f"{escape_body(text)}\n</part>"
    )


TOOL_FLOOR_CHUNKS = 99
"""Retrieved chunks a tool's budget is checked against when the tool is built
(`budget_floor`): the floor grows only with the count's digits, so this covers any
search of fewer than 100 chunks."""


def _counted(count: int) -> str:
    return f'<not-shown count="{count}" reason="budget"/>'


def budget_floor(chunks: int, *, tokenizer: TokenCounter = estimate_tokens) -> int:
    """The smallest budget `render_budgeted` honours for `chunks` retrieved chunks.

    Its smallest text counts every chunk (``<not-shown count=...>``) and closes
    with `RECALL_HINT`; below that, only chunks that fit whole are returned, and
    any others are refused.

    Examples:
        >>> budget_floor(3)
        34
    """
    if chunks < 1:
        return as_tokenizer(tokenizer)(NO_RESULTS)
    return as_tokenizer(tokenizer)(f"{_counted(chunks)}\n{RECALL_HINT}")


def check_tool_budget(budget: int | None, *,
                      tokenizer: TokenCounter = estimate_tokens) -> None:
    """Refuse, when an evidence tool is built, a `budget` its searches could not honour.

    Both frameworks' evidence tools call this, so a budget too small for the
    count of `TOOL_FLOOR_CHUNKS` chunks and the recall hint fails at once, not
    on the model's first search. None (every chunk whole) always passes.

    Raises:
        ValueError: `budget` below 1.
        capsa.errors.BudgetError: `budget` below `budget_floor`; the message names it.
    """
    if budget is None:
        return
    if budget < 1:
        raise ValueError(f"budget must be positive, got {budget}")
    floor = budget_floor(TOOL_FLOOR_CHUNKS, tokenizer=tokenizer)
    if budget < floor:
        raise BudgetError(
            f"budget={budget} tokens cannot hold even a count of the retrieved chunks and "
            f"the recall hint ({floor} tokens); use a budget of at least {floor}"
        )


def _assemble(shown: list[str], named: list[Evidence], counted: int, hint: bool) -> str:
    lines = list(shown)
    if named:
        lines.append(render_unshown(named))
    if counted:
        lines.append(_counted(counted))
    if hint:
        lines.append(RECALL_HINT)
    return "\n".join(lines)


def _shown(
    query: str, unique: list[Evidence], max_tokens: int, tokenizer: TokenCounter
) -> tuple[list[str], set[str], bool]:
    """The chunks `pack` shows within `max_tokens`: their lines, their ids, and any in part."""
    passages = [
        Passage(id=e.chunk_id, text=e.content, source=e.title or e.uri or e.document_id)
        for e in unique
    ]
    budget = Budget(max_tokens=max_tokens)
    try:
        packet = pack(query, passages, budget, tokenizer=tokenizer, compress=False)
        if not any(r.whole for r in packet.receipts):  # nothing fits whole: the best parts
            packet = pack(query, passages, budget, tokenizer=tokenizer)
    except BudgetError:  # too small for even an empty packet: show nothing
        return [], set(), False
    by_id = {e.chunk_id: e for e in unique}
    whole = {r.passage_id for r in packet.receipts if r.whole}
    lines: list[str] = []
    ids: set[str] = set()
    for passage, text in zip(packet.passages, packet.texts, strict=True):
        chunk = by_id[passage.id]
        ids.add(chunk.chunk_id)
        lines.append(render_chunk(chunk) if passage.id in whole else _part(chunk, text))
    return lines, ids, len(whole) < len(ids)


def render_budgeted(
    query: str,
    evidence: Sequence[Evidence],
    max_tokens: int,
    *,
    tokenizer: TokenCounter = estimate_tokens,
) -> str:
    """Retrieved chunks packed for `query` into `max_tokens`, the rest named by id.

    The most relevant chunks that fit stay whole, in relevance order (`pack`
    with ``compress=False``), rendered as usual ``<chunk>`` elements (the cite
    tool accepts them and compaction treats them as shown); the rest are named
    in a ``<not-shown>`` receipt. When not even one chunk fits whole, the packet
    holds parts instead: ``<part id=...>`` elements with the most relevant
    sentences (or a cut, with its marker). Parts are never parsed back as
    chunks, so nothing downstream mistakes a part for the whole. Pure: same
    input, same text.

    `max_tokens` bounds the whole returned text as `tokenizer` counts it, the
    receipt and the recall hint included: the text is measured, and while it is
    over, fewer chunks are shown (the packet's budget shrinks by the overshoot);
    when even the receipt naming every chunk does not fit beside the hint, the
    last ids named give way to a count (``<not-shown count="N" reason="budget"/>``).
    Counted chunks stay in the host's store (the tool's artifact) but the model
    cannot recall them by id; a narrower search finds them. Every chunk is thus
    shown whole, shown in part, named, or counted.

    Args:
        query: What the question asked; ranks the chunks' sentences.
        evidence: The retrieved chunks, in the retriever's order.
        max_tokens: Bound on the returned text, tags, receipt and hint included;
            at least `budget_floor` of the chunks' number.
        tokenizer: Counts tokens for the bound.

    Raises:
        capsa.errors.BudgetError: the chunks do not fit whole and `max_tokens`
            is below `budget_floor`; the message names both.

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
    count = as_tokenizer(tokenizer)
    unique = list({e.chunk_id: e for e in evidence}.values())
    everything = "\n".join(render_chunk(e) for e in unique) if unique else NO_RESULTS
    if count(everything) <= max_tokens:  # all whole: no receipt, no hint, no floor
        return everything
    floor = budget_floor(len(unique), tokenizer=tokenizer)
    if max_tokens < floor:
        what = (
            f"a count of the {len(unique)} retrieved chunks and the recall hint"
            if unique else "the no-results text"
        )
        raise BudgetError(
            f"budget={max_tokens} tokens cannot hold even {what} ({floor} tokens); "
            f"use a budget of at least {floor}"
        )
    inner = max_tokens
    while inner >= 1:
        lines, ids, parts = _shown(query, unique, inner, tokenizer)
        if not lines:
            break
        rest = [e for e in unique if e.chunk_id not in ids]
        text = _assemble(lines, rest, 0, bool(rest) or parts)
        over = count(text) - max_tokens
        if over <= 0:
            return text
        inner = min(inner - 1, count("\n".join(lines)) - over)
    for named in range(len(unique), 0, -1):  # nothing shown: ids, then a count
        text = _assemble([], unique[:named], len(unique) - named, True)
        if count(text) <= max_tokens:
            return text
    return _assemble([], [], len(unique), True)  # the floor itself, checked above
