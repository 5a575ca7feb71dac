"""capsa's OpenTelemetry spans and counters, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from capsa import telemetry
from capsa.budget import Budget, Passage, pack
from capsa.capsule import Evidence, EvidenceLedger, Message, TextPart, ToolCall, compact, recall
from capsa.guard import Attachment, extract_all
from capsa.guard.extractors import PlainTextExtractor
from capsa.shadow import (
    Candidate,
    GateObservation,
    RenderedBlock,
    RouteRun,
    capture_retrieved,
    compare_routes,
    pair,
)

pytest.importorskip("opentelemetry.sdk")

PASSAGES = [
    Passage(id="p-refund", text="Refunds are accepted within 30 days of delivery. "
            "Keep the receipt. Damaged items are refunded in full."),
    Passage(id="p-ship", text="Shipping takes five working days to the mainland."),
    Passage(id="p-gift", text="Gift cards never expire and can be used online."),
]


def _values(span: object) -> list[str]:
    return [str(v) for v in span.attributes.values()]  # type: ignore[attr-defined]


def test_pack_span_reports_budget_use_and_drops_by_reason(otel) -> None:
    before = otel.counts("capsa.pack.drops")
    packet = pack("refund window", PASSAGES, Budget(max_tokens=40, max_items=1))
    (span,) = otel.spans("capsa.pack")
    attrs = span.attributes
    assert attrs["capsa.budget.max_tokens"] == 40 and attrs["capsa.budget.max_items"] == 1
    assert attrs["capsa.pack.used_tokens"] == packet.used_tokens
    assert attrs["capsa.pack.passages"] == 3
    assert attrs["capsa.pack.kept"] + attrs["capsa.pack.dropped"] == 3
    reasons = {r.dropped for r in packet.receipts if r.dropped}
    assert {f"capsa.pack.dropped.{r}" for r in reasons} <= set(attrs)
    after = otel.counts("capsa.pack.drops")
    for reason in reasons:
        key = (("capsa.reason", reason),)
        assert after[key] - before.get(key, 0) == sum(
            1 for r in packet.receipts if r.dropped == reason)


def test_pack_span_carries_no_query_passage_text_or_id(otel) -> None:
    pack("refund window", PASSAGES, Budget(max_tokens=40))
    (span,) = otel.spans("capsa.pack")
    values = " ".join(_values(span))
    assert "refund" not in values.lower() and "p-" not in values


def test_extraction_spans_each_file_under_the_set_span(otel) -> None:
    before = otel.counts("capsa.extraction.omissions")
    result = extract_all([Attachment(label="secret-plan.txt", payload=b"hello world"),
                          Attachment(label="empty-notes.txt", payload=b"")],
                         PlainTextExtractor())
    (whole,) = otel.spans("capsa.extract_all")
    files = otel.spans("capsa.extract")
    assert [f.parent.span_id for f in files] == [whole.context.span_id] * 2
    assert whole.attributes["capsa.files.extracted"] == 1
    assert whole.attributes["capsa.files.omitted"] == 1
    good, bad = files
    assert (good.attributes["capsa.file.outcome"], good.attributes["capsa.file.kind"],
            good.attributes["capsa.file.bytes"], good.attributes["capsa.file.chars"]) == (
        "extracted", "text", 11, 11)
    (omission,) = result.omitted
    assert (bad.attributes["capsa.file.outcome"], bad.attributes["capsa.file.stage"],
            bad.attributes["capsa.file.reason"]) == ("omitted", omission.stage, omission.reason)
    key = (("capsa.reason", omission.reason), ("capsa.stage", omission.stage))
    assert otel.counts("capsa.extraction.omissions")[key] - before.get(key, 0) == 1


def test_extraction_spans_carry_no_file_name_or_content_by_default(otel) -> None:
    extract_all([Attachment(label="secret-plan.txt", payload=b"launch codes")],
                PlainTextExtractor())
    values = " ".join(v for s in otel.spans() for v in _values(s))
    assert "secret" not in values and "launch" not in values


def test_extraction_spans_carry_the_label_when_the_caller_opts_in(otel) -> None:
    telemetry.configure(record_labels=True)
    try:
        extract_all([Attachment(label="../plan.txt", payload=b"text")], PlainTextExtractor())
    finally:
        telemetry.configure(record_labels=False)
    (span,) = otel.spans("capsa.extract")
    assert span.attributes["capsa.file.label"] == "plan.txt"


def test_set_ceiling_omissions_are_counted(otel) -> None:
    from capsa.guard import ExtractionLimits

    before = otel.counts("capsa.extraction.omissions")
    limits = ExtractionLimits(max_total_chars=5)
    extract_all([Attachment(label="a.txt", payload=b"four"), Attachment(label="b.txt",
                                                                        payload=b"three")],
                PlainTextExtractor(), limits)
    key = (("capsa.reason", "set_ceiling"), ("capsa.stage", "set"))
    assert otel.counts("capsa.extraction.omissions")[key] - before.get(key, 0) == 1


def _conversation() -> tuple[list[Message], EvidenceLedger]:
    c1 = Evidence(chunk_id="c1", content="Hotels: EUR 230 a night in London.", document_id="d")
    c2 = Evidence(chunk_id="c2", content="Meals: EUR 40 a day, receipts required. " * 20,
                  document_id="d")
    call = ToolCall(id="t1", name="search", args={"query": "hotel cap"})
    history = [
        Message(role="user", parts=(TextPart(text="Hotel cap?"),)),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", tool_call_id="t1", parts=(TextPart(text=c1.content + " "
                                                                + c2.content),),
                evidence=(c1, c2)),
        Message(role="assistant", parts=(TextPart(text="EUR 230 [c1]."),)),
        Message(role="user", parts=(TextPart(text="And mileage?"),)),
    ]
    ledger = (EvidenceLedger().begin_question(0)
              .record_retrieval([c1, c2], tool="search").record_citations(["c1"])
              .end_question(4).begin_question(4))
    return history, ledger


def test_compaction_span_compares_wire_and_stored_tokens(otel) -> None:
    history, ledger = _conversation()
    compact(history, ledger, owned_tools={"search"})
    (span,) = otel.spans("capsa.compact")
    attrs = span.attributes
    assert attrs["capsa.compact.messages"] == 5 and attrs["capsa.compact.rewritten"] == 1
    assert 0 < attrs["capsa.compact.wire_tokens"] < attrs["capsa.compact.stored_tokens"]
    assert (attrs["capsa.compact.shown"], attrs["capsa.compact.unshown"]) == (1, 1)


def test_recall_calls_are_spanned_and_counted(otel) -> None:
    history, ledger = _conversation()
    before = otel.counts("capsa.recall.calls").get((), 0)
    recall(["c2", "c9"], history, ledger, owned_tools={"search"})
    (span,) = otel.spans("capsa.recall")
    assert (span.attributes["capsa.recall.requested"], span.attributes["capsa.recall.found"],
            span.attributes["capsa.recall.missing"]) == (2, 1, 1)
    assert otel.counts("capsa.recall.calls")[()] - before == 1


def test_pair_span_holds_only_figures_of_the_released_rows(otel) -> None:
    docs = [Candidate(source_id="doc-a", score=1.0, text="Refunds within 30 days."),
            Candidate(source_id="doc-b", score=0.5, text="Returns need a receipt.")]
    rows = pair(capture_retrieved("baseline", "refunds", docs),
                capture_retrieved("candidate", "refunds", docs[:1]))
    (span,) = otel.spans("capsa.shadow.pair")
    assert dict(span.attributes) == {
        "capsa.shadow.rows": len(rows), "capsa.shadow.baseline_selected": 2,
        "capsa.shadow.candidate_selected": 1, "capsa.shadow.both_selected": 1,
        "capsa.shadow.baseline_included": 2, "capsa.shadow.candidate_included": 1,
    }


def test_pair_span_is_a_trace_of_its_own_not_the_requests(otel) -> None:
    # The request's trace holds the query; rows paired inside it could be tied back to it.
    from opentelemetry import trace

    docs = [Candidate(source_id="doc-a", score=1.0, text="Refunds within 30 days.")]
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("request", attributes={"query": "refunds"}) as request:
        pair(capture_retrieved("baseline", "refunds", docs),
             capture_retrieved("candidate", "refunds", docs))
    (span,) = otel.spans("capsa.shadow.pair")
    assert span.parent is None
    assert span.context.trace_id != request.get_span_context().trace_id


def test_the_sink_sees_none_of_the_requests_context(otel) -> None:
    import contextvars

    from opentelemetry import trace

    from capsa.shadow import ShadowRecorder

    tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="")
    seen: list[tuple[str, int]] = []

    def sink(rows) -> None:  # what an instrumented HTTP client would stamp on its POST
        seen.append((tenant.get(), trace.get_current_span().get_span_context().trace_id))

    docs = [Candidate(source_id="doc-a", score=1.0, text="Refunds within 30 days.")]
    recorder = ShadowRecorder(sink=sink)
    with trace.get_tracer("app").start_as_current_span("request") as request:
        tenant.set("alice")
        recorder.compare("refunds", docs, docs)
    recorder.close()
    assert seen == [("", 0)]
    assert request.get_span_context().trace_id != 0


class _Undeclared:
    name = "undeclared"

    def run(self, query: str) -> RouteRun:
        text = "Refunds are accepted within 30 days of delivery."
        return RouteRun(candidates=(Candidate(source_id="a", score=1.0, text=text),),
                        admitted=("a",), selected=("a",),
                        gate=(GateObservation(source_id="a", reason="admitted"),),
                        block=RenderedBlock(query=query, text="Sources:\n" + text))


def test_invalidated_comparisons_are_counted_by_cause(otel) -> None:
    key = (("capsa.cause", "transformed_block"),)
    before = otel.counts("capsa.shadow.invalidated").get(key, 0)
    compare_routes(["a", "b"], _Undeclared(), _Undeclared())
    assert otel.counts("capsa.shadow.invalidated")[key] - before == 2


def test_a_live_refused_capture_is_counted_by_its_own_cause(otel) -> None:
    from capsa.shadow import ShadowRecorder

    key = (("capsa.cause", "duplicate_identity"),)
    before = otel.counts("capsa.shadow.invalidated").get(key, 0)
    twice = [Candidate(source_id="a", score=0.5, text="Refunds within 30 days.")] * 2
    recorder = ShadowRecorder(list().extend)
    assert recorder.compare("refunds", twice, twice[:1]) == "capture_refused"
    recorder.close()
    assert otel.counts("capsa.shadow.invalidated")[key] - before == 1


def test_capsa_spans_nest_under_the_callers_current_span(otel) -> None:
    from opentelemetry import trace

    with trace.get_tracer("app").start_as_current_span("app.request") as parent:
        pack("refund window", PASSAGES, Budget(max_tokens=40))
    (span,) = otel.spans("capsa.pack")
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id


_WITHOUT_OTEL = """
import sys
sys.modules["opentelemetry"] = None
import capsa
from capsa import telemetry
from capsa.budget import Budget, Passage, pack
from capsa.guard import Attachment, extract_all
from capsa.guard.extractors import PlainTextExtractor
from capsa.shadow import Candidate, capture_retrieved, pair
packet = pack("q", [Passage(id="a", text="Some words here.")], Budget(max_tokens=50))
result = extract_all([Attachment(label="a.txt", payload=b"hi")], PlainTextExtractor())
docs = [Candidate(source_id="a", score=1.0, text="Words.")]
rows = pair(capture_retrieved("baseline", "q", docs), capture_retrieved("candidate", "q", docs))
print(json.dumps([telemetry.enabled(), len(packet.receipts), len(result.extracted), len(rows)]))
""".replace("import sys", "import json, sys", 1)


def test_capsa_works_unchanged_without_opentelemetry(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_OTEL], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, 1, 1, 1]


def test_telemetry_module_imports_no_framework() -> None:
    import ast
    from pathlib import Path

    source = Path(telemetry.__file__).read_text("utf-8")
    imported = {node.module or "" for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.Import) for alias in node.names}
    assert not {m for m in imported if m.startswith(("langchain", "llama_index", "langgraph"))}


_SDK_SET_LATER = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from capsa import telemetry
from capsa.budget import Budget, Passage, pack

with telemetry._span("capsa.pack") as before:
    pass
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
pack("refunds", [Passage(id="a", text="Refunds are accepted.")], Budget(max_tokens=50))
print(json.dumps([before is None, [s.name for s in exporter.get_finished_spans()]]))
"""


def test_without_an_sdk_no_span_is_opened_and_an_sdk_set_later_gets_them() -> None:
    done = subprocess.run([sys.executable, "-c", _SDK_SET_LATER], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, ["capsa.pack"]]
