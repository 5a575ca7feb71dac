"""The evidence ledger: per question, what was retrieved and what the answer cited.

A question is identified by the number of messages in the history when it
arrived. That number is a fact the host knows at the moment the question comes
in; it is never worked out later from message shapes, because mid-question a
user-role message is as likely to be tool results, pictures or an injected notice
as a new question, and mistaking one for a question would strip evidence the model
is still answering from. Identities therefore only grow, and the stored history
may only grow with them.

The ledger holds no framework objects and is JSON-serialisable: the host carries
it beside the history (in agent state, in memory) and it round-trips unchanged.
Every method returns a new ledger; none changes the one it is called on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from capsa.capsule.citations import parse_citations, resolve_citations
from capsa.capsule.messages import Evidence, Message

__all__ = [
    "CARRIED_RECALLABLE",
    "EvidenceLedger",
    "LedgerEntry",
    "prune_carried",
    "record_messages",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


CARRIED_RECALLABLE = 32
"""Cited chunks whose returns a shortening removed that `prune_carried` keeps recallable."""


def _add(questions: tuple[int, ...], question: int) -> tuple[int, ...]:
    return questions if question in questions else (*questions, question)


class LedgerEntry(BaseModel):
    """One chunk the conversation has retrieved, with the questions that used it."""

    model_config = _CONFIG

    evidence: Evidence
    """The chunk as the model was last shown it."""
    tool: str
    """The evidence tool that returned it; with the chunk id, the entry's key."""
    retrieved_in: tuple[NonNegativeInt, ...] = ()
    """Identities of the questions that retrieved it, in order."""
    cited_in: tuple[NonNegativeInt, ...] = ()
    """Identities of the questions whose answers cited it, in order."""


class EvidenceLedger(BaseModel):
    """What each question of a conversation retrieved and cited.

    Examples:
        >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="travel")
        >>> ledger = EvidenceLedger().begin_question(0)
        >>> ledger = ledger.record_retrieval([chunk], tool="search").record_citations(["c1"])
        >>> ledger.cited_ids(0)
        ('c1',)
        >>> EvidenceLedger.from_json(ledger.to_json()) == ledger
        True
    """

    model_config = _CONFIG

    question: NonNegativeInt | None = None
    """Identity of the current (or last) question: the history's length when it arrived."""
    in_progress: bool = False
    """True from `begin_question` until `end_question`; a question still in progress
    resumes (tool results returning, a retry) under the same identity."""
    first_question: NonNegativeInt | None = None
    """Identity of the first question this ledger saw. Evidence in the history below
    it was never recorded, so compaction refuses rather than lose it."""
    ended_at: NonNegativeInt | None = None
    """History length when the last question ended: where the next one begins."""
    questions: tuple[NonNegativeInt, ...] = ()
    """Identities of every question this ledger saw, in order; a message belongs to the
    newest question at or below its position."""
    evidence_tools: tuple[str, ...] = ()
    """Names of the evidence tools the host registered, so a restored ledger knows them."""
    anchor: str | None = None
    """The host's handle (message id) of the current question's first message, when it
    has one; lets `locate` find the question again after the history was shortened."""
    entries: tuple[LedgerEntry, ...] = ()
    """Every chunk an answer cited, and every chunk the current question retrieved, in
    order of first retrieval; `end_question` drops the ones never cited."""
    carried: tuple[str, ...] = ()
    """Ids cited by questions a shortening (summarisation, removed messages) forgot,
    oldest first.

    Their entries stay in `entries`, so `recall` brings them back whole even when
    the shortening removed their returns; returns of theirs still in the history
    show them whole, and they stay citable. `prune_carried` bounds it: ids still
    held by a return stay; of the others, only the newest are kept."""

    def begin_question(self, boundary: int, *, anchor: str | None = None) -> EvidenceLedger:
        """Start a question that arrived when the history held `boundary` messages.

        `anchor` is the host's handle of the question's first message, if any.

        Raises:
            ValueError: `boundary` is negative, not above the current question, or
                below where the last question ended: identities only grow.
        """
        if boundary < 0:
            raise ValueError(f"a question's identity is a message count, got {boundary}")
        if self.question is not None and boundary <= self.question:
            raise ValueError(
                f"question {boundary} cannot begin: question {self.question} already did, "
                "and identities only grow (was the stored history shortened?)"
            )
        if self.ended_at is not None and boundary < self.ended_at:
            raise ValueError(
                f"question {boundary} cannot begin inside the previous question, "
                f"which ended with {self.ended_at} messages"
            )
        first = self.first_question if self.first_question is not None else boundary
        update = {
            "question": boundary,
            "in_progress": True,
            "first_question": first,
            "questions": (*self.questions, boundary),
            "anchor": anchor,
        }
        return self.model_copy(update=update)

    def locate(self, keys: Sequence[str | None]) -> EvidenceLedger:
        """This ledger, re-anchored if the history (its messages' handles) was shortened.

        When the message at the current question's identity still carries the
        recorded `anchor` (or no anchor was recorded and the history is long
        enough), nothing changed. Otherwise the question is found by its anchor and
        re-anchored there; when its first message is gone too, everything left is
        treated as the current question (boundary 0), so nothing live is compacted.

        Examples:
            >>> ledger = EvidenceLedger().begin_question(6, anchor="m6")
            >>> ledger.locate(["summary", "m6", "m7"]).question
            1
        """
        question = self.question
        if question is None:
            if self.ended_at is not None and self.ended_at > len(keys):
                return self.reanchor(len(keys))
            return self
        if question < len(keys) and (self.anchor is None or keys[question] in (None, self.anchor)):
            return self
        if self.anchor is None and question <= len(keys):
            return self
        if not self.in_progress:  # between questions: the next one starts after what is left
            return self.reanchor(max(len(keys) - 1, 0))
        found = [i for i, key in enumerate(keys) if key is not None and key == self.anchor]
        return self.reanchor(found[0] if found else 0).model_copy(update={"anchor": self.anchor})

    def reanchor(self, boundary: int) -> EvidenceLedger:
        """Re-anchor on a history that was shortened (summarised, messages removed).

        Positions recorded before the shortening no longer mean anything, so the
        ledger starts over as if the thread began with the remaining messages: the
        current question (if any) resumes at `boundary` with what it retrieved and
        cited so far, and earlier questions are forgotten, except what they cited
        (`carried`): their returns still in the history show those chunks whole
        and a receipt for the rest, and `recall` brings any cited chunk back
        whole from the ledger even when the shortening removed its return.

        Examples:
            >>> ledger = EvidenceLedger().begin_question(40)
            >>> ledger.reanchor(3).question, ledger.reanchor(3).first_question
            (3, 3)
        """
        if boundary < 0:
            raise ValueError(f"a question's identity is a message count, got {boundary}")
        current = self.question
        live = self.in_progress
        forgotten = {
            entry.evidence.chunk_id
            for entry in self.entries
            if any(not (live and q == current) for q in entry.cited_in)
        }
        carried = tuple(dict.fromkeys([*self.carried, *sorted(forgotten)]))
        entries = tuple(
            entry.model_copy(
                update={
                    "retrieved_in": (boundary,) if live and current in entry.retrieved_in else (),
                    "cited_in": (boundary,) if live and current in entry.cited_in else (),
                }
            )
            for entry in self.entries
            if (live and current in entry.retrieved_in) or entry.evidence.chunk_id in carried
        )
        if not live:
            return EvidenceLedger(
                ended_at=boundary,
                first_question=boundary,
                evidence_tools=self.evidence_tools,
                entries=entries,
                carried=carried,
            )
        return EvidenceLedger(
            question=boundary,
            in_progress=True,
            first_question=boundary,
            questions=(boundary,),
            entries=entries,
            evidence_tools=self.evidence_tools,
            carried=carried,
        )

    def prune_carried(
        self, held: Iterable[str], *, keep: int = CARRIED_RECALLABLE
    ) -> EvidenceLedger:
        """This ledger with `carried` bounded: ids in `held`, and the newest `keep` others.

        A carried id that a return still in the history holds (`held`) is on the
        wire, shown whole, and always stays. One whose returns all left the history
        is only recallable, from its entry; every shortening adds such ids, so
        without a bound the ledger (stored on every update) would grow for the
        whole life of the thread. The oldest of them leave `carried`, and their
        entries leave too unless a question this ledger still knows cited or
        retrieved them: they were already off the wire, and the summary that
        replaced their question is all that remains of it.

        Raises:
            ValueError: `keep` is negative.

        Examples:
            >>> from capsa.capsule.messages import Evidence
            >>> chunks = [Evidence(chunk_id=i, content=i, document_id="d") for i in "abc"]
            >>> ledger = (EvidenceLedger().begin_question(0)
            ...           .record_retrieval(chunks, tool="search")
            ...           .record_citations("abc").end_question(4).reanchor(1))
            >>> ledger.carried, ledger.prune_carried({"a"}, keep=1).carried
            (('a', 'b', 'c'), ('a', 'c'))
        """
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        on_wire = set(held)
        gone = [i for i in self.carried if i not in on_wire]
        dropped = set(gone[: max(len(gone) - keep, 0)])
        if not dropped:
            return self
        carried = tuple(i for i in self.carried if i not in dropped)
        entries = tuple(
            e
            for e in self.entries
            if e.evidence.chunk_id not in dropped or e.cited_in or e.retrieved_in
        )
        return self.model_copy(update={"carried": carried, "entries": entries})

    def with_evidence_tools(self, names: Iterable[str]) -> EvidenceLedger:
        """The same ledger remembering these evidence tool names as well."""
        merged = tuple(sorted({*self.evidence_tools, *names}))
        if merged == self.evidence_tools:
            return self
        return self.model_copy(update={"evidence_tools": merged})

    def question_of(self, position: int) -> int | None:
        """The identity of the question the message at `position` belongs to; None
        when it predates every question this ledger saw."""
        owner = None
        for question in self.questions:
            if question <= position:
                owner = question
        return owner

    def end_question(self, history_length: int) -> EvidenceLedger:
        """Mark the current question answered; the history then held `history_length` messages.

        Chunks that no answer has cited leave the ledger here: once their question is
        over they are not citable and no capsule shows them, and keeping their text
        would make the ledger (which the host stores on every update) grow with every
        retrieval instead of with every citation. Retrieved again later, a chunk is
        simply recorded afresh.

        Raises:
            ValueError: no question began, or `history_length` is below its identity.
        """
        question = self._require_question("end a question")
        if history_length < question:
            raise ValueError(f"question {question} cannot end with only {history_length} messages")
        carried = set(self.carried)
        kept = tuple(
            entry
            for entry in self.entries
            if entry.cited_in or entry.evidence.chunk_id in carried
        )
        return self.model_copy(
            update={"in_progress": False, "ended_at": history_length, "entries": kept}
        )

    def record_retrieval(
        self, evidence: Evidence | Sequence[Evidence], *, tool: str
    ) -> EvidenceLedger:
        """Record chunks an evidence tool returned for the current question.

        Recording the same chunk twice in one question changes nothing, so a host
        may replay a question's tool returns safely. A chunk seen before keeps its
        history and takes newer content, the text the model last saw; the same
        content read back from a rendered return keeps the first, fuller record.

        Raises:
            ValueError: no question has begun.
        """
        question = self._require_question("record a retrieval")
        chunks = [evidence] if isinstance(evidence, Evidence) else list(evidence)
        entries = list(self.entries)
        position = {(entry.tool, entry.evidence.chunk_id): i for i, entry in enumerate(entries)}
        for chunk in chunks:
            at = position.get((tool, chunk.chunk_id))
            if at is None:
                position[(tool, chunk.chunk_id)] = len(entries)
                entries.append(LedgerEntry(evidence=chunk, tool=tool, retrieved_in=(question,)))
                continue
            entry = entries[at]
            retrieved = _add(entry.retrieved_in, question)
            if entry.evidence.content == chunk.content:
                chunk = entry.evidence  # same text read back (from a rendered return): keep
                # the record with its pictures and document id
            if retrieved != entry.retrieved_in or entry.evidence != chunk:
                update = {"evidence": chunk, "retrieved_in": retrieved}
                entries[at] = entry.model_copy(update=update)
        return self._with_entries(entries)

    def record_citations(self, chunk_ids: Iterable[str]) -> EvidenceLedger:
        """Record that the current question's answer cited these chunks.

        Pass ids already checked with `cite_ids`, `parse_citations` or
        `resolve_citations`; citing the same chunk again changes nothing.

        Raises:
            ValueError: no question has begun, or an id was never retrieved (the
                ledger has no content to keep for it).
        """
        question = self._require_question("record citations")
        wanted = list(dict.fromkeys(chunk_ids))
        entries = list(self.entries)
        visible = {id(e) for e in self._citable_entries()}
        positions: dict[str, list[int]] = {}
        for i, entry in enumerate(entries):
            if id(entry) in visible:
                positions.setdefault(entry.evidence.chunk_id, []).append(i)
        unknown = [chunk_id for chunk_id in wanted if chunk_id not in positions]
        if unknown:
            raise ValueError(f"cannot cite chunks that were never retrieved: {unknown}")
        for chunk_id in wanted:
            for at in positions[chunk_id]:
                entry = entries[at]
                cited = _add(entry.cited_in, question)
                if cited != entry.cited_in:
                    entries[at] = entry.model_copy(update={"cited_in": cited})
        return self._with_entries(entries)

    def entry(self, chunk_id: str, tool: str | None = None) -> LedgerEntry | None:
        """The entry for `chunk_id` (from `tool`, when given), or None when there is none.

        Evidence is keyed by tool and chunk id together: two tools may return
        different chunks under the same id, and neither overwrites the other.
        """
        return next(
            (
                e
                for e in self.entries
                if e.evidence.chunk_id == chunk_id and (tool is None or e.tool == tool)
            ),
            None,
        )

    def retrieved_ids(self, question: int | None = None) -> tuple[str, ...]:
        """Ids retrieved in `question` (default: the current one), in ledger order."""
        asked = self.question if question is None else question
        return tuple(
            dict.fromkeys(e.evidence.chunk_id for e in self.entries if asked in e.retrieved_in)
        )

    def cited_ids(self, question: int | None = None) -> tuple[str, ...]:
        """Ids cited in `question` (default: the current one), in ledger order."""
        asked = self.question if question is None else question
        return tuple(
            dict.fromkeys(e.evidence.chunk_id for e in self.entries if asked in e.cited_in)
        )

    def citable(self) -> tuple[Evidence, ...]:
        """What the model can cite now: this question's retrieval, then earlier cited chunks.

        Earlier cited chunks are visible in the evidence capsule; chunks an earlier
        question retrieved but never cited are receipts only, and not citable.
        """
        return tuple(e.evidence for e in self._citable_entries())

    def citable_ids(self) -> tuple[str, ...]:
        """Ids of `citable()`, in the same order, each once."""
        return tuple(dict.fromkeys(e.chunk_id for e in self.citable()))

    def _citable_entries(self) -> list[LedgerEntry]:
        current = self.question
        live = [e for e in self.entries if current in e.retrieved_in]
        carried = set(self.carried)
        kept = [
            e
            for e in self.entries
            if current not in e.retrieved_in
            and (any(q != current for q in e.cited_in) or e.evidence.chunk_id in carried)
        ]
        return [*live, *kept]

    def to_json(self) -> str:
        """Serialise to JSON; `from_json` restores an equal ledger."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> EvidenceLedger:
        """Restore a ledger written by `to_json`."""
        return cls.model_validate_json(text)

    def _require_question(self, action: str) -> int:
        if self.question is None:
            raise ValueError(f"cannot {action} before a question began (call begin_question)")
        return self.question

    def _with_entries(self, entries: list[LedgerEntry]) -> EvidenceLedger:
        if tuple(entries) == self.entries:
            return self
        return self.model_copy(update={"entries": tuple(entries)})


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {call.id: call.name for m in messages for call in m.tool_calls}


def prune_carried(
    ledger: EvidenceLedger,
    messages: Sequence[Message],
    *,
    owned_tools: Iterable[str],
    keep: int = CARRIED_RECALLABLE,
) -> EvidenceLedger:
    """`ledger` with `carried` bounded against the stored history (see
    `EvidenceLedger.prune_carried`): ids an owned return in `messages` still holds
    stay, and of the rest only the newest `keep` stay recallable.

    Adapters call it when a question ends, with the whole stored history.
    """
    if not ledger.carried:
        return ledger
    owned = frozenset(owned_tools)
    names = _tool_names(messages)
    held = {
        chunk.chunk_id
        for message in messages
        if message.role == "tool"
        and message.evidence
        and (message.tool_name or names.get(message.tool_call_id or "")) in owned
        for chunk in message.evidence
    }
    return ledger.prune_carried(held, keep=keep)


def record_messages(
    ledger: EvidenceLedger, messages: Sequence[Message], *, owned_tools: Iterable[str]
) -> EvidenceLedger:
    """Record what the current question's messages retrieved and cited.

    Reads the messages from the current question's identity onward, in order:
    returns of evidence tools that carry `Message.evidence` are recorded as
    retrievals; `Message.citations` (a cite tool's acknowledgement, native
    annotations) and ``[chunk_id]`` markers in assistant text are recorded as
    citations, each accepted only for chunks the model could see at that point.
    Replaying the same messages changes nothing, so an adapter may call this before
    every model call.

    Args:
        ledger: The ledger carried so far; returned as is when no question began.
        messages: The whole stored history (positions are question identities).
        owned_tools: Names of the evidence tools.

    Returns:
        The updated ledger (the same object when nothing new was seen).

    Examples:
        >>> from capsa.capsule.messages import TextPart
        >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="d")
        >>> history = [
        ...     Message(role="user", parts=(TextPart(text="Hotel cap?"),)),
        ...     Message(role="tool", tool_name="search", evidence=(chunk,)),
        ...     Message(role="assistant", parts=(TextPart(text="EUR 230 [c1]."),)),
        ... ]
        >>> ledger = record_messages(EvidenceLedger().begin_question(0), history,
        ...                          owned_tools={"search"})
        >>> ledger.cited_ids()
        ('c1',)
    """
    if ledger.question is None:
        return ledger
    owned = frozenset(owned_tools)
    names = _tool_names(messages)
    for message in messages[ledger.question :]:
        if message.role == "tool" and message.evidence is not None:
            tool = message.tool_name or names.get(message.tool_call_id or "")
            if tool in owned:
                ledger = ledger.record_retrieval(message.evidence, tool=tool or "")
        cited: list[str] = []
        if message.citations:
            cited.extend(resolve_citations(message.citations, ledger.citable()))
        if message.role == "assistant" and message.text:
            cited.extend(parse_citations(message.text, ledger.citable_ids()))
        if cited:
            ledger = ledger.record_citations(cited)
    return ledger
