"""capsa: carry documents into an LLM's context safely and economically.

Four jobs, each a framework-neutral package with thin LangChain and LlamaIndex
adapters beside it:

- `capsa.guard`: untrusted attachment bytes become text only through bounded,
  isolated parsers; every omitted file carries a reason.
- `capsa.budget`: passages packed into a token budget in relevance order, with
  a receipt for each.
- `capsa.capsule`: earlier questions' evidence replaced on the wire by what the
  answers cited.
- `capsa.shadow`: two retrieval routes compared without leaking identities.

`import capsa` needs only pydantic; each adapter names the extra it needs.
"""

from capsa.errors import (
    BudgetError,
    CapsaError,
    CaptureInvalid,
    CompactionRefused,
    ExtractionFailed,
    IngestionRejected,
    ScorerError,
    UnguardedInput,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetError",
    "CapsaError",
    "CaptureInvalid",
    "CompactionRefused",
    "ExtractionFailed",
    "IngestionRejected",
    "ScorerError",
    "UnguardedInput",
    "__version__",
]
