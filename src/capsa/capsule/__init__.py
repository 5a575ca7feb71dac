"""Citation capsules: earlier evidence survives on the wire only as what answers cited.

In a multi-turn RAG conversation every question drags all earlier retrieval
results along. `compact` rewrites a copy of the history: once a question ends,
its evidence returns show the chunks its answer cited, whole, and a receipt
naming the rest, and that wire form never changes again, so a provider's prompt
cache keeps serving it. `recall` brings any receipted chunk back whole from the
stored history, which capsa never changes: nothing is lost. The
`EvidenceLedger`, carried by the host beside the history, records per question
what was retrieved and cited.

Examples:
    >>> from capsa.capsule import EvidenceLedger, Evidence, build_capsule
    >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="travel")
    >>> ledger = (EvidenceLedger().begin_question(0)
    ...           .record_retrieval([chunk], tool="search").record_citations(["c1"])
    ...           .end_question(4))
    >>> build_capsule(ledger).chunk_ids
    ('c1',)
"""

from capsa.capsule.budgeted import (
    RECALL_HINT,
    TOOL_FLOOR_CHUNKS,
    budget_floor,
    check_tool_budget,
    render_budgeted,
)
from capsa.capsule.capsule import (
    CAPSULE_FOOTER,
    CAPSULE_HEADER,
    Capsule,
    RetainedPicture,
    TokenCounter,
    Tokenizer,
    as_tokenizer,
    build_capsule,
    estimate_tokens,
)
from capsa.capsule.citations import (
    CiteResult,
    Repair,
    cite_ids,
    parse_citations,
    resolve_citations,
)
from capsa.capsule.compaction import (
    Compaction,
    DroppedPicture,
    PictureFetcher,
    compact,
    compact_with_report,
    group_sizes,
    groups_to_drop,
    pictures_needed,
    stable_end,
    view_cut,
    view_notice,
)
from capsa.capsule.ledger import (
    CARRIED_RECALLABLE,
    EvidenceLedger,
    LedgerEntry,
    prune_carried,
    record_messages,
)
from capsa.capsule.messages import (
    CitationRef,
    Evidence,
    ImagePart,
    Message,
    OtherPart,
    Part,
    Role,
    TextPart,
    ToolCall,
)
from capsa.capsule.recall import RecallResult, recall, recallable
from capsa.capsule.render import NO_RESULTS, parse_evidence, render_evidence

__all__ = [
    "CAPSULE_FOOTER",
    "CAPSULE_HEADER",
    "CARRIED_RECALLABLE",
    "NO_RESULTS",
    "RECALL_HINT",
    "TOOL_FLOOR_CHUNKS",
    "Capsule",
    "CitationRef",
    "CiteResult",
    "Compaction",
    "DroppedPicture",
    "Evidence",
    "EvidenceLedger",
    "ImagePart",
    "LedgerEntry",
    "Message",
    "OtherPart",
    "Part",
    "PictureFetcher",
    "RecallResult",
    "Repair",
    "RetainedPicture",
    "Role",
    "TextPart",
    "TokenCounter",
    "Tokenizer",
    "ToolCall",
    "as_tokenizer",
    "budget_floor",
    "build_capsule",
    "check_tool_budget",
    "cite_ids",
    "compact",
    "compact_with_report",
    "estimate_tokens",
    "group_sizes",
    "groups_to_drop",
    "parse_citations",
    "parse_evidence",
    "pictures_needed",
    "prune_carried",
    "recall",
    "recallable",
    "record_messages",
    "render_budgeted",
    "render_evidence",
    "resolve_citations",
    "stable_end",
    "view_cut",
    "view_notice",
]
