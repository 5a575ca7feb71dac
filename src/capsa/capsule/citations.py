"""Turn what a model wrote into chunk ids it may legitimately cite.

Citations arrive three ways: ids passed to a cite tool, native citation
annotations, and ``[chunk_id]`` markers in the answer text. Each is checked against
the ids the model could actually see. A model copying a long id sometimes drops a
character or a hyphen group; `cite_ids` repairs that damage, and only that: an id
is repaired to a candidate only when the written id is what remains of the
candidate after deletions, the candidate is long enough for that to be
unambiguous, and exactly one candidate fits. An id that merely resembles a
retrieved one (``chunk-3`` for ``chunk-4``) is never attributed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from capsa.capsule.messages import CitationRef, Evidence

__all__ = ["CiteResult", "Repair", "cite_ids", "parse_citations", "resolve_citations"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

_MIN_REPAIR_LENGTH = 16
"""Shortest candidate id a damaged id may be repaired to.

Below this, ids are human-readable (``hr-leave-12``) and a shortened one is as
likely a different chunk as a damaged copy; UUIDs and hashes are well above it.
"""

_MIN_KEPT_SHARE = 0.75
"""A damaged id must keep at least this share of the candidate's characters."""

_STRIP = " \t\r\n[](){}<>\"'`"
_TRAILING = ".,;:"
_MARKER = re.compile(r"\[([^\[\]\n]{1,400})\]")
_SPACES = re.compile(r"\s+")


class Repair(BaseModel):
    """An id as the model wrote it and the retrieved id it was repaired to."""

    model_config = _CONFIG

    written: str
    """The id as the model wrote it."""
    chunk_id: str
    """The retrieved id it stands for."""


class CiteResult(BaseModel):
    """What `cite_ids` made of the ids a model passed."""

    model_config = _CONFIG

    accepted: tuple[str, ...] = ()
    """Retrieved ids the citation stands for, in the order given, without repeats."""
    repaired: tuple[Repair, ...] = ()
    """Ids accepted only after repair, with what they were repaired to."""
    ignored: tuple[str, ...] = ()
    """Ids that match nothing the model could see; never attributed."""

    def acknowledgement(self) -> str:
        """What a cite tool tells the model: what was recorded and what was not.

        Ignored ids are named without asking the model to retry: it has answered,
        and a retry loop over an id it never saw only costs another request.

        Examples:
            >>> CiteResult(accepted=("c1",), ignored=("c9",)).acknowledgement()
            'Recorded 1 citation: c1. Ignored, not among the chunks you were shown: c9.'
        """
        if self.accepted:
            noun = "citation" if len(self.accepted) == 1 else "citations"
            said = f"Recorded {len(self.accepted)} {noun}: {', '.join(self.accepted)}."
        else:
            said = "Recorded no citations."
        if self.ignored:
            said += f" Ignored, not among the chunks you were shown: {', '.join(self.ignored)}."
        return said


def _normalize(raw: str) -> str:
    return raw.strip(_STRIP).rstrip(_TRAILING).strip(_STRIP)


def _is_subsequence(short: str, long: str) -> bool:
    letters = iter(long)
    return all(char in letters for char in short)


def _repair(written: str, candidates: Sequence[str]) -> str | None:
    folded = written.casefold()
    same_case = [c for c in candidates if c.casefold() == folded]
    if len(same_case) == 1:
        return same_case[0]
    damaged = [
        c
        for c in candidates
        if len(c) >= _MIN_REPAIR_LENGTH
        and _MIN_KEPT_SHARE * len(c) <= len(written) < len(c)
        and _is_subsequence(folded, c.casefold())
    ]
    return damaged[0] if len(damaged) == 1 else None


def cite_ids(raw_ids: Iterable[str], retrieved_ids: Sequence[str]) -> CiteResult:
    """Match the ids a model cited to the ids it was shown, repairing copy damage.

    A model copies ids out of search results; long ids (UUIDs, hashes) come back
    with a character or a hyphen group missing. Repair is limited to deletions, to
    candidates of at least 16 characters, and to a single fitting candidate, so an
    id that only looks like a retrieved one is reported as ignored, not attributed.

    Args:
        raw_ids: Ids as the model wrote them; brackets, quotes and trailing
            punctuation are stripped.
        retrieved_ids: The ids the model could see (this question's retrieval and
            the evidence capsule).

    Returns:
        The accepted ids, the repairs made, and the ids ignored.

    Examples:
        >>> uid = "3f2b8c1e-9d4a-4e7b-a6f0-2c5d8e9b1a73"
        >>> damaged = "[3f2b8c1e-9d4a-4e7b-a6f0-2c5d8e9b1a7]"  # last character lost
        >>> result = cite_ids([damaged, "chunk-3"], [uid, "chunk-4"])
        >>> result.accepted == (uid,), result.ignored
        (True, ('chunk-3',))
    """
    known = set(retrieved_ids)
    accepted: list[str] = []
    repaired: list[Repair] = []
    ignored: list[str] = []
    for raw in raw_ids:
        written = _normalize(raw)
        if raw in known:  # an id that itself has outer spaces or brackets, written exactly
            chunk_id: str | None = raw
        elif written in known:
            chunk_id = written
        else:
            chunk_id = _repair(written, retrieved_ids) if written else None
            if chunk_id is not None:
                repaired.append(Repair(written=written, chunk_id=chunk_id))
        if chunk_id is None:
            ignored.append(raw)
        elif chunk_id not in accepted:
            accepted.append(chunk_id)
    return CiteResult(accepted=tuple(accepted), repaired=tuple(repaired), ignored=tuple(ignored))


def parse_citations(answer_text: str, retrieved_ids: Sequence[str]) -> tuple[str, ...]:
    """Read ``[chunk_id]`` markers from an answer, keeping only ids that were retrieved.

    A marker may hold several ids separated by commas or semicolons
    (``[c1, c2]``). Markers are accepted only verbatim: free text is not the place to
    guess at damaged ids, and a bracketed word that is not a retrieved id (a
    footnote ``[1]``, a link's text) is simply not a citation.

    Args:
        answer_text: The model's answer.
        retrieved_ids: The ids the model could see.

    Returns:
        Cited ids in order of first appearance, without repeats.

    Examples:
        >>> parse_citations("EUR 230 [c1], see also [c2; c9] and [1].", ["c1", "c2"])
        ('c1', 'c2')
    """
    known = set(retrieved_ids)
    found: list[str] = []
    for marker in _MARKER.finditer(answer_text):
        for piece in re.split(r"[,;]", marker.group(1)):
            chunk_id = piece if piece in known else _normalize(piece)
            if chunk_id in known and chunk_id not in found:
                found.append(chunk_id)
    return tuple(found)


def _squash(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def _names_source(evidence: Evidence, ref: CitationRef) -> bool:
    return (ref.url is not None and evidence.uri == ref.url) or (
        ref.title is not None and evidence.title == ref.title
    )


def _resolve_one(ref: CitationRef, evidence: Sequence[Evidence]) -> str | None:
    if ref.chunk_id is not None:
        written = _normalize(ref.chunk_id)
        return next((e.chunk_id for e in evidence if e.chunk_id == ref.chunk_id), None) or next(
            (e.chunk_id for e in evidence if e.chunk_id == written), None)
    if ref.cited_text and ref.cited_text.strip():
        quote = _squash(ref.cited_text)
        matches = [e for e in evidence if quote in _squash(e.content)]
        if len(matches) > 1:
            matches = [e for e in matches if _names_source(e, ref)]
    else:
        matches = [e for e in evidence if _names_source(e, ref)]
    return matches[0].chunk_id if len(matches) == 1 else None


def resolve_citations(refs: Iterable[CitationRef], evidence: Sequence[Evidence]) -> tuple[str, ...]:
    """Match framework-reported citations to the chunks the model could see.

    A ref with a chunk id must name one of them exactly. A ref with quoted text is
    matched to the chunk containing that text (whitespace and case aside),
    narrowed by url or title when several do; a ref with only a url or title
    matches when exactly one visible chunk has it. An ambiguous or unmatched ref
    yields nothing, so no chunk is credited with a citation it may not have earned.

    Args:
        refs: Citations as reported.
        evidence: The chunks the model could see.

    Returns:
        Matched chunk ids in order, without repeats.

    Examples:
        >>> seen = [Evidence(chunk_id="c1", content="Hotels cost EUR 230.", document_id="d")]
        >>> resolve_citations([CitationRef(cited_text="hotels cost  EUR 230")], seen)
        ('c1',)
    """
    found: list[str] = []
    for ref in refs:
        chunk_id = _resolve_one(ref, evidence)
        if chunk_id is not None and chunk_id not in found:
            found.append(chunk_id)
    return tuple(found)
