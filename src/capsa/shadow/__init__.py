"""Shadow evaluation: compare two retrieval routes without leaking a document identity.

Run a candidate route beside the one being served, capture what each did with
every passage (`RouteCapture`), join the two inside the process (`pair`) and
release only numeric `PairedDecision` rows under fresh random ids. A
`ShadowRecorder` does this for live traffic, serving the baseline unchanged
whatever the candidate does, and a `ShadowReport` turns rows into agreement
and recall figures.
"""

from capsa.shadow.capture import (
    GATE_REASONS,
    Candidate,
    CaptureState,
    GateObservation,
    GateReason,
    RenderedBlock,
    RouteCapture,
    Side,
    capture_retrieved,
)
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair
from capsa.shadow.recorder import (
    InvalidationCause,
    RowSink,
    ShadowCounts,
    Shadowed,
    ShadowOutcome,
    ShadowRecorder,
)
from capsa.shadow.report import QueryAgreement, ShadowReport, spearman

__all__ = [
    "GATE_REASONS",
    "Candidate",
    "CaptureState",
    "GateObservation",
    "GateReason",
    "InvalidationCause",
    "PairedDecision",
    "QueryAgreement",
    "RandomBytes",
    "RenderedBlock",
    "RouteCapture",
    "RowSink",
    "ShadowCounts",
    "ShadowOutcome",
    "ShadowRecorder",
    "ShadowReport",
    "Shadowed",
    "Side",
    "capture_retrieved",
    "pair",
    "spearman",
]
