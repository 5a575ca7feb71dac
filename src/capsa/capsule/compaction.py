"""Rewrite a copy of the history so earlier evidence costs only what was cited.

Below the current question's identity, every return of an evidence tool is
rewritten; evidence returns are never removed, so every tool call keeps its return
and no provider rejects the request for an orphaned call. Nothing else changes:
not other tools' returns, not the user's text or pictures, and nothing at or above
the current question; cite exchanges only when asked (`cite_tools`, below).

Once a question ends, the wire form of its returns is fixed. Each shows the
chunks that question's answer cited, whole, and a receipt naming the rest by id
and source. A chunk already shown whole earlier is named, not repeated, in earlier
returns and in the current question's returns alike (it is on the wire, and
``recall`` still fetches it); nothing else of the current question changes. The wire
form of a question depends only on that question and the ones before it, so
every request shares a byte-identical prefix with the previous request of the
thread up to the newest question, and a provider's prompt cache serves it. (An
earlier design moved one capsule of all cited chunks to the newest earlier
return on every question; it was no smaller, and it made almost nothing
cacheable: see ``benchmarks/capsule.py``.)

Receipts name the chunks they stand for, so a ``recall`` tool (`recall`) can
bring any of them back whole from the stored history: compaction loses nothing.

Given the names of the cite tools (`cite_tools`), an ended question's cite calls
and their acknowledgements leave the wire too: what the question cited is already
what its returns show whole, so the exchange is capsa's bookkeeping repeated on
every later request. Each cite call goes with its return, so no call or return is
left unpaired; an assistant message left with no text, picture or call goes too.
This happens at the moment the question ends, when its returns are rewritten
anyway, so the wire form stays fixed from then on.
The input is never mutated; messages that do not change are shared between input
and output, which is safe because they are frozen.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from capsa import telemetry
from capsa.capsule.capsule import (
    RetainedPicture,
    TokenCounter,
    Tokenizer,
    as_tokenizer,
    estimate_tokens,
    picture_records,
)
from capsa.capsule.ledger import EvidenceLedger
from capsa.capsule.messages import Evidence, ImagePart, Message, Part, TextPart
from capsa.capsule.render import escape_body, render_chunk, render_reference, render_unshown
from capsa.errors import CompactionRefused

__all__ = [
    "Compaction",
    "DroppedPicture",
    "PictureFetcher",
    "compact",
    "compact_with_report",
    "group_sizes",
    "groups_to_drop",
    "pictures_needed",
    "stable_end",
    "view_cut",
    "view_notice",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

PictureFetcher = Callable[[RetainedPicture], bytes | None]
"""Returns a picture's bytes, or None when it has none; may raise."""

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

_WHOLE, _NAMED, _COUNTED = 0, 1, 2
"""How much of a stable return survives: cited chunks whole, ids only, a count only."""


class DroppedPicture(BaseModel):
    """A cited picture that was not re-attached, and why; its label was dropped with it."""

    model_config = _CONFIG

    picture: RetainedPicture
    """The picture that was meant to be attached."""
    reason: Literal["fetch_failed", "missing", "undecodable"]
    """``fetch_failed`` the fetcher raised; ``missing`` it returned nothing;
    ``undecodable`` the bytes are not a PNG, JPEG, GIF or WebP image."""
    detail: str = ""
    """The fetcher's error, when it raised."""


class Compaction(BaseModel):
    """The compacted history and an account of what compaction did."""

    model_config = _CONFIG

    messages: tuple[Message, ...]
    """The history to send to the model."""
    boundary: NonNegativeInt
    """The current question's identity; input messages from here on are untouched."""
    rewritten: NonNegativeInt = 0
    """Earlier evidence returns rewritten."""
    shown: tuple[str, ...] = ()
    """Ids of earlier chunks visible whole on the wire, in order of appearance."""
    referenced: tuple[str, ...] = ()
    """Ids of chunks the current question retrieved again while they are already
    visible whole earlier on the wire: its returns name them instead of repeating them."""
    unshown: tuple[str, ...] = ()
    """Ids of earlier chunks only named by a receipt (recallable), in order."""
    uncounted: tuple[str, ...] = ()
    """Ids of cited chunks `max_tokens` forced out of view, oldest first."""
    cite_calls_removed: tuple[str, ...] = ()
    """Ids of ended questions' cite calls taken off the wire with their acknowledgements."""
    kept_unknown: NonNegativeInt = 0
    """Earlier evidence returns kept verbatim because what they hold is not known
    (no `Message.evidence`): rewriting them could lose what nothing names."""
    tokens_added: NonNegativeInt | None = None
    """Tokens of everything compaction wrote (rewritten returns, notices, picture
    labels), counted when `max_tokens` was given; None otherwise (counting costs)."""
    attached: tuple[RetainedPicture, ...] = ()
    """Cited pictures re-attached."""
    dropped: tuple[DroppedPicture, ...] = ()
    """Cited pictures that could not be re-attached, with the reason."""


def _image_type(data: bytes) -> str | None:
    for signature, mime_type in _SIGNATURES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _fetch(
    pictures: Iterable[RetainedPicture], fetch: PictureFetcher
) -> tuple[list[Part], list[RetainedPicture], list[DroppedPicture]]:
    parts: list[Part] = []
    attached: list[RetainedPicture] = []
    dropped: list[DroppedPicture] = []
    for picture in pictures:
        try:
            data = fetch(picture)
        except Exception as exc:  # noqa: BLE001 - an unreadable picture costs itself, not the answer
            detail = f"{type(exc).__name__}: {exc}"
            dropped.append(DroppedPicture(picture=picture, reason="fetch_failed", detail=detail))
            continue
        if not data:
            dropped.append(DroppedPicture(picture=picture, reason="missing"))
            continue
        mime_type = _image_type(data)
        if mime_type is None:
            dropped.append(DroppedPicture(picture=picture, reason="undecodable"))
            continue
        encoded = base64.b64encode(data).decode("ascii")
        parts += [TextPart(text=picture.label), ImagePart(base64=encoded, mime_type=mime_type)]
        attached.append(picture)
    return parts, attached, dropped


def _owned_returns(messages: Sequence[Message], end: int, owned: frozenset[str]) -> list[int]:
    names = {call.id: call.name for m in messages[:end] for call in m.tool_calls}
    return [
        i
        for i, message in enumerate(messages[:end])
        if message.role == "tool"
        and (message.tool_name or names.get(message.tool_call_id or "")) in owned
    ]


def _after_tool_block(history: Sequence[Message], index: int, end: int) -> int:
    after = index + 1
    while after < end and history[after].role == "tool":
        after += 1
    return after


def _check(history: Sequence[Message], ledger: EvidenceLedger | None, owned: frozenset[str]) -> int:
    """The boundary, or a refusal that names the fix."""
    if ledger is None or ledger.question is None:
        if _owned_returns(history, len(history), owned):
            raise CompactionRefused(
                f"the history holds {len(history)} messages with evidence returns but no "
                "evidence ledger is carried, so nothing says where the current question "
                "begins; carry the EvidenceLedger beside the history, or adopt the history "
                "with EvidenceLedger().begin_question(len(history) - 1)"
            )
        return 0
    if ledger.question > len(history):
        raise CompactionRefused(
            f"the ledger's current question arrived with {ledger.question} messages but the "
            f"history holds {len(history)}: the stored history was shortened after it was "
            "recorded; re-anchor with ledger.reanchor(<index of the current question's "
            "first message>)"
        )
    return ledger.question


def _is_empty(message: Message) -> bool:
    """No call, no picture, no text: nothing a model could read (other parts are the
    removed call's own blocks or reasoning about it)."""
    return not message.tool_calls and not any(
        isinstance(p, ImagePart) or (isinstance(p, TextPart) and p.text.strip())
        for p in message.parts
    )


def _ended_cites(
    history: Sequence[Message], ledger: EvidenceLedger, boundary: int, cite_tools: frozenset[str]
) -> tuple[dict[int, Message | None], list[str]]:
    """What taking ended questions' cite exchanges off the wire does, by position.

    Only questions this ledger recorded qualify (from its first question up to the
    boundary): what they cited is what their returns show whole. A history adopted
    from before the ledger keeps its cite exchanges, the only record of its citations.
    Returns the replacement of each affected position (None: the message leaves) and
    the removed call ids.
    """
    first = ledger.first_question
    if not cite_tools or first is None:
        return {}, []
    changes: dict[int, Message | None] = {}
    removed: list[str] = []
    for index in range(first, min(boundary, len(history))):
        message = history[index]
        if message.role != "assistant" or not message.tool_calls:
            continue
        cites = [c for c in message.tool_calls if c.name in cite_tools]
        if not cites:
            continue
        removed += [c.id for c in cites]
        kept = tuple(c for c in message.tool_calls if c.name not in cite_tools)
        changed = message.model_copy(update={"tool_calls": kept})
        changes[index] = None if _is_empty(changed) else changed
    gone = set(removed)
    for index in range(first, min(boundary, len(history))):
        message = history[index]
        if message.role == "tool" and message.tool_call_id in gone:
            changes[index] = None
    return changes, removed


@dataclass(frozen=True)
class _Return:
    index: int
    question: int | None
    evidence: tuple[Evidence, ...]


def _stable_text(
    item: _Return, level: int, ledger: EvidenceLedger, shown: set[tuple[str, str]]
) -> tuple[str, list[Evidence], list[str], list[str]]:
    cited = (
        set(ledger.cited_ids(item.question))
        if item.question is not None
        else set(ledger.carried)  # returns older than the ledger: what forgotten questions cited
    )
    whole: list[Evidence] = []
    lines: list[str] = []
    unshown: list[Evidence] = []
    named_collection = len({e.collection for e in item.evidence}) > 1
    for chunk in item.evidence:
        key = (chunk.chunk_id, chunk.content)
        if chunk.chunk_id in cited and level == _WHOLE:
            if key in shown:
                lines.append(render_reference(chunk))
            else:
                shown.add(key)
                whole.append(chunk)
                lines.append(render_chunk(chunk, name_collection=named_collection, brief=True))
        else:
            unshown.append(chunk)
    forced = [c.chunk_id for c in item.evidence if c.chunk_id in cited and level != _WHOLE]
    if level == _COUNTED:
        lines = [f'<not-shown count="{len(item.evidence)}" reason="max_tokens"/>']
    elif unshown:
        lines.append(render_unshown(unshown))
    return "\n".join(lines), whole, [c.chunk_id for c in unshown], forced


def _pictures_of(whole: Iterable[Evidence], ledger: EvidenceLedger) -> list[Evidence]:
    out = []
    for chunk in whole:
        if not chunk.picture_refs:
            entry = ledger.entry(chunk.chunk_id)
            if entry is not None and entry.evidence.content == chunk.content:
                chunk = entry.evidence
        out.append(chunk)
    return out


@dataclass
class _Plan:
    texts: dict[int, str]
    pictures: dict[int, tuple[RetainedPicture, ...]]
    shown: list[str]
    unshown: list[str]
    forced: list[str]
    tokens: int
    visible: set[tuple[str, str]]
    """(id, content) of every chunk the rewritten returns show whole."""


def _plan(
    items: Sequence[_Return],
    levels: Sequence[int],
    ledger: EvidenceLedger,
    count: Tokenizer | None,
) -> _Plan:
    shown: set[tuple[str, str]] = set()
    plan = _Plan({}, {}, [], [], [], 0, shown)
    seen_pictures: set[tuple[str | None, str, str]] = set()
    for item, level in zip(items, levels, strict=True):
        text, whole, unshown, forced = _stable_text(item, level, ledger, shown)
        plan.texts[item.index] = text
        plan.tokens += count(text) if count is not None else 0
        plan.shown += [c.chunk_id for c in whole]
        plan.unshown += unshown
        plan.forced += forced
        fresh = [
            p
            for p in picture_records(_pictures_of(whole, ledger))
            if (p.collection, p.document_id, p.ref) not in seen_pictures
        ]
        seen_pictures.update((p.collection, p.document_id, p.ref) for p in fresh)
        if fresh:
            plan.pictures[item.index] = tuple(fresh)
            plan.tokens += sum(count(p.label) for p in fresh) if count is not None else 0
    return plan


def _current_texts(
    history: Sequence[Message],
    boundary: int,
    owned: frozenset[str],
    visible: set[tuple[str, str]],
    count: Tokenizer,
) -> tuple[dict[int, str], list[str]]:
    """The current question's returns, with chunks already visible whole named by reference.

    A return is rewritten only when it holds such a chunk, is text only, and comes out
    shorter; its other chunks are rendered whole, as the tool showed them. A chunk twice
    in the current question is named by reference the second time. Depends only on
    messages before each return, so the current question's prefix stays stable too.
    """
    seen = set(visible)
    texts: dict[int, str] = {}
    referenced: list[str] = []
    for index in _owned_returns(history, len(history), owned):
        message = history[index]
        if index < boundary or not message.evidence:
            continue
        chunks = message.evidence
        repeated = [c for c in chunks if (c.chunk_id, c.content) in seen]
        text_only = all(isinstance(p, TextPart) for p in message.parts)
        if repeated and text_only:
            named_collection = len({c.collection for c in chunks}) > 1
            lines = []
            for chunk in chunks:
                key = (chunk.chunk_id, chunk.content)
                lines.append(
                    render_reference(chunk)
                    if key in seen
                    else render_chunk(chunk, name_collection=named_collection)
                )
                seen.add(key)
            text = "\n\n".join(lines)
            if count(text) < count(message.text):
                texts[index] = text
                referenced += [c.chunk_id for c in repeated]
                continue
        text = message.text
        seen.update(
            (c.chunk_id, c.content)
            for c in chunks
            if c.content in text or escape_body(c.content) in text
        )
    return texts, referenced


def _returns(
    history: Sequence[Message], ledger: EvidenceLedger, boundary: int, owned: frozenset[str]
) -> tuple[list[_Return], int]:
    first = ledger.first_question if ledger.first_question is not None else boundary
    items: list[_Return] = []
    unknown = 0
    for index in _owned_returns(history, boundary, owned):
        evidence = history[index].evidence
        if evidence is None:
            unknown += 1
            continue
        question = ledger.question_of(index) if index >= first else None
        items.append(_Return(index, question, evidence))
    return items, unknown


LOW_WATER = 0.6
"""Default `low_water`: over the bound, degrade down to 60 % of it in one step."""


def _levels(n: int, named: int, counted: int) -> list[int]:
    return [_COUNTED if i < counted else _NAMED if i < named else _WHOLE for i in range(n)]


def _prefixes(items: Sequence[_Return]) -> list[int]:
    """Item counts at which a question's returns are complete, oldest question first."""
    ends: list[int] = []
    for i, item in enumerate(items):
        if i + 1 == len(items) or items[i + 1].question != item.question:
            ends.append(i + 1)
    return ends


def _fitted_plan(
    items: Sequence[_Return],
    ledger: EvidenceLedger,
    max_tokens: int | None,
    count: Tokenizer,
    low_water: float = LOW_WATER,
) -> _Plan:
    """The plan within `max_tokens`, degraded oldest first in steps that rarely move.

    The degradation is replayed question by question, so it is a pure function of
    the history: whenever a prefix ending at a question went over `max_tokens`,
    the oldest returns' cited chunks went from whole to named until it fitted
    `low_water * max_tokens`. Ended questions' wire forms therefore change only at
    those steps, not on every question once the bound is reached; with
    `low_water=1.0` each step frees just enough (the tightest fit). Going from
    named to counted loses the ids recall needs, so it starts only when naming
    every earlier return cannot fit `max_tokens`, and then also moves in steps.
    """
    if max_tokens is None:  # unbounded: nothing needs counting
        return _plan(items, [_WHOLE] * len(items), ledger, None)
    low = max(1, int(max_tokens * low_water))
    named = counted = 0
    plan = _plan(items, [_WHOLE] * len(items), ledger, count)
    for end in _prefixes(items):
        head = items[:end]
        plan = _plan(head, _levels(end, named, counted), ledger, count)
        if plan.tokens <= max_tokens:
            continue
        while plan.tokens > low and named < end:  # whole -> named, in a step
            named += 1
            plan = _plan(head, _levels(end, named, counted), ledger, count)
        if plan.tokens <= max_tokens:
            continue
        while plan.tokens > low and counted < end:  # named -> counted, when named cannot fit
            counted += 1
            plan = _plan(head, _levels(end, named, counted), ledger, count)
    if plan.tokens > max_tokens:
        raise CompactionRefused(
            f"max_tokens={max_tokens} cannot hold even a count of the {len(items)} earlier "
            f"evidence returns ({plan.tokens} tokens); raise max_tokens to at least "
            f"{plan.tokens}, or shorten the history (SummarizationMiddleware, trim_messages)"
        )
    return plan


def groups_to_drop(
    sizes: Sequence[int],
    max_tokens: int,
    *,
    low_water: float = LOW_WATER,
    peaks: Sequence[int] | None = None,
) -> int:
    """How many of the oldest question groups a view bounded by `max_tokens` leaves out.

    `sizes` are the token counts of the view's question groups as sent now,
    oldest first; the last is the current question, which is never dropped.
    The answer is replayed question by question from the ended questions alone,
    so a later request reaches the same start an earlier one did: when question
    ``k`` is asked, the ended groups kept so far plus room for a question as
    large as the largest so far (`peaks`) are checked against `max_tokens`, and
    when over it the oldest leave until that sum fits ``low_water * max_tokens``.
    A step therefore leaves ``(1 - low_water) * max_tokens`` of headroom: with
    ended questions of at most ``q`` tokens, the start, and so the prompt
    cache's prefix, moves at most once per ``floor((1 - low_water) * max_tokens / q)``
    questions. Only if the current question as sent is larger still do more
    leave for this request (what is sent never passes the bound while one
    question fits). Dropped questions stay in the stored history, recallable.

    Replaying with the sizes alone, the current question counted at its size
    when it ended, made a later request disagree with what the earlier ones had
    sent, and the prefix moved on back-to-back questions.

    Args:
        sizes: Each question group's tokens as sent now, oldest first.
        max_tokens: The bound on their sum.
        low_water: The fraction of the bound a step drops down to.
        peaks: Each group's tokens when it was the current question (its stored,
            uncompacted size); the room kept for the question being asked is the
            largest of the earlier ones. Default: `sizes`.

    Raises:
        ValueError: a bound below 1, `low_water` outside (0, 1], or `peaks` of
            another length than `sizes`.

    Examples:
        >>> groups_to_drop([40, 40, 40, 40], 100, low_water=0.5)  # one step of two
        2
        >>> groups_to_drop([40, 40, 40, 40, 40], 100, low_water=0.5)  # the next step
        4
        >>> groups_to_drop([40, 40, 40, 40, 40], 100, low_water=1.0)  # one a question
        3
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if not 0 < low_water <= 1:
        raise ValueError(f"low_water must lie in (0, 1], got {low_water}")
    if peaks is None:
        peaks = sizes
    if len(peaks) != len(sizes):
        raise ValueError(f"peaks has {len(peaks)} groups, sizes {len(sizes)}")
    low = max(1, int(max_tokens * low_water))
    dropped = 0
    largest = 0
    for asked in range(1, len(sizes)):  # groups dropped..asked-1 have ended
        largest = max(largest, peaks[asked - 1], sizes[asked - 1])
        kept = sum(sizes[dropped:asked])
        if kept + largest <= max_tokens:
            continue
        while kept + largest > low and dropped < asked:
            kept -= sizes[dropped]
            dropped += 1
    sent = sum(sizes[dropped:])
    if sent > max_tokens:  # the current question is larger than room was kept for
        while sent > low and dropped < len(sizes) - 1:
            sent -= sizes[dropped]
            dropped += 1
    return dropped


def view_notice(dropped: int) -> str:
    """What a bounded view says in place of the `dropped` oldest questions it left out."""
    return (
        f'<not-shown questions="{dropped}" reason="token_limit"/> The oldest questions '
        "left this view; the stored history keeps them and recall brings back any chunk by id."
    )


@dataclass(frozen=True)
class ViewCut:
    """Where a bounded view starts again after the messages before the first question."""

    start: int
    """Index of the first message kept after the head; 0 when nothing was dropped."""
    dropped: int
    """Question groups left out (each from a question's message up to the next)."""


def view_cut(
    roles: Sequence[str],
    tokens: Sequence[int],
    max_tokens: int,
    *,
    notice_tokens: int = 0,
    low_water: float = LOW_WATER,
    peaks: Sequence[int] | None = None,
) -> ViewCut:
    """Which oldest question groups a view of messages bounded by `max_tokens` leaves out.

    The messages before the first question (``"user"`` or ``"human"`` role) are
    the head and always stay, as does the current question; the groups between
    are dropped oldest first, in steps (`groups_to_drop`), so the view's start,
    and the prompt cache's prefix, moves rarely. Both adapters bound their views
    with this, and put `view_notice` where the groups were.

    Args:
        roles: Each message's role, in order.
        tokens: Each message's token count, in order.
        max_tokens: The bound on the whole view, the notice included.
        notice_tokens: Tokens of the notice that replaces dropped groups.
        low_water: The fraction of the bound a step drops down to.
        peaks: Each question group's tokens when it was the current question
            (`group_sizes` of the stored, uncompacted messages), so the replay
            keeps room for a question as large as those were sent; default: the
            groups' sizes now.

    Raises:
        ValueError: `peaks` names another number of groups than `roles` holds.

    Examples:
        >>> roles = ["system", "user", "ai", "user", "ai", "user", "ai", "user"]
        >>> view_cut(roles, [5, 30, 30, 30, 30, 30, 30, 10], 200, low_water=0.7)
        ViewCut(start=5, dropped=2)
    """
    starts = _question_starts(roles)
    if len(starts) < 2:
        return ViewCut(0, 0)
    sizes = group_sizes(roles, tokens)
    spare = max_tokens - sum(tokens[: starts[0]]) - notice_tokens
    dropped = groups_to_drop(sizes, max(1, spare), low_water=low_water, peaks=peaks)
    return ViewCut(starts[dropped] if dropped else 0, dropped)


def _question_starts(roles: Sequence[str]) -> list[int]:
    return [i for i, role in enumerate(roles) if role in ("user", "human")]


def group_sizes(roles: Sequence[str], tokens: Sequence[int]) -> list[int]:
    """Each question group's tokens, oldest first: from a question's message up to the next.

    The messages before the first question (the head) belong to no group.

    Examples:
        >>> group_sizes(["system", "user", "ai", "user"], [5, 10, 20, 7])
        [30, 7]
    """
    starts = _question_starts(roles)
    bounds = [*starts, len(roles)]
    return [sum(tokens[a:b]) for a, b in itertools.pairwise(bounds)]


def _rewrite(
    history: list[Message],
    ledger: EvidenceLedger,
    boundary: int,
    owned: frozenset[str],
    fetch_picture: PictureFetcher | None,
    max_tokens: int | None,
    count: Tokenizer,
    cites: tuple[dict[int, Message | None], list[str]],
    low_water: float = LOW_WATER,
) -> Compaction:
    items, unknown = _returns(history, ledger, boundary, owned)
    plan = _fitted_plan(items, ledger, max_tokens, count, low_water)
    current, referenced = _current_texts(history, boundary, owned, plan.visible, count)
    for index, text in (plan.texts | current).items():
        history[index] = history[index].model_copy(update={"parts": (TextPart(text=text),)})
    attached: list[RetainedPicture] = []
    dropped: list[DroppedPicture] = []
    inserts: list[tuple[int, Message]] = []
    if fetch_picture is not None:
        for index, pictures in plan.pictures.items():
            parts, got, lost = _fetch(pictures, fetch_picture)
            attached += got
            dropped += lost
            if parts:
                where = _after_tool_block(history, index, boundary)
                inserts.append((where, Message(role="user", parts=tuple(parts))))
    tokens = None
    if max_tokens is not None:
        tokens = plan.tokens - sum(count(d.picture.label) for d in dropped)
        if fetch_picture is None:
            tokens -= sum(count(p.label) for ps in plan.pictures.values() for p in ps)
    changes, removed = cites
    placed: list[Message | None] = list(history)
    for index, change in changes.items():
        placed[index] = change
    for where, message in sorted(inserts, key=lambda pair: -pair[0]):
        placed.insert(where, message)
    return Compaction(
        messages=tuple(m for m in placed if m is not None),
        boundary=boundary,
        rewritten=len(plan.texts),
        shown=tuple(plan.shown),
        referenced=tuple(dict.fromkeys(referenced)),
        unshown=tuple(dict.fromkeys(plan.unshown)),
        uncounted=tuple(dict.fromkeys(plan.forced)),
        cite_calls_removed=tuple(removed),
        kept_unknown=unknown,
        tokens_added=tokens,
        attached=tuple(attached),
        dropped=tuple(dropped),
    )


def pictures_needed(
    messages: Sequence[Message],
    ledger: EvidenceLedger | None,
    *,
    owned_tools: Iterable[str],
) -> tuple[RetainedPicture, ...]:
    """The cited pictures `compact` would attach, so a host can fetch them first.

    An adapter with an async fetcher awaits these, then passes a lookup as
    `fetch_picture`; bytes fetched once serve every model call of a question.
    """
    owned = frozenset(owned_tools)
    history = list(messages)
    if ledger is None or ledger.question is None or ledger.question > len(history):
        return ()
    items, _ = _returns(history, ledger, ledger.question, owned)
    plan = _plan(items, [_WHOLE] * len(items), ledger, estimate_tokens)
    return tuple(p for pictures in plan.pictures.values() for p in pictures)


def compact_with_report(
    messages: Sequence[Message],
    ledger: EvidenceLedger | None,
    *,
    owned_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: PositiveInt | None = None,
    tokenizer: TokenCounter = estimate_tokens,
    cite_tools: Iterable[str] = (),
    low_water: float = LOW_WATER,
) -> Compaction:
    """Compact a copy of the history and report what was done.

    Same contract as `compact`, which returns only the messages. Adapters use the
    report to tell their framework's event channel what was kept and dropped.

    Args:
        messages: The stored history, in order (positions are question identities).
        ledger: The ledger carried beside the history; its current question is the
            boundary. Evidence returns older than the ledger's first question were
            never recorded (a thread that began with an existing conversation): they
            become receipts, recallable by id.
        owned_tools: Names of the evidence tools (and the recall tool) whose earlier
            returns are compacted.
        fetch_picture: Fetches a cited picture's bytes. Without it no picture is
            attached. A picture whose fetch raises, returns nothing, or returns
            bytes that are not an image is dropped together with its label.
        max_tokens: Optional hard bound on everything compaction writes: rewritten
            returns, receipts, notices and picture labels. The oldest questions'
            cited chunks are shown by id only, then by count only, until it fits.
            The current question's returns are the tools' own output, outside the
            bound: compaction only ever shortens them (references to chunks already
            visible whole earlier). Degradation moves in steps (see `low_water`), so
            ended questions' wire forms change at those steps only.
        tokenizer: Counts tokens for `max_tokens`: a counter, or an encoder that
            returns the tokens (tiktoken's ``encode``).
        cite_tools: Names of the cite tools. In questions that have ended (and that
            the ledger recorded), their calls and acknowledgements leave the wire:
            what a question cited is what its returns show whole. Empty (the
            default): every cite exchange stays, as stored.
        low_water: With `max_tokens`, the fraction of the bound to degrade down to
            whenever the earlier returns go over it (0 < low_water <= 1). Lower
            values change the cached prefix less often but show fewer chunks
            whole; 1.0 frees just enough each time (the prefix then moves on
            almost every question once the bound is reached).

    Returns:
        The compacted history with its report.

    Raises:
        CompactionRefused: no ledger while the history holds evidence returns; a
            ledger whose question lies beyond the history's end (re-anchor it); a
            `max_tokens` too small for even a count of every earlier return. Each
            message names the fix.
    """
    if not 0 < low_water <= 1:
        raise ValueError(f"low_water must lie in (0, 1], got {low_water}")
    count = as_tokenizer(tokenizer)
    with telemetry.compaction(messages, count) as observed:
        report = _compact(messages, ledger, frozenset(owned_tools), fetch_picture, max_tokens,
                          count, frozenset(cite_tools), low_water)
        observed(report)
    return report


def _compact(messages: Sequence[Message], ledger: EvidenceLedger | None, owned: frozenset[str],
             fetch_picture: PictureFetcher | None, max_tokens: PositiveInt | None,
             count: Callable[[str], int], cite_tools: frozenset[str],
             low_water: float = LOW_WATER) -> Compaction:
    history = list(messages)
    boundary = _check(history, ledger, owned)
    if ledger is None:
        return Compaction(messages=tuple(history), boundary=boundary)
    cites = _ended_cites(history, ledger, boundary, cite_tools)
    if not cites[0] and not _owned_returns(history, len(history), owned):
        return Compaction(messages=tuple(history), boundary=boundary)
    return _rewrite(history, ledger, boundary, owned, fetch_picture, max_tokens, count, cites,
                    low_water)


def compact(
    messages: Sequence[Message],
    ledger: EvidenceLedger | None,
    *,
    owned_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: PositiveInt | None = None,
    tokenizer: TokenCounter = estimate_tokens,
    cite_tools: Iterable[str] = (),
    low_water: float = LOW_WATER,
) -> list[Message]:
    """Rewrite earlier evidence in a copy of the history down to what answers cited.

    Only what earlier answers cited stays visible whole, so the model keeps its
    sources while old retrievals stop costing tokens; the rest is named in
    receipts and can be recalled. The stored history is never touched; the host
    sends the returned list and keeps its own.

    See `compact_with_report` for the arguments.

    Raises:
        CompactionRefused: see `compact_with_report`.

    Examples:
        >>> from capsa.capsule import Evidence, TextPart, ToolCall
        >>> c1 = Evidence(chunk_id="c1", content="Hotels: EUR 230.", document_id="d")
        >>> c2 = Evidence(chunk_id="c2", content="Meals: EUR 40.", document_id="d")
        >>> call = ToolCall(id="t1", name="search", args={"query": "hotel cap"})
        >>> history = [
        ...     Message(role="user", parts=(TextPart(text="Hotel cap?"),)),
        ...     Message(role="assistant", tool_calls=(call,)),
        ...     Message(role="tool", tool_call_id="t1", parts=(TextPart(text="..."),),
        ...             evidence=(c1, c2)),
        ...     Message(role="assistant", parts=(TextPart(text="EUR 230 [c1]."),)),
        ...     Message(role="user", parts=(TextPart(text="And mileage?"),)),
        ... ]
        >>> ledger = (EvidenceLedger().begin_question(0)
        ...           .record_retrieval([c1, c2], tool="search").record_citations(["c1"])
        ...           .end_question(4).begin_question(4))
        >>> view = compact(history, ledger, owned_tools={"search"})
        >>> len(view) == len(history)  # contents shrink; no message is dropped
        True
        >>> print(view[2].text)
        <chunk id="c1" document="d">
        Hotels: EUR 230.
        </chunk>
        <not-shown title="d" ids="c2"/>
    """
    return list(
        compact_with_report(
            messages,
            ledger,
            owned_tools=owned_tools,
            fetch_picture=fetch_picture,
            max_tokens=max_tokens,
            tokenizer=tokenizer,
            cite_tools=cite_tools,
            low_water=low_water,
        ).messages
    )


def stable_end(roles: Sequence[str]) -> int | None:
    """Where a compacted request's cache-stable prefix ends: the previous question's message.

    When a question ends, its returns (and its cite exchanges) are rewritten on
    every later request, so what a request shares with the provider's cache
    ends at that question's own user message; that is where a cache
    breakpoint is read rather than written. `roles` are the request's message
    roles (``"user"``, or LangChain's ``"human"``, for a question); None before
    the second question, when nothing has been rewritten yet.

    Examples:
        >>> stable_end(["user", "assistant", "tool", "assistant", "user"])
        0
        >>> stable_end(["user", "assistant"]) is None
        True
    """
    asked = [n for n, role in enumerate(roles) if role in ("user", "human")]
    return asked[-2] if len(asked) > 1 else None
