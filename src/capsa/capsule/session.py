"""What both framework adapters do around a question, framework-free.

An adapter knows three moments: a question arrives, the model is about to be
called, the run ends. `start_question` turns the carried ledger (or none) and the
stored history into the ledger of the question that just arrived: it resumes a
question in progress, adopts a history it never recorded, and re-anchors on a
history something shortened. `check_tools` fails loudly on a misconfigured agent.
`PictureCache` fetches each cited picture once per question, through a sync or an
async fetcher, so a question's model calls all send the same bytes; the adapter
names the question (its conversation included), because a fetcher may answer
differently for each conversation's user.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence

from capsa.capsule.capsule import RetainedPicture
from capsa.capsule.ledger import EvidenceLedger

__all__ = ["AnyPictureFetcher", "PictureCache", "check_tools", "start_question"]

AnyPictureFetcher = Callable[[RetainedPicture], bytes | Awaitable[bytes | None] | None]
"""Returns (or, async, resolves to) a picture's bytes, or None; may raise."""

_Key = tuple[Hashable, str | None, str, str]


def start_question(
    ledger: EvidenceLedger | None,
    keys: Sequence[str | None],
    *,
    evidence_tools: Iterable[str] = (),
) -> EvidenceLedger:
    """The ledger once the question whose message is last in the history has arrived.

    - A question in progress (a resumed run) keeps its identity.
    - Without a ledger, the thread adopts the history it holds: the question begins
      at the last message and every earlier evidence return becomes a receipt.
    - A history shorter than the ledger recorded (summarised, messages removed) is
      re-anchored on what remains (`EvidenceLedger.locate`) instead of refused.

    Args:
        ledger: The carried ledger, or None.
        keys: The host's handles of the stored messages (message ids), in order; None
            where a message has none.
        evidence_tools: Names of the evidence tools, remembered on the ledger.

    Examples:
        >>> start_question(None, ["m0", "m1", "m2"]).question
        2
        >>> resumed = start_question(None, ["m0"]).end_question(4)
        >>> start_question(resumed, ["m0", "m1", "m2", "m3", "m4"]).question
        4
    """
    current = (ledger or EvidenceLedger()).with_evidence_tools(evidence_tools)
    current = current.locate(keys)
    if current.in_progress:
        return current
    last = max(len(keys) - 1, 0)
    boundary = current.ended_at if current.ended_at is not None else last
    if boundary > last:
        boundary = last
    if current.question is not None and boundary <= current.question:
        current = current.reanchor(boundary)
        boundary = last
    anchor = keys[boundary] if boundary < len(keys) else None
    return current.begin_question(boundary, anchor=anchor)


def check_tools(
    evidence_tools: Iterable[str],
    available: Sequence[tuple[str, object]],
    own: Mapping[str, object],
    *,
    who: str,
) -> None:
    """Fail loudly when the agent's tools do not match the configuration.

    Args:
        evidence_tools: Names the host declared as evidence tools.
        available: ``(name, tool)`` for every tool the agent offers the model.
        own: The tools the adapter registered itself (cite, recall), by name.
        who: The adapter's name, for the message.

    Raises:
        ValueError: an evidence tool the agent does not have (a typo would make every
            citation silently ignored), or a tool of the adapter's whose name another
            tool also uses (one would silently replace the other).
    """
    names = [name for name, _ in available]
    missing = sorted(set(evidence_tools) - set(names))
    if missing:
        raise ValueError(
            f"{who}: evidence tool(s) {missing} are not among the agent's tools {sorted(names)}; "
            "pass the tool objects (or their exact names) as evidence_tools"
        )
    for name, tool in own.items():
        clashing = [t for n, t in available if n == name and t is not tool]
        if clashing:
            raise ValueError(
                f"{who}: another tool is also named {name!r}, so one would replace the other; "
                "rename it, or choose another name (cite_tool_name=..., recall_tool_name=...)"
            )


class PictureCache:
    """Fetch each cited picture once per question; serve the bytes to every model call.

    A question is named by a `scope` the adapter chooses, and it must name the
    conversation too: one middleware serves many conversations, and a picture
    store answers each with its own user's bytes (or refusal), so a scope shared
    by two conversations would hand one the other's picture.

    Bounded: it keeps the most recent `size` pictures. A fetch that raised is
    remembered as raised, so a picture store that is down costs one call, not one
    per model call.
    """

    def __init__(self, fetch: AnyPictureFetcher, *, size: int = 256) -> None:
        self.fetch = fetch
        self.size = size
        self._store: OrderedDict[_Key, bytes | Exception | None] = OrderedDict()

    def _key(self, scope: Hashable, picture: RetainedPicture) -> _Key:
        return (scope, picture.collection, picture.document_id, picture.ref)

    def _keep(self, key: _Key, value: bytes | Exception | None) -> None:
        self._store[key] = value
        while len(self._store) > self.size:
            self._store.popitem(last=False)

    def fetch_all(self, pictures: Iterable[RetainedPicture], scope: Hashable) -> None:
        """Fetch what `scope` has not fetched yet; an async fetcher must use `afetch_all`."""
        for picture in pictures:
            key = self._key(scope, picture)
            if key in self._store:
                continue
            try:
                result = self.fetch(picture)
                if inspect.isawaitable(result):
                    if inspect.iscoroutine(result):
                        result.close()
                    raise TypeError(
                        "the picture fetcher is async; call the agent with ainvoke/astream"
                    )
                self._keep(key, result)
            except Exception as exc:  # noqa: BLE001 - reported as a dropped picture
                self._keep(key, exc)

    async def afetch_all(self, pictures: Iterable[RetainedPicture], scope: Hashable) -> None:
        """Fetch what `scope` has not fetched yet, awaiting an async fetcher."""
        for picture in pictures:
            key = self._key(scope, picture)
            if key in self._store:
                continue
            try:
                result = self.fetch(picture)
                if inspect.isawaitable(result):
                    result = await result
                self._keep(key, result)
            except Exception as exc:  # noqa: BLE001 - reported as a dropped picture
                self._keep(key, exc)

    def lookup(self, scope: Hashable) -> Callable[[RetainedPicture], bytes | None]:
        """A sync `PictureFetcher` over what was fetched for `scope`."""

        def get(picture: RetainedPicture) -> bytes | None:
            value = self._store.get(self._key(scope, picture))
            if isinstance(value, Exception):
                raise value
            return value

        return get

    def __getstate__(self) -> dict[str, object]:
        return {"fetch": self.fetch, "size": self.size}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["fetch"], size=state["size"])  # type: ignore[misc]
