"""Recall: bring receipted chunks back whole from the stored history.

Compaction shows an earlier question's uncited chunks only as a receipt naming
them. The stored history still holds every evidence return exactly as the tool
produced it (capsa never changes it), so a chunk named in a receipt can be shown
again, whole, whenever a later question needs it: compaction loses nothing. Ids
are checked and repaired like the cite tool's, against every chunk the history
holds; a recalled chunk is recorded as retrieved by the current question, which
makes it visible and citable now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from capsa import telemetry
from capsa.capsule.citations import Repair, cite_ids
from capsa.capsule.ledger import EvidenceLedger
from capsa.capsule.messages import Evidence, Message
from capsa.capsule.render import PREFIX_LENGTH, PREFIX_MARK, escape_attribute, render_evidence

__all__ = ["RecallResult", "recall", "recallable"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
_STRIP = " \t\r\n[](){}<>\"'`,;"


class RecallResult(BaseModel):
    """What `recall` found for the ids a model passed."""

    model_config = _CONFIG

    evidence: tuple[Evidence, ...] = ()
    """The recalled chunks, whole, in the order asked."""
    repaired: tuple[Repair, ...] = ()
    """Ids accepted only after repair, with what they were repaired to."""
    ignored: tuple[str, ...] = ()
    """Ids that match no chunk in the history."""

    def text(self) -> str:
        """What a recall tool returns to the model: the chunks, then what was not found.

        Examples:
            >>> RecallResult(ignored=("c9",)).text()
            '<not-found ids="c9"/>'
        """
        parts = [render_evidence(self.evidence)] if self.evidence else []
        if self.ignored:
            parts.append(f'<not-found ids="{escape_attribute(" ".join(self.ignored))}"/>')
        return "\n".join(parts) or "No chunk ids given."


def recallable(
    messages: Sequence[Message], ledger: EvidenceLedger | None, *, owned_tools: Iterable[str]
) -> dict[str, Evidence]:
    """Every chunk the owned tools returned, by id: the ledger's, then the history's
    (the most recent return wins)."""
    owned = frozenset(owned_tools)
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    found: dict[str, Evidence] = {}
    if ledger is not None:
        found.update((e.evidence.chunk_id, e.evidence) for e in ledger.entries if e.tool in owned)
    for message in messages:
        tool = message.tool_name or names.get(message.tool_call_id or "")
        if message.role == "tool" and tool in owned and message.evidence:
            found.update((e.chunk_id, e) for e in message.evidence)
    return found


def recall(
    chunk_ids: Iterable[str],
    messages: Sequence[Message],
    ledger: EvidenceLedger | None = None,
    *,
    owned_tools: Iterable[str],
) -> RecallResult:
    """Find chunks by id in the stored history's evidence returns (and the ledger).

    Args:
        chunk_ids: The ids the model asked for, as written: whole ids, or the
            prefixes receipts show for long ids (``3f2b8c1e*``, every chunk with
            that prefix). Damaged ids are repaired when exactly one chunk fits
            (see `cite_ids`).
        messages: The stored history (never the compacted view).
        ledger: The carried ledger; its entries keep cited chunks a shortened
            history may no longer hold.
        owned_tools: Names of the evidence tools (and the recall tool).

    Examples:
        >>> from capsa.capsule import TextPart
        >>> chunk = Evidence(chunk_id="c2", content="Meals: EUR 40.", document_id="d")
        >>> history = [Message(role="tool", tool_name="search", parts=(TextPart(text="..."),),
        ...                    evidence=(chunk,))]
        >>> recall(["[c2]", "c7"], history, owned_tools={"search"}).ignored
        ('c7',)
    """
    chunk_ids = list(chunk_ids)
    with telemetry.recall(len(chunk_ids)) as observed:
        result = _recall(chunk_ids, messages, ledger, owned_tools=owned_tools)
        observed(len(result.evidence), len(result.ignored))
    return result


def _recall(chunk_ids: Iterable[str], messages: Sequence[Message], ledger: EvidenceLedger | None,
            *, owned_tools: Iterable[str]) -> RecallResult:
    pool = recallable(messages, ledger, owned_tools=owned_tools)
    wanted: list[str] = []
    for raw in chunk_ids:
        written = raw.strip(_STRIP)
        if written.endswith(PREFIX_MARK) and len(written) > PREFIX_LENGTH:
            prefix = written[: -len(PREFIX_MARK)]
            wanted += [i for i in pool if i.startswith(prefix)] or [written]
        else:
            wanted.append(raw)
    checked = cite_ids(wanted, tuple(pool))
    return RecallResult(
        evidence=tuple(pool[i] for i in checked.accepted),
        repaired=checked.repaired,
        ignored=checked.ignored,
    )
