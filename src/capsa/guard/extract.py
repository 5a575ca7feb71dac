"""The guard pipeline: one attachment, or a set, from untrusted bytes to text."""

from __future__ import annotations

import atexit
import errno
import hashlib
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from capsa import telemetry
from capsa.errors import (
    ExtractionFailed,
    FailureCause,
    IngestionRejected,
    RejectionReason,
    Stage,
)
from capsa.guard.archive import OLE_MAGIC, inspect_archive, inspect_ole
from capsa.guard.elements import (
    Element,
    MailHeaders,
    Page,
    cap_elements,
    pages_of,
    paragraphs,
    settle,
)
from capsa.guard.labels import safe_label
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.normalize import clean_detail, normalize
from capsa.guard.port import EmbeddedFile, Parsed, TextExtractor
from capsa.guard.sandbox.pool import IsolatedExtractor
from capsa.guard.sniff import bytes_over_name, resolve_kind, sniff
from capsa.markup import escape_attribute, escape_text

__all__ = [
    "Attachment",
    "Extracted",
    "ExtractionResult",
    "Omission",
    "awarm_up",
    "default_extractor",
    "extract_all",
    "extract_attachment",
    "read_bounded",
    "render_blocks",
    "warm_up",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
_REASONS: frozenset[str] = frozenset(RejectionReason.__args__)  # type: ignore[attr-defined]
_STAGES: frozenset[str] = frozenset(Stage.__args__)  # type: ignore[attr-defined]
_CAUSES: frozenset[str] = frozenset(FailureCause.__args__)  # type: ignore[attr-defined]
# A password-protected DOCX/XLSX/PPTX is an OLE compound file whose directory
# names this stream (UTF-16LE), beside EncryptionInfo (MS-OFFCRYPTO 2.3.4).
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")


class Attachment(BaseModel):
    """One file as it arrived: an untrusted name, an untrusted type, untrusted bytes."""

    model_config = _FROZEN
    label: str
    """The name it came with; shown only after `safe_label`, never used as a path."""
    media_type: str | None = None
    """The declared media type; checked against the bytes, never trusted."""
    payload: bytes
    """The raw bytes."""

    @field_validator("media_type")
    @classmethod
    def _printable_media_type(cls, value: str | None) -> str | None:
        # Declared types are echoed into results and reports; keep them to
        # printable ASCII so nothing downstream has to guess.
        if value is None:
            return None
        cleaned = "".join(ch for ch in value[:1024] if " " <= ch <= "~")[:255].strip()
        return cleaned or None


class Extracted(BaseModel):
    """One attachment's text, after every guard passed."""

    model_config = _FROZEN
    label: str
    """The safe label."""
    kind: str
    """The sniffed kind the parser was told (``"pdf"``, ``"docx"``, ...)."""
    media_type: str | None
    """The declared media type, as given."""
    text: str
    """Normalised text, never truncated."""
    byte_size: int
    """Size of the raw payload."""
    sha256: str
    """Hex digest of the raw payload, for provenance and caching."""
    source: str | None = None
    """The path it was read from, when `extract_many` read it; None for bytes handed in."""
    encoding: str | None = None
    """The character encoding capsa detected and decoded the text from (``"cp1252"``);
    None when the format says its own encoding (UTF-8 text, Office, PDF, ...)."""
    encoding_confidence: float | None = None
    """The detector's confidence in `encoding`, 0 to 1; None when nothing was guessed."""
    notes: tuple[str, ...] = ()
    """How the text was obtained, when a reader should know (``"OCR read 2 of 3 pages"``)."""
    parent: str | None = None
    """The label of the file this one was found in (``"mail.eml"``); None for a top-level file."""
    attachments: tuple[Extracted | Omission, ...] = ()
    """Files found inside this one (e-mail attachments, forwarded messages), each
    extracted on its own through the whole guard; sets list them flat after their parent."""
    elements: tuple[Element, ...] = ()
    """The document's structure, in reading order: each element a category and a span
    of `text` (`element_text`). Every extracted file has at least one; a parser that
    knows no structure (plain text) gives one ``NarrativeText`` per paragraph."""
    pages: tuple[Page, ...] = ()
    """Each page's span of `text`, for kinds with pages (PDF, slides, sheets, image
    frames); empty for the rest."""
    mail: MailHeaders | None = None
    """An e-mail's sender, recipients, subject and date; None for anything else."""

    def element_text(self, element: Element) -> str:
        """The text of one of this document's elements."""
        return self.text[element.start:element.end]

    def flattened(self) -> tuple[Extracted | Omission, ...]:
        """This file, then every file found inside it, depth first, each without `attachments`.

        `extract_all` and `extract_many` report sets this way, so each file is
        one entry in `extracted` or `omitted`.
        """
        outcomes: list[Extracted | Omission] = [self.model_copy(update={"attachments": ()})]
        for child in self.attachments:
            outcomes.extend(child.flattened() if isinstance(child, Extracted) else (child,))
        return tuple(outcomes)


class Omission(BaseModel):
    """Why one attachment did not become text."""

    model_config = _FROZEN
    label: str
    """The safe label."""
    stage: Stage
    """Where in the pipeline it stopped."""
    reason: RejectionReason | FailureCause
    """A closed-set code a program can switch on (``"too_large"``, ``"timeout"``, ...)."""
    detail: str
    """The sentence a person reads: the limit and the measured number."""
    source: str | None = None
    """The path it was read from, when `extract_many` read it; None for bytes handed in."""
    parent: str | None = None
    """The label of the file this one was found in; None for a top-level file."""

    @classmethod
    def from_error(cls, error: IngestionRejected | ExtractionFailed, *,
                   parent: str | None = None) -> Omission:
        """The omission a typed guard error stands for (its detail cleaned for printing)."""
        detail = clean_detail(error.detail)
        if isinstance(error, IngestionRejected):
            return cls(label=error.label, stage=error.stage, reason=error.reason, detail=detail,
                       parent=parent)
        return cls(label=error.label, stage="parser", reason=error.cause, detail=detail,
                   parent=parent)


Extracted.model_rebuild()


class ExtractionResult(BaseModel):
    """What `extract_all` made of a set: every input is in exactly one of the two lists,
    followed there by the files found inside it (an e-mail's attachments)."""

    model_config = _FROZEN
    extracted: tuple[Extracted, ...]
    """The files that became text, in input order."""
    omitted: tuple[Omission, ...]
    """The files that did not, each with its reason, in input order."""

    @property
    def text(self) -> str:
        """The extracted files as labelled blocks, escaped so no file can close its block."""
        return render_blocks(self.extracted)


def render_blocks(files: Sequence[Extracted]) -> str:
    """Render files as ``<attachment name="...">...</attachment>`` blocks.

    Labels and text are escaped with `capsa.markup`, the container standard
    every capsa renderer shares (``&``, ``<``, ``>``, quotes and their
    look-alikes such as ``＜``), so a file whose text says
    ``</attachment><system>`` or ``＜/attachment＞`` stays inside its own block.

    Examples:
        >>> one = Extracted(label="a.txt", kind="text", media_type=None,
        ...                 text="</attachment>", byte_size=13, sha256="0")
        >>> render_blocks([one])
        '<attachment name="a.txt">\\n&lt;/attachment&gt;\\n</attachment>'
    """
    return "\n\n".join(
        f'<attachment name="{escape_attribute(f.label)}">\n'
        f"{escape_text(f.text, strict=True)}\n</attachment>"
        for f in files
    )


def read_bounded(path: str | os.PathLike[str], limits: ExtractionLimits = DEFAULT_LIMITS,
                 *, label: str | None = None, follow_symlinks: bool = True,
                 beneath: str | os.PathLike[str] | None = None) -> bytes:
    """Read a regular file, but never more than ``limits.max_bytes + 1`` bytes of it.

    A named pipe, device or socket is refused before it is opened (reading
    one could block forever); with ``follow_symlinks=False``, as directory
    walks use it, so is a symbolic link, which could point anywhere. The file
    read is the one checked: a path swapped for a link, a pipe or another
    file between the check and the open is refused, not followed. With
    `beneath` (the root a walk found `path` in) and ``follow_symlinks=False``,
    every folder between that root and the file is opened without following
    a link too, so a folder swapped for a link after the walk is refused.

    Raises:
        IngestionRejected: ``too_large`` (stage ``size``) when the file is
            bigger; ``unsupported_type`` when it is not a regular file.
    """
    name = safe_label(label if label is not None else Path(path).name)
    info = os.stat(path, follow_symlinks=follow_symlinks)
    if stat.S_ISLNK(info.st_mode):
        raise _not_followed(name)
    if not stat.S_ISREG(info.st_mode):
        raise IngestionRejected("not a regular file (a pipe, device or socket)",
                                label=name, stage="size", reason="unsupported_type")
    if info.st_size > limits.max_bytes:
        raise _too_large(name, info.st_size, limits)
    # What is read is the file that was checked: a path swapped for a link, a pipe or
    # another file after the stat is refused (O_NOFOLLOW; O_NONBLOCK so a pipe's open
    # returns at once; then the descriptor's own identity), never followed or waited on.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        if beneath is not None and not follow_symlinks:
            fd = _open_beneath(beneath, path, flags)
        else:
            fd = os.open(path, flags)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and not follow_symlinks:
            raise _not_followed(name) from None
        raise
    with open(fd, "rb") as handle:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino) \
                or not stat.S_ISREG(opened.st_mode):
            raise IngestionRejected("the file was replaced between its check and its opening",
                                    label=name, stage="size", reason="unsupported_type")
        data = handle.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:  # the file grew after stat
        raise _too_large(name, len(data), limits)
    return data


def _open_beneath(root: str | os.PathLike[str], path: str | os.PathLike[str], flags: int) -> int:
    """Open `path` with `flags`, each folder from `root` down to it opened without following a link.

    A folder that is a link fails its open (``ENOTDIR`` with ``O_DIRECTORY``
    and ``O_NOFOLLOW``), which the caller refuses as ``symlink``; a path not
    beneath `root` is opened as it is.
    """
    relative = os.path.relpath(path, root)
    parts = Path(relative).parts
    if not parts or parts[0] == os.pardir or os.path.isabs(relative):
        return os.open(path, flags)
    # O_PATH where there is one: a folder is only passed through, never read
    folder_flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
    folder = os.open(root, folder_flags)
    try:
        for part in parts[:-1]:
            inner = os.open(part, folder_flags | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], flags, dir_fd=folder)
    finally:
        os.close(folder)


def extract_attachment(attachment: Attachment, extractor: TextExtractor | None = None,
                       limits: ExtractionLimits | None = None, *, index: int = 0) -> Extracted:
    """Turn one attachment into text, or refuse it with a typed error.

    The steps, in order, each able to refuse: safe label; empty and raw-size
    checks; zip central-directory inspection; sniffing the real kind and
    checking the declared type against it; the parser, inside an isolated
    worker (the default) with time and memory limits; normalisation and the
    per-file text ceiling (over it, the file is dropped, never cut); empty text.

    Args:
        attachment: the untrusted file.
        extractor: `None` for `default_extractor()`, the isolated pool. An
            `IsolatedExtractor` runs under `limits`; any other `TextExtractor`
            runs in this process (only for trusted parsers, e.g. in tests),
            still with every pre- and post-check and exception mapping.
        limits: `ExtractionLimits()` when None.
        index: position in its set, for the fallback label.

    Raises:
        IngestionRejected: a guard refused the file; `stage` and `reason` say where and why.
        ExtractionFailed: the parser raised, crashed, timed out or ran out of memory.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> doc = extract_attachment(Attachment(label="../notes.txt", payload=b"hi"),
        ...                          PlainTextExtractor())
        >>> doc.label, doc.kind, doc.text
        ('notes.txt', 'text', 'hi')
    """
    limits = limits or DEFAULT_LIMITS
    label = safe_label(attachment.label, index=index)
    allowance = _Allowance(deadline=time.monotonic() + limits.timeout_s,
                           files=limits.max_members, size=limits.max_uncompressed_bytes)
    with telemetry.extraction(label, len(attachment.payload)) as observed:
        result = _extract(attachment.payload, attachment.media_type, label, extractor, limits,
                          depth=0, allowance=allowance)
        observed(result)
    return result


@dataclass
class _Allowance:
    """What a top-level file and every file found inside it may use *together*.

    A 48-byte file whose parser invents a dozen embedded files must not become
    a dozen parses of a full `timeout_s` each: the files inside share the
    top-level file's wall clock, its member count and its uncompressed bytes.
    """

    deadline: float
    files: int
    size: int

    def take(self, payload: bytes, label: str, limits: ExtractionLimits) -> ExtractionLimits:
        """Charge one embedded file; the limits its own parse runs under.

        Raises:
            IngestionRejected: the files inside number or weigh more than allowed.
            ExtractionFailed: the shared wall clock has run out.
        """
        self.files -= 1
        if self.files < 0:
            raise IngestionRejected(
                f"more than {limits.max_members} files found inside one file together "
                "(max_members)", label=label, stage="archive", reason="too_many_members")
        self.size -= len(payload)
        if self.size < 0:
            raise IngestionRejected(
                f"the files found inside one file total more than "
                f"{limits.max_uncompressed_bytes} bytes (max_uncompressed_bytes)",
                label=label, stage="archive", reason="archive_too_large")
        remaining = self.deadline - time.monotonic()
        if remaining <= 0.05:
            raise ExtractionFailed(
                f"the wall-clock limit of {limits.timeout_s:g} s (timeout_s), shared with the "
                "file it was found in, ran out before it", label=label, cause="timeout")
        return limits.model_copy(update={"timeout_s": min(limits.timeout_s, remaining),
                                         "cpu_s": min(limits.cpu_s, math.ceil(remaining))})


def _extract(payload: bytes, media_type: str | None, label: str,
             extractor: TextExtractor | None, limits: ExtractionLimits, *,
             depth: int, allowance: _Allowance, parent: str | None = None) -> Extracted:
    if not payload:
        raise IngestionRejected("the file is empty", label=label, stage="size", reason="empty")
    if len(payload) > limits.max_bytes:
        raise _too_large(label, len(payload), limits)
    if payload.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        if parent is None:
            inspect_archive(payload, limits, label=label)
        else:  # found inside a file: what its members declare comes out of that file's share
            allowance.size -= inspect_archive(payload, limits, label=label,
                                              budget=max(allowance.size, 0))
    elif payload.startswith(OLE_MAGIC):
        inspect_ole(payload, limits, label=label)
    sniffed = sniff(payload)
    if sniffed == "ole" and _ENCRYPTED_PACKAGE in payload:
        raise IngestionRejected(
            "a password-protected Office file (an OLE container holding an EncryptedPackage); "
            "capsa never tries passwords", label=label, stage="sniff", reason="encrypted")
    kind = resolve_kind(sniffed, media_type, label=label,
                        trust_bytes=limits.on_type_mismatch == "trust_bytes",
                        trust_documents=limits.on_type_mismatch == "trust_document_bytes")
    overruled = bytes_over_name(kind, media_type)
    extractor = extractor if extractor is not None else default_extractor()
    if isinstance(extractor, IsolatedExtractor):
        parsed = extractor.run_parsed(kind, media_type, payload, limits, label=label,
                                      max_embedded_bytes=max(allowance.size, 0))
    else:
        parsed = run_in_process(extractor, kind, media_type, payload, limits, label)
    children = tuple(
        _extract_embedded(item, number, label, extractor, limits, depth=depth + 1,
                          allowance=allowance)
        for number, item in enumerate(parsed.embedded))
    text = parsed.text
    elements = parsed.elements or paragraphs(text)
    if children:
        text = (text + "\n\n" if text.strip() else "") + _attachment_listing(parsed, children)
        elements = (*elements, *paragraphs(text, start=len(parsed.text), category="ListItem"))
    if not text.strip():
        raise IngestionRejected("the parser found no text", label=label, stage="text",
                                reason="no_text")
    elements, note = cap_elements(elements, limits.max_elements, len(text))
    return Extracted(label=label, kind=kind, media_type=media_type, text=text,
                     byte_size=len(payload), sha256=hashlib.sha256(payload).hexdigest(),
                     encoding=parsed.encoding, encoding_confidence=parsed.encoding_confidence,
                     notes=(*((overruled,) if overruled else ()), *parsed.notes,
                            *((note,) if note is not None else ())),
                     parent=parent, attachments=children, elements=elements,
                     pages=pages_of(elements), mail=parsed.mail)


def _extract_embedded(item: EmbeddedFile, number: int, parent: str,
                      extractor: TextExtractor | None, limits: ExtractionLimits, *,
                      depth: int, allowance: _Allowance) -> Extracted | Omission:
    """One file found inside another, through the whole guard again, labelled by its parent."""
    label = f"{parent}/{safe_label(item.name, index=number + 1)}"
    try:
        if depth > limits.max_nesting_depth:
            raise IngestionRejected(
                f"found {depth} levels deep, over the limit of {limits.max_nesting_depth} "
                "(max_nesting_depth)", label=label, stage="archive", reason="nested_too_deep")
        own = allowance.take(item.payload, label, limits)
        return _extract(item.payload, item.media_type, label, extractor, own, depth=depth,
                        allowance=allowance, parent=parent)
    except (IngestionRejected, ExtractionFailed) as error:
        return Omission.from_error(error, parent=parent)


def _attachment_listing(parsed: Parsed, children: Sequence[Extracted | Omission]) -> str:
    """The line a parent's text gains for each file found inside it."""
    lines = ["Attached:"]
    for item, child in zip(parsed.embedded, children, strict=True):
        name = child.label.rsplit("/", 1)[-1]
        declared = f", {item.media_type}" if item.media_type else ""
        state = ("extracted separately" if isinstance(child, Extracted)
                 else f"not extracted: {child.reason}")
        lines.append(f"- {name} ({len(item.payload)} bytes{declared}; {state})")
    return "\n".join(lines)


def extract_all(attachments: Sequence[Attachment], extractor: TextExtractor | None = None,
                limits: ExtractionLimits | None = None, *,
                on_rejection: Literal["omit", "raise"] = "omit",
                on_outcome: Callable[[int, Extracted | Omission], None] | None = None,
                ) -> ExtractionResult:
    """Extract a set; four good files out of five still arrive, the fifth says why not.

    Files found inside another (an e-mail's attachments) follow their parent
    as entries of their own, labelled ``mail.eml/invoice.pdf``, and share the
    set-wide ceiling. Files are taken in order; a file whose text would take the set past
    ``limits.max_total_chars`` is omitted whole (``set_ceiling``), and later,
    smaller files may still fit. One file's failure never changes another's
    outcome.

    Args:
        on_rejection: ``"omit"`` records each refusal in `omitted`;
            ``"raise"`` raises the first typed error instead.
        on_outcome: called with ``(index, outcome)`` as each file finishes (progress bars);
            a file with attachments reports itself, then each attachment, under its index.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> result = extract_all([Attachment(label="a.txt", payload=b"a"),
        ...                       Attachment(label="b.txt", payload=b"")], PlainTextExtractor())
        >>> [f.label for f in result.extracted], [(o.label, o.reason) for o in result.omitted]
        (['a.txt'], [('b.txt', 'empty')])
    """
    if on_rejection not in ("omit", "raise"):
        raise ValueError("on_rejection must be 'omit' or 'raise'")
    limits = limits or DEFAULT_LIMITS
    with telemetry.extraction_set(len(attachments)) as observed:
        result = _extract_set(attachments, extractor, limits, on_rejection, on_outcome)
        observed(len(result.extracted), len(result.omitted))
    return result


def _extract_set(attachments: Sequence[Attachment], extractor: TextExtractor | None,
                 limits: ExtractionLimits, on_rejection: Literal["omit", "raise"],
                 on_outcome: Callable[[int, Extracted | Omission], None] | None,
                 ) -> ExtractionResult:
    extracted: list[Extracted] = []
    omitted: list[Omission] = []
    used = 0
    for index, attachment in enumerate(attachments):
        outcomes: tuple[Extracted | Omission, ...]
        try:
            outcomes = extract_attachment(attachment, extractor, limits, index=index).flattened()
        except (IngestionRejected, ExtractionFailed) as error:
            if on_rejection == "raise":
                raise
            outcomes = (Omission.from_error(error),)
        for outcome in outcomes:
            if isinstance(outcome, Extracted):
                if used + len(outcome.text) > limits.max_total_chars:
                    refused = _over_set_ceiling(outcome, used, limits)
                    telemetry.set_ceiling_omission()
                    if on_rejection == "raise":
                        raise refused
                    outcome = Omission.from_error(refused, parent=outcome.parent)
                else:
                    used += len(outcome.text)
            if isinstance(outcome, Omission):
                if on_rejection == "raise":
                    raise _as_error(outcome)
                omitted.append(outcome)
            else:
                extracted.append(outcome)
            if on_outcome is not None:
                on_outcome(index, outcome)
    return ExtractionResult(extracted=tuple(extracted), omitted=tuple(omitted))


def _over_set_ceiling(item: Extracted, used: int, limits: ExtractionLimits) -> IngestionRejected:
    return IngestionRejected(
        f"{len(item.text)} characters would take the set to {used + len(item.text)}, "
        f"over the set-wide limit of {limits.max_total_chars}",
        label=item.label, stage="set", reason="set_ceiling")


def _as_error(omission: Omission) -> IngestionRejected | ExtractionFailed:
    """The typed error an omission of an embedded file stands for (``on_rejection="raise"``)."""
    if omission.stage == "parser" and omission.reason in _CAUSES:
        return ExtractionFailed(omission.detail, label=omission.label,
                                cause=omission.reason)  # type: ignore[arg-type]
    return IngestionRejected(omission.detail, label=omission.label, stage=omission.stage,
                             reason=omission.reason)  # type: ignore[arg-type]


def rejection_from_worker(fields: dict[str, Any], label: str) -> IngestionRejected:
    """Rebuild a worker's refusal, accepting only the closed sets of reasons and stages.

    The child wrote every field, so a reason or stage may be any JSON value;
    one that is not a string is unknown here, never a `TypeError` (a list is
    unhashable) out of a set's membership test.
    """
    reason = fields.get("reason")
    stage = fields.get("stage")
    detail = clean_detail(fields.get("detail", ""))
    if (not isinstance(reason, str) or not isinstance(stage, str)
            or reason not in _REASONS or stage not in _STAGES):
        return IngestionRejected(f"worker sent an unknown refusal ({str(reason)[:50]!r})",
                                 label=label, stage="parser", reason="corrupt")
    return IngestionRejected(detail, label=label, stage=fields["stage"], reason=fields["reason"])


_DEFAULT: list[IsolatedExtractor] = []
_DEFAULT_LOCK = threading.Lock()


def default_extractor() -> IsolatedExtractor:
    """The process-wide isolated pool over plain text, unstructured and Tesseract.

    Started on first use with two workers (or one on a single core), shut
    down at interpreter exit. Build your own `IsolatedExtractor` for other
    pool sizes or default limits.
    """
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            from capsa.guard.extractors import default_router

            pool = IsolatedExtractor(default_router(), workers=min(2, os.cpu_count() or 1))
            atexit.register(pool.close)
            _DEFAULT.append(pool)
        return _DEFAULT[0]


def warm_up(*, wait: bool = True) -> IsolatedExtractor:
    """Start the process-wide pool now, so the first user's file does not wait for it.

    Starting a worker imports every parser and self-tests each on a trusted
    sample: seconds, once. Call this when the application starts (a web
    app's start-up hook, a notebook's first cell). Text, Markdown, CSV and
    JSON take the light path and never need the pool.

    Args:
        wait: return once every parser passed its self-test (True), or at
            once, with the pool starting in a background thread (False): a
            file that arrives meanwhile waits only for a worker to answer
            and for its own kind's parser, not for every kind's.
    """
    pool = default_extractor()
    if wait:
        pool.warm_up()
    else:
        pool.start(wait=False)
    return pool


async def awarm_up() -> IsolatedExtractor:
    """`warm_up` for an async application: the start runs in a thread, off the event loop.

    ``await awarm_up()`` in a start-up hook returns once every parser is
    ready while the loop keeps serving; ``warm_up(wait=False)`` returns at
    once instead.

    Usage:
        .. code-block:: python

            @app.on_event("startup")
            async def start_parsers() -> None:
                await awarm_up()
    """
    import asyncio

    return await asyncio.to_thread(warm_up)


def _not_followed(label: str) -> IngestionRejected:
    return IngestionRejected("a symbolic link found in a directory walk is not followed",
                             label=label, stage="size", reason="symlink")


def _too_large(label: str, size: int, limits: ExtractionLimits) -> IngestionRejected:
    return IngestionRejected(f"{size} bytes, over the limit of {limits.max_bytes}",
                             label=label, stage="size", reason="too_large")


def run_in_process(extractor: TextExtractor, kind: str, media_type: str | None, payload: bytes,
                   limits: ExtractionLimits, label: str) -> Parsed:
    """Run a trusted or in-process-safe extractor here, with every post-check and error mapping."""
    with _parser_errors(label):
        configure = getattr(extractor, "with_limits", None)
        if configure is not None:
            extractor = configure(limits)
        raw = extractor.extract(kind, media_type, payload, max_pages=limits.max_pages)
    parsed = Parsed(raw) if isinstance(raw, str) else raw
    if not isinstance(parsed, Parsed) or not isinstance(parsed.text, str):
        raise ExtractionFailed(f"extractor returned {type(raw).__name__}, not str",
                               label=label, cause="protocol")
    text = normalize(parsed.text)
    if len(text) > limits.max_text_chars:
        raise IngestionRejected(
            f"extracted {len(text)} characters, over the limit of {limits.max_text_chars}; "
            "dropped whole, never truncated", label=label, stage="text", reason="text_too_long")
    elements, note = settle(parsed.elements, parsed.text, text, limits.max_elements)
    notes = parsed.notes if note is None else (*parsed.notes, note)
    return replace(parsed, text=text, elements=elements, notes=notes)


@contextmanager
def _parser_errors(label: str) -> Iterator[None]:
    try:
        yield
    except IngestionRejected as error:
        raise IngestionRejected(error.detail, label=label, stage=error.stage,
                                reason=error.reason) from error
    except ExtractionFailed as error:
        raise ExtractionFailed(error.detail, label=label, cause=error.cause) from error
    except MemoryError as error:
        raise ExtractionFailed("ran out of memory", label=label, cause="memory_limit") from error
    except Exception as error:
        raise ExtractionFailed(clean_detail(f"{type(error).__name__}: {error}"), label=label,
                               cause="raised") from error
