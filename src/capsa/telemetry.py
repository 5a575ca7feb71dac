"""OpenTelemetry spans and counters for what capsa decides; nothing at all without it.

capsa's decisions live on its own objects (`omitted`, `receipts`, `dropped`,
`PairedDecision`); this module also shows them to the tracing a team already
runs. With ``opentelemetry-api`` installed (``pip install 'capsa[otel]'``),
the core opens a span for each file extracted (``capsa.extract``) and each
set (``capsa.extract_all``), each packing (``capsa.pack``), each compaction
(``capsa.compact``) and recall (``capsa.recall``), and each shadow pairing
(``capsa.shadow.pair``), and counts omissions, drops and invalidated
comparisons by reason. Spans come from the global tracer and are opened as
the current span, so they nest under whatever span is active: a LangChain
run or a LlamaIndex query traced through OpenTelemetry (LangSmith, Langfuse,
Arize Phoenix), or a span of the application's own. Without an SDK
configured the API's no-op tracer makes every call free; without the API
package every call returns at once.

Spans carry counts, sizes, kinds, stages and reasons. They never carry
document text, queries, passage or chunk ids, or file names: a file's label
is added (``capsa.file.label``) only after ``configure(record_labels=True)``.
Shadow pairing spans carry only figures computed from the released rows.

The attributes of each span and counter are listed in ``docs/telemetry.md``;
every name starts with ``capsa.``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from capsa.errors import ExtractionFailed, IngestionRejected

if TYPE_CHECKING:
    from capsa.budget.packet import Packet
    from capsa.capsule.compaction import Compaction
    from capsa.guard.extract import Extracted
    from capsa.shadow.pairing import PairedDecision

try:
    from opentelemetry import context as _context
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # the otel extra is not installed: every call below returns at once
    _context = None  # type: ignore[assignment]
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

__all__ = ["configure", "enabled"]

_SCOPE = "capsa"
_settings: dict[str, Any] = {"record_labels": False, "tracer_provider": None,
                             "meter_provider": None}
_counters: dict[str, Any] = {}
_COUNTERS = {
    "capsa.extraction.omissions": "Files (and files inside files) not extracted, by stage, reason",
    "capsa.pack.drops": "Passages a packet dropped, by reason",
    "capsa.recall.calls": "Calls of the recall tool that reached capsa",
    "capsa.shadow.invalidated": "Shadow comparisons that produced no rows, by cause",
}

Attributes = Mapping[str, str | int | float | bool]


def enabled() -> bool:
    """Whether ``opentelemetry-api`` is importable, so capsa emits spans and counters."""
    return _trace is not None


def configure(
    *,
    record_labels: bool = False,
    tracer_provider: Any | None = None,
    meter_provider: Any | None = None,
) -> None:
    """Choose what capsa's spans may carry, and where they go.

    Each call sets every option; ``configure()`` restores the defaults.

    Args:
        record_labels: Add each file's cleaned label (``capsa.file.label``)
            to its extraction span. Off by default: file names are often
            personal data, and traces travel further than logs.
        tracer_provider: An OpenTelemetry ``TracerProvider`` for capsa's
            spans; None uses the global one. Nesting follows the current
            context either way.
        meter_provider: An OpenTelemetry ``MeterProvider`` for capsa's
            counters; None uses the global one.
    """
    _settings.update(record_labels=record_labels, tracer_provider=tracer_provider,
                     meter_provider=meter_provider)
    _counters.clear()


@contextmanager
def _span(name: str, attributes: Attributes | None = None, *,
          root: bool = False) -> Iterator[Any]:
    """A span under the current one (a trace of its own with `root`), or None without the API.

    Exceptions are neither recorded nor turned into an error status here:
    their messages can name a file, so each caller records its own outcome.
    """
    provider = _settings["tracer_provider"]
    if _trace is None or (provider is None and isinstance(
            _trace.get_tracer_provider(), (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider))):
        # no SDK is set: the API's tracer would hand back a span that records nothing, at a
        # few microseconds a packing; checked on each call, so an SDK set later is used
        yield None
        return
    tracer = _trace.get_tracer(_SCOPE, tracer_provider=provider)
    parent = _context.Context() if root and _context is not None else None
    with tracer.start_as_current_span(name, context=parent, attributes=dict(attributes or {}),
                                      record_exception=False,
                                      set_status_on_exception=False) as span:
        yield span


def _count(name: str, amount: int = 1, attributes: Attributes | None = None) -> None:
    if _metrics is None or amount <= 0:
        return
    counter = _counters.get(name)
    if counter is None:
        # The API's proxy meter hands over to the SDK's once one is set.
        meter = _metrics.get_meter(_SCOPE, meter_provider=_settings["meter_provider"])
        counter = meter.create_counter(name, description=_COUNTERS[name])
        _counters[name] = counter
    counter.add(amount, attributes=dict(attributes or {}))


def _omitted(stage: str, reason: str) -> None:
    _count("capsa.extraction.omissions", 1, {"capsa.stage": stage, "capsa.reason": reason})


# --- guard --------------------------------------------------------------------------


@contextmanager
def extraction(label: str, size_bytes: int) -> Iterator[Callable[[Extracted], None]]:
    """Span one file's extraction; call the yielded function with the result.

    A refusal raised inside (`IngestionRejected`, `ExtractionFailed`) is
    recorded as the span's outcome and counted, then propagates unchanged.
    """
    attributes: dict[str, str | int | float | bool] = {"capsa.file.bytes": size_bytes}
    if _settings["record_labels"]:
        attributes["capsa.file.label"] = label
    with _span("capsa.extract", attributes) as span:

        def done(result: Extracted) -> None:
            from capsa.guard.extract import Omission

            embedded = result.flattened()[1:]
            lost = [o for o in embedded if isinstance(o, Omission)]
            for omission in lost:
                _omitted(omission.stage, omission.reason)
            if span is not None:
                span.set_attributes({
                    "capsa.file.outcome": "extracted", "capsa.file.kind": result.kind,
                    "capsa.file.chars": len(result.text), "capsa.file.embedded": len(embedded),
                    "capsa.file.embedded_omitted": len(lost),
                })

        try:
            yield done
        except IngestionRejected as error:
            _refused(span, error.stage, error.reason)
            raise
        except ExtractionFailed as error:
            _refused(span, "parser", error.cause)
            raise
        except Exception as error:
            if span is not None:
                span.set_attributes({"capsa.file.outcome": "error",
                                     "capsa.file.reason": type(error).__name__})
            raise


def _refused(span: Any, stage: str, reason: str) -> None:
    _omitted(stage, reason)
    if span is not None:
        span.set_attributes({"capsa.file.outcome": "omitted", "capsa.file.stage": stage,
                             "capsa.file.reason": reason})


@contextmanager
def extraction_set(files: int) -> Iterator[Callable[[int, int], None]]:
    """Span a set's extraction; call the yielded function with (extracted, omitted)."""
    with _span("capsa.extract_all", {"capsa.files": files}) as span:

        def done(extracted: int, omitted: int) -> None:
            if span is not None:
                span.set_attributes({"capsa.files.extracted": extracted,
                                     "capsa.files.omitted": omitted})

        yield done


def set_ceiling_omission() -> None:
    """Count a file the set-wide ceiling left out (it has no span of its own)."""
    _omitted("set", "set_ceiling")


# --- budget -------------------------------------------------------------------------


@contextmanager
def packing(max_tokens: int, max_items: int | None) -> Iterator[Callable[[Packet], None]]:
    """Span one packing; call the yielded function with the packet."""
    attributes: dict[str, str | int | float | bool] = {"capsa.budget.max_tokens": max_tokens}
    if max_items is not None:
        attributes["capsa.budget.max_items"] = max_items
    with _span("capsa.pack", attributes) as span:

        def done(packet: Packet) -> None:
            dropped = Counter(str(r.dropped) for r in packet.receipts if r.dropped)
            for reason, n in dropped.items():
                _count("capsa.pack.drops", n, {"capsa.reason": reason})
            if span is None:
                return
            kept = [r for r in packet.receipts if not r.dropped]
            span.set_attributes({
                "capsa.pack.passages": len(packet.receipts),
                "capsa.pack.used_tokens": packet.used_tokens,
                "capsa.pack.full_tokens": sum(r.tokens_full for r in packet.receipts),
                "capsa.pack.kept": len(kept),
                "capsa.pack.compressed": sum(1 for r in kept if r.tokens_kept < r.tokens_full),
                "capsa.pack.truncated": sum(1 for r in kept if r.truncated),
                "capsa.pack.dropped": sum(dropped.values()),
                **{f"capsa.pack.dropped.{reason}": n for reason, n in sorted(dropped.items())},
            })

        yield done


# --- capsule ------------------------------------------------------------------------


@contextmanager
def compaction(stored: Sequence[Any],
               count: Callable[[str], int]) -> Iterator[Callable[[Compaction], None]]:
    """Span one compaction; call the yielded function with its report.

    Token counts use the compaction's own counter over the messages' text,
    and are only taken when a span is recording.
    """
    with _span("capsa.compact", {"capsa.compact.messages": len(stored)}) as span:

        def done(report: Compaction) -> None:
            if span is None or not span.is_recording():
                return
            span.set_attributes({
                "capsa.compact.stored_tokens": sum(count(m.text) for m in stored),
                "capsa.compact.wire_tokens": sum(count(m.text) for m in report.messages),
                "capsa.compact.rewritten": report.rewritten,
                "capsa.compact.shown": len(report.shown),
                "capsa.compact.unshown": len(report.unshown),
            })

        yield done


@contextmanager
def recall(requested: int) -> Iterator[Callable[[int, int], None]]:
    """Span one recall; call the yielded function with (found, missing)."""
    _count("capsa.recall.calls")
    with _span("capsa.recall", {"capsa.recall.requested": requested}) as span:

        def done(found: int, missing: int) -> None:
            if span is not None:
                span.set_attributes({"capsa.recall.found": found,
                                     "capsa.recall.missing": missing})

        yield done


# --- shadow -------------------------------------------------------------------------


@contextmanager
def pairing() -> Iterator[Callable[[Sequence[PairedDecision]], None]]:
    """Span one `pair`, in a trace of its own; call the yielded function with the rows only.

    Not under the request's span: that trace holds the query (a retriever's or an
    HTTP server's span), and a pairing inside it would tie the released rows to it.
    """
    with _span("capsa.shadow.pair", root=True) as span:

        def done(rows: Sequence[PairedDecision]) -> None:
            if span is None:
                return
            span.set_attributes({
                "capsa.shadow.rows": len(rows),
                "capsa.shadow.baseline_selected": sum(r.baseline_selected for r in rows),
                "capsa.shadow.candidate_selected": sum(r.candidate_selected for r in rows),
                "capsa.shadow.both_selected": sum(r.baseline_selected and r.candidate_selected
                                                  for r in rows),
                "capsa.shadow.baseline_included": sum(r.baseline_included for r in rows),
                "capsa.shadow.candidate_included": sum(r.candidate_included for r in rows),
            })

        yield done


def shadow_invalidated(cause: str) -> None:
    """Count a comparison that produced no rows, by its closed-set cause."""
    _count("capsa.shadow.invalidated", 1, {"capsa.cause": cause})
