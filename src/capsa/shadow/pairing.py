"""Join two captures inside the process; release only numeric rows under fresh ids.

`pair` is the one place where the baseline's and the candidate's decisions
meet. It joins them by source identity, then forgets the identity: each
released `PairedDecision` holds numbers, booleans and closed-set gate reasons,
under a random row id and a random query id drawn for this call alone. Rows
can be logged, shipped to analytics or aggregated by `ShadowReport` without
carrying a document id, title, passage or query out of the process.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from capsa import telemetry
from capsa.errors import CaptureInvalid
from capsa.shadow.capture import GateReason, RouteCapture, _Decision

__all__ = ["PairedDecision", "RandomBytes", "pair"]

RandomBytes = Callable[[int], bytes]
"""A source of random bytes, `secrets.token_bytes` by default; tests inject their own."""

_ID_BYTES = 16
_ID = Field(pattern=r"^[0-9a-f]{32}$")


class PairedDecision(BaseModel):
    """One candidate passage, as both routes treated it, without its identity.

    A passage that only one route considered is still a row: the other side's
    ``*_present`` is False, its score None and its flags False.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    query_id: str = _ID
    """Random id shared by the rows of one `pair` call and by nothing else."""
    row_id: str = _ID
    """Random id of this row, drawn fresh; unrelated to the source identity."""
    baseline_present: bool
    """The baseline route scored this passage at all."""
    candidate_present: bool
    """The candidate route scored this passage at all."""
    baseline_score: float | None = Field(ge=0.0, le=1.0)
    """The baseline's score in [0, 1]; None when not present or its gate gives no score."""
    candidate_score: float | None = Field(ge=0.0, le=1.0)
    """The candidate's score in [0, 1]; None when not present or its gate gives no score."""
    baseline_admitted: bool
    """The baseline's gate admitted the passage."""
    candidate_admitted: bool
    """The candidate's gate admitted the passage."""
    baseline_gate_reason: GateReason | None
    """The baseline gate's reason; None when not present."""
    candidate_gate_reason: GateReason | None
    """The candidate gate's reason; None when not present."""
    baseline_selected: bool
    """The baseline's ranking selected the passage."""
    candidate_selected: bool
    """The candidate's ranking selected the passage."""
    baseline_rank: int | None = Field(default=None, ge=1)
    """The passage's 1-based position in the baseline's selection; None when not selected."""
    candidate_rank: int | None = Field(default=None, ge=1)
    """The passage's 1-based position in the candidate's selection; None when not selected."""
    baseline_included: bool
    """The passage reached the baseline's rendered block verbatim."""
    candidate_included: bool
    """The passage reached the candidate's rendered block verbatim."""
    baseline_visible: bool | None
    """The passage was in a block seen on the baseline's wire; None when the wire is unknown."""
    candidate_visible: bool | None
    """The passage was in a block seen on the candidate's wire; None when the wire is unknown."""


def pair(
    baseline: RouteCapture,
    candidate: RouteCapture,
    *,
    random_bytes: RandomBytes = secrets.token_bytes,
) -> tuple[PairedDecision, ...]:
    """Join two finalized captures of the same query and release anonymous rows.

    Both captures are spent by the call, whether it succeeds or refuses: a
    capture pairs once. Rows come out in an order drawn from `random_bytes`,
    so not even the sequence of sources survives.

    Args:
        baseline: The served route's capture (side ``"baseline"``).
        candidate: The trial route's capture (side ``"candidate"``).
        random_bytes: Source of the fresh ids; ``secrets.token_bytes`` unless
            a test needs determinism.

    Returns:
        One row per source either route considered.

    Raises:
        ValueError: the sides are swapped or the same capture is passed twice,
            or `random_bytes` repeated itself.
        CaptureInvalid: a capture is not finalized (unused, discarded or
            already paired), or the two observed different queries.

    Examples:
        >>> from capsa.shadow import Candidate, capture_retrieved
        >>> docs = [Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")]
        >>> rows = pair(capture_retrieved("baseline", "refunds", docs),
        ...             capture_retrieved("candidate", "refunds", docs))
        >>> rows[0].baseline_selected and rows[0].candidate_selected
        True
    """
    if baseline is candidate or baseline.side != "baseline" or candidate.side != "candidate":
        raise ValueError("pair(baseline, candidate) takes one capture of each side")
    with telemetry.pairing() as observed:
        rows = _pair(baseline, candidate, random_bytes)
        observed(rows)
    return rows


def _pair(
    baseline: RouteCapture, candidate: RouteCapture, random_bytes: RandomBytes
) -> tuple[PairedDecision, ...]:
    try:
        b_query, b_decisions, b_visible = baseline._release()
        c_query, c_decisions, c_visible = candidate._release()
    except CaptureInvalid:
        baseline.invalidate()
        candidate.invalidate()
        raise
    if b_query != c_query:
        raise CaptureInvalid("the two captures observed different queries", cause="query_mismatch")
    sources = list(dict.fromkeys([*b_decisions, *c_decisions]))
    ids = [random_bytes(_ID_BYTES).hex() for _ in range(len(sources) + 1)]
    if len(set(ids)) != len(ids):
        raise ValueError("the random source repeated an id")
    query_id, row_ids = ids[0], ids[1:]
    rows = []
    for row_id, source in zip(row_ids, sources, strict=True):
        b, c = b_decisions.get(source), c_decisions.get(source)
        rows.append(
            PairedDecision(
                query_id=query_id,
                row_id=row_id,
                baseline_present=b is not None,
                candidate_present=c is not None,
                baseline_score=b.score if b else None,
                candidate_score=c.score if c else None,
                baseline_admitted=bool(b and b.admitted),
                candidate_admitted=bool(c and c.admitted),
                baseline_gate_reason=b.reason if b else None,
                candidate_gate_reason=c.reason if c else None,
                baseline_selected=bool(b and b.selected),
                candidate_selected=bool(c and c.selected),
                baseline_rank=b.rank if b else None,
                candidate_rank=c.rank if c else None,
                baseline_included=bool(b and b.included),
                candidate_included=bool(c and c.included),
                baseline_visible=_visible(b, b_visible),
                candidate_visible=_visible(c, c_visible),
            )
        )
    return tuple(sorted(rows, key=lambda row: row.row_id))


def _visible(decision: _Decision | None, block_visible: bool | None) -> bool | None:
    if block_visible is None:
        return None
    return decision is not None and decision.included and block_visible
