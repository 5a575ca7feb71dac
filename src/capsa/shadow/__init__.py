"""Shadow evaluation: compare two retrieval routes without leaking a document identity.

Run a candidate route beside the one being served, capture what each did with
every passage (`RouteCapture`), join the two inside the process (`pair`) and
release only numeric `PairedDecision` rows under fresh random ids. A
`ShadowRecorder` does this for live traffic, serving the baseline unchanged
whatever the candidate does, and a `ShadowReport` turns rows into agreement
and recall figures.
"""

from capsa.shadow.capture import (
    DROP_GATE_REASONS,
    GATE_REASONS,
    Candidate,
    CaptureState,
    GateObservation,
    GateReason,
    RenderedBlock,
    RouteCapture,
    Side,
    capture_packed,
    capture_retrieved,
)
from capsa.shadow.offline import (
    CorpusPassage,
    Route,
    RouteFactory,
    RouteRun,
    ShadowRun,
    capture_route,
    compare_routes,
    prompt_for,
)
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair
from capsa.shadow.recorder import (
    InvalidationCause,
    RecorderLifecycle,
    RowSink,
    ShadowCounts,
    ShadowOutcome,
    ShadowRecorder,
    Slot,
)
from capsa.shadow.report import QueryAgreement, ShadowReport, spearman

__all__ = [
    "DROP_GATE_REASONS",
    "GATE_REASONS",
    "Candidate",
    "CaptureState",
    "CorpusPassage",
    "GateObservation",
    "GateReason",
    "InvalidationCause",
    "PairedDecision",
    "QueryAgreement",
    "RandomBytes",
    "RecorderLifecycle",
    "RenderedBlock",
    "Route",
    "RouteCapture",
    "RouteFactory",
    "RouteRun",
    "RowSink",
    "ShadowCounts",
    "ShadowOutcome",
    "ShadowRecorder",
    "ShadowReport",
    "ShadowRun",
    "Side",
    "Slot",
    "capture_packed",
    "capture_retrieved",
    "capture_route",
    "compare_routes",
    "pair",
    "prompt_for",
    "spearman",
]
