"""The demo's knowledge base: extracted corpus files cut into paragraph chunks.

Retrieval is lexical (capsa's own BM25 scorer), so the demo needs no
embedding model and gives the same results on every machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from capsa.budget import LexicalScorer
from capsa.guard import Extracted

__all__ = ["Chunk", "chunk_corpus", "search"]

_MIN_CHARS = 80


@dataclass(frozen=True, slots=True)
class Chunk:
    """One paragraph of an extracted file, with a stable id."""

    id: str
    text: str
    source: str
    title: str


def chunk_corpus(files: Sequence[Extracted]) -> list[Chunk]:
    """Cut each extracted file into paragraphs; short lines (headings) join the next one.

    Ids are ``<file stem>-<n>-<hash>``: readable in a citation, stable across runs.
    """
    chunks: list[Chunk] = []
    for item in files:
        stem = item.label.rsplit(".", 1)[0]
        title = item.label if item.kind == "xlsx" else (
            item.text.strip().split("\n", 1)[0].lstrip("# ").strip()[:80])
        pending = ""
        count = 0
        for block in item.text.split("\n\n"):
            block = "\n".join(line.strip() for line in block.splitlines() if line.strip())
            if not block:
                continue
            if len(block) < _MIN_CHARS:
                pending = f"{pending} {block}".strip()
                continue
            text = f"{pending}\n{block}".strip() if pending else block
            pending = ""
            digest = hashlib.sha256(text.encode()).hexdigest()[:6]
            chunks.append(Chunk(id=f"{stem}-{count}-{digest}", text=text, source=item.label,
                                title=title))
            count += 1
        if pending:
            digest = hashlib.sha256(pending.encode()).hexdigest()[:6]
            chunks.append(Chunk(id=f"{stem}-{count}-{digest}", text=pending, source=item.label,
                                title=title))
    return chunks


def search(query: str, chunks: Sequence[Chunk], k: int = 4) -> list[tuple[Chunk, float]]:
    """The `k` best chunks for `query` by BM25, ties broken by id."""
    scores = LexicalScorer(k1=1.2, b=0.75).score(query, [c.text for c in chunks])
    ranked = sorted(zip(chunks, scores, strict=True), key=lambda pair: (-pair[1], pair[0].id))
    return [(chunk, score) for chunk, score in ranked[:k] if score > 0]
