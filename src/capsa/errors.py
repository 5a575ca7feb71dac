"""Every error capsa raises, in one tree.

```
Exception
└── CapsaError                 what the data or the environment did
    ├── IngestionRejected      a guard refused an attachment before any parser ran
    ├── ExtractionFailed       the parser lost: raised, crashed, timed out, ran out of memory
    ├── BudgetError            a packing request that no packet can satisfy
    ├── ScorerError            a scorer gave the wrong number of scores, or a NaN; a ValueError
    ├── ModelUnreadable        a scorer's model file cannot be read; a ValueError
    ├── CompactionRefused      earlier evidence exists but no ledger was carried
    ├── CaptureInvalid         a shadow capture saw something ambiguous and was discarded
    ├── UnguardedInput         a capsa step was handed text another reader parsed from files
    └── SandboxUnavailable     a strict pool could not get every isolation layer it requires
```

A developer's mistake (a negative budget, an unknown option) is a `ValueError`
raised when the object is built, not a `CapsaError`.

Errors carry their facts as keyword-only attributes and pickle cleanly, because
`IngestionRejected` and `ExtractionFailed` cross the extraction worker's pipe.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

__all__ = [
    "BudgetError",
    "CapsaError",
    "CaptureInvalid",
    "CompactionRefused",
    "ExtractionFailed",
    "FailureCause",
    "IngestionRejected",
    "ModelUnreadable",
    "RefusalCause",
    "RejectionReason",
    "SandboxUnavailable",
    "ScorerError",
    "Stage",
    "UnguardedInput",
]

Stage = Literal["label", "size", "sniff", "archive", "preflight", "parser", "text", "set"]
"""Where in the guard pipeline an attachment stopped.

`size` raw byte ceiling; `sniff` type detection; `archive` zip central directory;
`preflight` a format's own structural checks (XML constructs, pages, pixels,
frames, MIME nesting), run before any text is produced; `parser` the isolated
parser call; `text` the per-file text checks; `set` the set-wide ceiling.
"""

RejectionReason = Literal[
    "empty",
    "too_large",
    "type_mismatch",
    "unsupported_type",
    "archive_too_large",
    "archive_ratio",
    "too_many_members",
    "nested_too_deep",
    "overlapping_members",
    "duplicate_member",
    "unsafe_member_name",
    "encrypted",
    "unsupported_compression",
    "header_mismatch",
    "corrupt",
    "forbidden_xml",
    "too_many_pages",
    "image_too_large",
    "too_many_frames",
    "text_too_long",
    "set_ceiling",
    "no_text",
    "undecodable",
    "not_fetched",
    "fetch_failed",
    "provider_file",
    "symlink",
    "missing_extra",
]
"""Why a guard refused an attachment: a closed set a program can switch on.

`not_fetched` a content block names its file by URL or path and no fetcher was
given; `fetch_failed` the caller's fetcher raised; `provider_file` a block names
a provider's file id, whose bytes capsa cannot see; `symlink` a symbolic link
met where the link rule refuses it (a walk, by default); `missing_extra` the file's
parser is not installed on this machine (stage ``parser``: the ``ocr`` extra,
LibreOffice, pandoc), and the detail names what to install; a crash is never
reported this way.
"""

FailureCause = Literal["raised", "timeout", "memory_limit", "crashed", "incomplete", "protocol"]
"""How a parser lost.

`raised` it raised an exception; `timeout` it ran past the wall clock or CPU
limit; `memory_limit` it hit the address-space ceiling; `crashed` its process
died (a signal, `os._exit`, a file-size limit); `incomplete` it finished but said
its output was partial; `protocol` the worker answered with something that was
not a valid result.
"""


class CapsaError(Exception):
    """Root of every error capsa raises about data or environment."""


class IngestionRejected(CapsaError):
    """A guard refused the attachment before any parser saw its bytes.

    Raised by `capsa.guard.extract_attachment`; `extract_all` records the same
    facts as an `Omission` instead. The message names the file, the limit and
    the measured number, e.g. ``'q3.docx' refused at archive: declares
    1073741824 uncompressed bytes, over the 8388608-byte limit``.
    """

    def __init__(self, detail: str, *, label: str, stage: Stage, reason: RejectionReason) -> None:
        super().__init__(f"{label!r} refused at {stage}: {detail}")
        self.detail = detail
        self.label = label
        self.stage: Stage = stage
        self.reason: RejectionReason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.detail, {"label": self.label, "stage": self.stage,
                                                    "reason": self.reason}))


class ExtractionFailed(CapsaError):
    """The parser ran and lost: it raised, crashed, timed out or ran out of memory.

    Nothing a third-party parser raises leaves capsa untyped: it arrives here,
    with `cause` saying how it lost. The worker pool survives every cause; the
    next file is parsed by a fresh process.
    """

    def __init__(self, detail: str, *, label: str, cause: FailureCause) -> None:
        super().__init__(f"{label!r} failed in the parser ({cause}): {detail}")
        self.detail = detail
        self.label = label
        self.cause: FailureCause = cause
        self.stage: Stage = "parser"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.detail, {"label": self.label, "cause": self.cause}))


class BudgetError(CapsaError):
    """No packet can satisfy the request, e.g. the budget cannot hold even the containers."""


class ScorerError(CapsaError, ValueError):
    """A relevance scorer broke its contract: one finite number per text, in order.

    Raised wherever capsa calls a `capsa.budget.Scorer` (`pack`, `pack_for`,
    `compress_text`, and the adapters through them), before any score is used:
    a missing or extra score would otherwise rank the wrong sentence, or fail
    later as a bare `IndexError`. `scorer` names the scorer's class, `expected`
    and `got` the counts, and `detail` what was wrong, e.g. ``MyScorer.score
    returned 3 scores for 4 texts``. The fix is in the scorer. It is also a
    `ValueError`, which `EmbeddingScorer` raised for an ``embed`` returning
    the wrong number of vectors before this class existed, so ``except
    ValueError`` clauses written for that keep working.
    """

    def __init__(self, detail: str, *, scorer: str, expected: int, got: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.scorer = scorer
        self.expected = expected
        self.got = got

    def __reduce__(self) -> tuple[Any, ...]:
        return partial(type(self), scorer=self.scorer, expected=self.expected,
                       got=self.got), (self.detail,)


class ModelUnreadable(CapsaError, ValueError):
    """A scorer's model file is there but cannot be read as a model.

    Raised on first use (the file is only opened then), e.g. by `StaticScorer`
    given a truncated download or another format: `path` names the file and
    `detail` what failed. A missing file is refused earlier, when the scorer is
    built, as a `ValueError`. It is also a `ValueError`, which this raised
    before the class existed.
    """

    def __init__(self, detail: str, *, path: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return partial(type(self), path=self.path), (self.detail,)


class CompactionRefused(CapsaError):
    """Earlier evidence exists in the history but no ledger was carried to compact it.

    Compacting without the ledger would have to guess what was cited from message
    shapes; capsa refuses instead. Carry the `EvidenceLedger` beside the history.
    """


RefusalCause = Literal[
    "misuse",
    "duplicate_identity",
    "gate_mismatch",
    "bad_score",
    "query_mismatch",
    "empty_passage",
    "repeated_passage",
    "transformed_block",
    "hydration_mismatch",
    "partial_wire",
    "packing_mismatch",
    "other",
]
"""Why a shadow capture was refused: a closed set, safe to count and print.

`misuse` a capture used out of order or twice; `duplicate_identity` one
source id twice; `gate_mismatch` the gate report is missing or contradicts
the admitted or selected ids; `bad_score` a score outside [0, 1];
`query_mismatch` a block or a partner capture for another query;
`empty_passage` a selected passage renders as nothing; `repeated_passage` a
selected text occurs in the block more often than the passages that carry
it; `transformed_block` the block holds text that is neither a selected
passage nor scaffold; `hydration_mismatch` the declared sources are not the
passages found; `partial_wire` the wire holds part of the block only;
`packing_mismatch` a packer's report disagrees with what the route returned;
`other` anything a custom route raises without a cause.
"""


class CaptureInvalid(CapsaError):
    """A shadow capture observed something ambiguous and must not be paired.

    The request being served is unaffected; only the comparison row is lost,
    and the count of invalidated captures says so, by `cause`. The message
    never names a source, a passage or a query; the cause is a closed-set
    code that reports and command-line output can print.
    """

    def __init__(self, detail: str, *, cause: RefusalCause = "other") -> None:
        super().__init__(detail)
        self.detail = detail
        self.cause: RefusalCause = cause

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.detail, {"cause": self.cause}))


class SandboxUnavailable(CapsaError):
    """A pool asked for ``sandbox="strict"`` and this machine lacks a layer.

    `missing` names the layers (see `capsa.guard.sandbox.LAYERS`); ``capsa
    doctor`` prints what each one stops and what its absence leaves open.
    """

    def __init__(self, detail: str, *, missing: list[str]) -> None:
        super().__init__(detail)
        self.detail = detail
        self.missing = list(missing)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.detail, {"missing": self.missing}))


def _rebuild(cls: type[CapsaError], detail: str, kwargs: dict[str, Any]) -> CapsaError:
    return cls(detail, **kwargs)


class UnguardedInput(CapsaError):
    """A capsa ingestion step was given text that another reader parsed from files.

    Raised by `capsa.llama_index.CapsaTransform` for nodes that name a file
    (``file_path``) but were neither read by capsa nor left unparsed for it
    (`CapsaDirectoryReader(defer=True)`): the other reader's parser has already
    run on the untrusted bytes, in this process, without capsa's limits. The
    fix is in the loading code (`CapsaDirectoryReader`), which is why this is
    an error and not a silent drop. `sources` names the files.
    """

    def __init__(self, detail: str, *, sources: tuple[str, ...]) -> None:
        super().__init__(detail)
        self.detail, self.sources = detail, sources

    def __reduce__(self) -> tuple[Any, ...]:
        return partial(type(self), sources=self.sources), (self.detail,)
