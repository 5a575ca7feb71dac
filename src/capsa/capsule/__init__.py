"""Citation capsules: earlier evidence survives on the wire only as what answers cited.

In a multi-turn RAG conversation every question drags all earlier retrieval
results along. `compact` rewrites a copy of the history so that the newest
earlier evidence return carries one capsule of the chunks earlier answers cited
(whole, once, newest first) and every other earlier return becomes a short
receipt. The `EvidenceLedger`, carried by the host beside the history, records
per question what was retrieved and cited; without it, compaction refuses.

Examples:
    >>> from capsa.capsule import EvidenceLedger, Evidence, build_capsule
    >>> chunk = Evidence(chunk_id="c1", content="EUR 230 a night.", document_id="travel")
    >>> ledger = (EvidenceLedger().begin_question(0)
    ...           .record_retrieval([chunk], tool="search").record_citations(["c1"])
    ...           .end_question(4))
    >>> build_capsule(ledger).chunk_ids
    ('c1',)
"""

from capsa.capsule.capsule import (
    CAPSULE_HEADER,
    NO_RESULTS,
    RECEIPT,
    Capsule,
    RetainedPicture,
    Tokenizer,
    build_capsule,
    estimate_tokens,
    render_evidence,
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
)
from capsa.capsule.ledger import EvidenceLedger, LedgerEntry, record_messages
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

__all__ = [
    "CAPSULE_HEADER",
    "NO_RESULTS",
    "RECEIPT",
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
    "Repair",
    "RetainedPicture",
    "Role",
    "TextPart",
    "Tokenizer",
    "ToolCall",
    "build_capsule",
    "cite_ids",
    "compact",
    "compact_with_report",
    "estimate_tokens",
    "parse_citations",
    "record_messages",
    "render_evidence",
    "resolve_citations",
]
