"""The capsule: every chunk earlier answers cited, once and whole, in one block of text.

Evidence an answer rested on is what a follow-up question may need again; the rest
of an old retrieval is noise that costs tokens on every later request. The capsule
keeps the first and drops the second. A chunk cited by several questions appears
once, in the group of the newest question that cited it, and groups run newest
first under a single header. Chunks are never cut: a hard bound (`max_tokens`)
drops whole groups, oldest first, and the capsule says which chunks it left out.

Pictures of cited chunks travel as `RetainedPicture` records, each with the label
that must accompany the image. Fetching the bytes is I/O and belongs to the caller
(see `capsa.capsule.compact`); building the capsule is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import groupby
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from capsa.budget.tokens import estimate_tokens as _estimate
from capsa.capsule.ledger import EvidenceLedger, LedgerEntry
from capsa.capsule.messages import Evidence
from capsa.capsule.render import escape_attribute, escape_body, render_chunk

__all__ = [
    "CAPSULE_FOOTER",
    "CAPSULE_HEADER",
    "Capsule",
    "RetainedPicture",
    "TokenCounter",
    "Tokenizer",
    "as_tokenizer",
    "build_capsule",
    "estimate_tokens",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

CAPSULE_HEADER = (
    '<capsule note="The chunks that answers to earlier questions cited, kept whole, '
    'newest first. Cite a chunk id from here to rely on it again.">'
)
"""First line of every non-empty capsule."""

CAPSULE_FOOTER = "</capsule>"
"""Last line of every non-empty capsule."""

Tokenizer = Callable[[str], int]
"""Counts the tokens in a text."""

TokenCounter = Callable[[str], int] | Callable[[str], Sequence[Any]]
"""What a caller may pass as a tokenizer: a counter returning an int, or an encoder
returning the token sequence (tiktoken's ``Encoding.encode``)."""


def as_tokenizer(counter: TokenCounter) -> Tokenizer:
    """Accept a counter or an encoder and return a counter.

    Examples:
        >>> as_tokenizer(str.split)("three short words")
        3
        >>> as_tokenizer(len)("four")
        4
    """

    def count(text: str) -> int:
        result = counter(text)
        if isinstance(result, bool):
            raise TypeError(f"a tokenizer must return an int or a token sequence, got {result!r}")
        if isinstance(result, int):
            return result
        return len(result)

    return count


def estimate_tokens(text: str) -> int:
    """capsa's dependency-free token estimate (see `capsa.budget.estimate_tokens`).

    It counts UUIDs, hashes and CJK text far more closely than characters / 4,
    which undercounts them several times over.

    Examples:
        >>> estimate_tokens("twelve chars")
        2
    """
    return _estimate(text)


class RetainedPicture(BaseModel):
    """A picture of a cited chunk to re-attach, with the label that goes with it.

    Addressed by collection, document and reference together, because a reference
    such as ``#/pictures/0`` repeats across documents and a document can repeat
    across collections.
    """

    model_config = _CONFIG

    chunk_id: str
    """The cited chunk the picture belongs to (the first one, when several share it)."""
    document_id: str
    """The document holding the picture."""
    ref: str
    """The picture's reference inside the document."""
    collection: str | None = None
    """The collection the chunk came from."""
    label: str
    """Text to place immediately before the image; never sent without it."""


class Capsule(BaseModel):
    """The rendered capsule and what went into it."""

    model_config = _CONFIG

    text: str = ""
    """The capsule text; empty when nothing earlier was cited."""
    chunk_ids: tuple[str, ...] = ()
    """The chunks rendered, in the order they appear."""
    omitted: tuple[str, ...] = ()
    """Cited chunks left out to respect `max_tokens`, oldest groups first."""
    pictures: tuple[RetainedPicture, ...] = ()
    """Pictures of the rendered chunks, deduplicated, in capsule order."""
    tokens: NonNegativeInt = 0
    """Size of `text` by the tokenizer `build_capsule` was given."""


def _source(evidence: Evidence) -> str:
    if evidence.title:
        named = f'"{evidence.title}"'
        if evidence.uri and evidence.uri != evidence.title:
            return f"{named} ({evidence.uri})"
        return named
    return evidence.uri or evidence.document_id


def _picture_label(evidence: Evidence, ref: str) -> str:
    where = f' in collection "{evidence.collection}"' if evidence.collection else ""
    return (
        f"Picture {escape_body(ref)} of cited evidence [{escape_body(evidence.chunk_id)}]"
        f" from the knowledge base (document {escape_body(_source(evidence))}"
        f"{escape_body(where)}). Retrieved by search, not provided by the user."
    )


def _eligible(ledger: EvidenceLedger, before: int | None) -> list[tuple[int, LedgerEntry]]:
    eligible: list[tuple[int, LedgerEntry]] = []
    for entry in ledger.entries:
        questions = [q for q in entry.cited_in if before is None or q < before]
        if questions:
            eligible.append((max(questions), entry))
    eligible.sort(key=lambda pair: -pair[0])
    return eligible


def picture_records(evidence: Iterable[Evidence]) -> tuple[RetainedPicture, ...]:
    """The pictures of these chunks, deduplicated by collection, document and reference."""
    seen: set[tuple[str | None, str, str]] = set()
    pictures: list[RetainedPicture] = []
    for chunk in evidence:
        for ref in chunk.picture_refs:
            identity = (chunk.collection, chunk.document_id, ref)
            if identity in seen:
                continue
            seen.add(identity)
            pictures.append(
                RetainedPicture(
                    chunk_id=chunk.chunk_id,
                    document_id=chunk.document_id,
                    ref=ref,
                    collection=chunk.collection,
                    label=_picture_label(chunk, ref),
                )
            )
    return tuple(pictures)


def _omission_notice(omitted: Sequence[str], listed: int) -> str:
    shown = " ".join(omitted[:listed])
    more = len(omitted) - listed
    ids = f' ids="{escape_attribute(shown)}"' if listed else ""
    rest = f' more="{more}"' if listed and more else ""
    return f'<omitted count="{len(omitted)}" reason="max_tokens"{ids}{rest}/>'


def _fit_notice(
    head: str, omitted: Sequence[str], max_tokens: int, tokenizer: Tokenizer
) -> str | None:
    """The longest notice (most ids listed) that keeps the capsule within `max_tokens`."""
    low, high, best = 0, len(omitted), None
    while low <= high:  # the text grows with each listed id, so bisect on the count
        middle = (low + high) // 2
        text = "\n".join(part for part in (head, _omission_notice(omitted, middle), CAPSULE_FOOTER))
        if tokenizer(text) <= max_tokens:
            best, low = text, middle + 1
        else:
            high = middle - 1
    return best


def build_capsule(
    ledger: EvidenceLedger,
    max_tokens: PositiveInt | None = None,
    *,
    before: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> Capsule:
    """Render every cited chunk once and whole, grouped by the newest question citing it.

    Only citations count: a chunk retrieved but never cited, and its pictures, stay
    out. Sources are named by title, with the uri added when it differs; the
    collection is named on every chunk when the capsule draws on more than one.

    Args:
        ledger: The conversation's ledger.
        max_tokens: Optional hard bound on the capsule, notice included. Whole
            groups are dropped, oldest first, until the text fits with a notice
            naming as many of the chunks left out as fit (the rest are counted).
            When not even the header and a bare notice fit, the text is empty;
            `Capsule.omitted` names every chunk left out either way.
        before: Count only citations by questions whose identity is below this.
            Defaults to excluding the question in progress, whose evidence is
            still live in the history.
        tokenizer: Counts tokens for `max_tokens` and `Capsule.tokens`; a counter or
            an encoder returning tokens (see `as_tokenizer`).

    Returns:
        The capsule; empty when nothing qualifies.

    Examples:
        >>> from capsa.capsule import Evidence
        >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="d",
        ...                  title="Travel Policy")
        >>> ledger = (EvidenceLedger().begin_question(0)
        ...           .record_retrieval([chunk], tool="search").record_citations(["c1"])
        ...           .end_question(4))
        >>> print(build_capsule(ledger).text.splitlines()[1:])
        ['<group rank="1" of="1">', '<chunk id="c1" title="Travel Policy">', \
'EUR 230 a night.', '</chunk>', '</group>', '</capsule>']
    """
    tokenizer = as_tokenizer(tokenizer)
    if before is None and ledger.in_progress:
        before = ledger.question
    eligible = _eligible(ledger, before)
    if not eligible:
        return Capsule()
    name_collection = len({entry.evidence.collection for _, entry in eligible}) > 1
    groups = [
        [entry for _, entry in members] for _, members in groupby(eligible, key=lambda p: p[0])
    ]
    blocks = [
        "\n".join(render_chunk(entry.evidence, name_collection=name_collection) for entry in group)
        for group in groups
    ]
    kept = len(groups)
    while True:
        omitted = [e.evidence.chunk_id for group in groups[kept:] for e in group]
        parts = [CAPSULE_HEADER]
        parts += [
            f'<group rank="{i + 1}" of="{kept}">\n{block}\n</group>'
            for i, block in enumerate(blocks[:kept])
        ]
        text = "\n".join([*parts, CAPSULE_FOOTER])
        if max_tokens is None or (not omitted and tokenizer(text) <= max_tokens):
            break
        if omitted:
            fitted = _fit_notice("\n".join(parts), omitted, max_tokens, tokenizer)
            if fitted is not None:
                text = fitted
                break
        if kept == 0:
            text = ""  # not even the header fits; `omitted` still names every chunk
            break
        kept -= 1
    rendered = [entry for group in groups[:kept] for entry in group]
    return Capsule(
        text=text,
        chunk_ids=tuple(e.evidence.chunk_id for e in rendered),
        omitted=tuple(omitted),
        pictures=picture_records(e.evidence for e in rendered),
        tokens=tokenizer(text),
    )
