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

from collections.abc import Callable, Sequence
from itertools import groupby

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from capsa.capsule.ledger import EvidenceLedger, LedgerEntry
from capsa.capsule.messages import Evidence

__all__ = [
    "CAPSULE_HEADER",
    "NO_RESULTS",
    "RECEIPT",
    "Capsule",
    "RetainedPicture",
    "Tokenizer",
    "build_capsule",
    "estimate_tokens",
    "render_evidence",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

CAPSULE_HEADER = (
    "[Evidence capsule: the chunks that answers to earlier questions cited, kept whole, "
    "newest first. Cite a chunk id from here to rely on it again.]"
)
"""First line of every non-empty capsule."""

RECEIPT = (
    "[Earlier search result, not shown; the chunks answers cited are in the evidence capsule.]"
)
"""What an earlier evidence return that does not carry the capsule is replaced by."""

NO_RESULTS = "No results found."
"""What a search tool returns when it found nothing."""

Tokenizer = Callable[[str], int]
"""Counts the tokens in a text."""


def estimate_tokens(text: str) -> int:
    """A dependency-free token estimate: one token per four characters, rounded up.

    Examples:
        >>> estimate_tokens("twelve chars")
        3
    """
    return (len(text) + 3) // 4


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


def _render(evidence: Evidence, *, name_collection: bool) -> str:
    lines = [f"[{evidence.chunk_id}] Source: {_source(evidence)}"]
    if name_collection:
        lines.append(f"Collection: {evidence.collection or '(none)'}")
    lines.append(evidence.content)
    return "\n".join(lines)


def render_evidence(evidence: Sequence[Evidence]) -> str:
    """Render retrieved chunks for a search tool's output, in the capsule's own format.

    Each chunk opens with its ``[chunk_id]`` and source, so the model learns the ids
    it can cite; the collection is named when the chunks come from several.

    Examples:
        >>> print(render_evidence([Evidence(chunk_id="c1", content="EUR 230.", document_id="d",
        ...                                 title="Travel Policy")]))
        [c1] Source: "Travel Policy"
        EUR 230.
    """
    if not evidence:
        return NO_RESULTS
    name_collection = len({e.collection for e in evidence}) > 1
    return "\n\n".join(_render(e, name_collection=name_collection) for e in evidence)


def _picture_label(evidence: Evidence, ref: str) -> str:
    where = f' in collection "{evidence.collection}"' if evidence.collection else ""
    return (
        f"Picture {ref} of cited evidence [{evidence.chunk_id}] from the knowledge base"
        f" (document {_source(evidence)}{where}). Retrieved by search, not provided by the user."
    )


def _eligible(ledger: EvidenceLedger, before: int | None) -> list[tuple[int, LedgerEntry]]:
    eligible: list[tuple[int, LedgerEntry]] = []
    for entry in ledger.entries:
        questions = [q for q in entry.cited_in if before is None or q < before]
        if questions:
            eligible.append((max(questions), entry))
    eligible.sort(key=lambda pair: -pair[0])
    return eligible


def _pictures(entries: list[LedgerEntry]) -> tuple[RetainedPicture, ...]:
    seen: set[tuple[str | None, str, str]] = set()
    pictures: list[RetainedPicture] = []
    for entry in entries:
        evidence = entry.evidence
        for ref in evidence.picture_refs:
            identity = (evidence.collection, evidence.document_id, ref)
            if identity in seen:
                continue
            seen.add(identity)
            pictures.append(
                RetainedPicture(
                    chunk_id=evidence.chunk_id,
                    document_id=evidence.document_id,
                    ref=ref,
                    collection=evidence.collection,
                    label=_picture_label(evidence, ref),
                )
            )
    return tuple(pictures)


def _omission_notice(omitted: list[str], max_tokens: int) -> str:
    return (
        f"[{len(omitted)} older cited chunk(s) left out to keep the capsule within "
        f"{max_tokens} tokens: {', '.join(omitted)}.]"
    )


def build_capsule(
    ledger: EvidenceLedger,
    max_tokens: PositiveInt | None = None,
    *,
    before: int | None = None,
    tokenizer: Tokenizer = estimate_tokens,
) -> Capsule:
    """Render every cited chunk once and whole, grouped by the newest question citing it.

    Only citations count: a chunk retrieved but never cited, and its pictures, stay
    out. Sources are named by title, with the uri added when it differs; the
    collection is named on every chunk when the capsule draws on more than one.

    Args:
        ledger: The conversation's ledger.
        max_tokens: Optional hard bound on the capsule. Whole groups are dropped,
            oldest first, until the text fits, and a closing line names the chunks
            left out. When even that line alone exceeds the bound, the capsule is
            that line alone: the omission is never silent.
        before: Count only citations by questions whose identity is below this.
            Defaults to excluding the question in progress, whose evidence is
            still live in the history.
        tokenizer: Counts tokens for `max_tokens` and `Capsule.tokens`.

    Returns:
        The capsule; empty when nothing qualifies.

    Examples:
        >>> from capsa.capsule import Evidence
        >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="d",
        ...                  title="Travel Policy")
        >>> ledger = (EvidenceLedger().begin_question(0)
        ...           .record_retrieval([chunk], tool="search").record_citations(["c1"])
        ...           .end_question(4))
        >>> print(build_capsule(ledger).text.splitlines()[2:])
        ['[Group 1 of 1, newest first]', '[c1] Source: "Travel Policy"', 'EUR 230 a night.']
    """
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
        "\n\n".join(_render(entry.evidence, name_collection=name_collection) for entry in group)
        for group in groups
    ]
    kept = len(groups)
    while True:
        omitted = [e.evidence.chunk_id for group in groups[kept:] for e in group]
        parts = [CAPSULE_HEADER] if kept else []
        parts += [
            f"[Group {i + 1} of {kept}, newest first]\n{block}"
            for i, block in enumerate(blocks[:kept])
        ]
        if omitted and max_tokens is not None:
            parts.append(_omission_notice(omitted, max_tokens))
        text = "\n\n".join(parts)
        tokens = tokenizer(text)
        if max_tokens is None or tokens <= max_tokens or kept == 0:
            break
        kept -= 1
    rendered = [entry for group in groups[:kept] for entry in group]
    return Capsule(
        text=text,
        chunk_ids=tuple(e.evidence.chunk_id for e in rendered),
        omitted=tuple(omitted),
        pictures=_pictures(rendered),
        tokens=tokens,
    )
