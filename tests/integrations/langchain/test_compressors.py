"""CapsaCompressor and format_packet, alone and inside LangChain's own machinery."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda

from capsa.budget import Budget, Passage, estimate_tokens, pack
from capsa.langchain import CapsaCompressor, format_packet

QUERY = "hotel cap in high-cost cities"
HOTEL = ("Flights are booked in economy class. The nightly hotel cap is EUR 165. "
         "In high-cost cities the hotel cap is EUR 230. Taxis need a receipt.")
TRAINS = "Rail travel is booked in standard class. Tickets are bought 14 days ahead."
MEALS = "Travellers receive a daily meal allowance of EUR 55. Alcohol is never reimbursed."


def documents() -> list[Document]:
    return [Document(page_content=TRAINS, id="trains", metadata={"source": "travel.pdf"}),
            Document(page_content=HOTEL, id="hotel", metadata={"source": "travel.pdf", "page": 2}),
            Document(page_content=MEALS, id="meals", metadata={"source": "meals.md"})]


class Recorder(BaseCallbackHandler):
    """Collects capsa's custom events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def test_compressor_returns_new_documents_and_leaves_the_originals_alone() -> None:
    originals = documents()
    kept = CapsaCompressor(budget=Budget(max_tokens=50)).compress_documents(originals, QUERY)
    assert kept[0].id == "hotel" and kept[0].page_content != HOTEL
    assert kept[0].metadata["page"] == 2 and "capsa_receipt" in kept[0].metadata
    assert originals[1].page_content == HOTEL and "capsa_receipt" not in originals[1].metadata


def test_compressor_stamps_every_kept_document_with_its_receipt() -> None:
    kept = CapsaCompressor(budget=Budget(max_tokens=1000)).compress_documents(documents(), QUERY)
    receipts = [d.metadata["capsa_receipt"] for d in kept]
    assert [r["passage_id"] for r in receipts] == ["hotel", "trains", "meals"]
    assert all(r["whole"] and r["dropped"] is None for r in receipts)


def test_format_packet_renders_exactly_the_packet_the_budget_was_counted_on() -> None:
    budget = Budget(max_tokens=70)
    kept = CapsaCompressor(budget=budget).compress_documents(documents(), QUERY)
    passages = [Passage(id=d.id or "", text=d.page_content, source=d.metadata["source"])
                for d in documents()]
    expected = pack(QUERY, passages, budget).render()
    assert format_packet.invoke(kept) == expected
    assert estimate_tokens(expected) <= 70


def test_format_packet_keeps_the_truncation_marker_of_a_cut_document() -> None:
    giant = Document(page_content="the hotel cap " + "and more words " * 200, id="big")
    kept = CapsaCompressor(budget=Budget(max_tokens=60)).compress_documents([giant], "hotel cap")
    rendered = format_packet.invoke(kept)
    assert kept[0].metadata["capsa_receipt"]["truncated"]
    assert rendered.count("<truncated ") == 1 and estimate_tokens(rendered) <= 60


def test_format_packet_renders_plain_documents_whole_and_escaped() -> None:
    rendered = format_packet.invoke([Document(page_content="Hi </document>", id="x")])
    assert rendered == ('<context source="retrieved">\n<document id="x">Hi &lt;/document>'
                        "</document>\n</context>")


def test_compressor_counts_with_the_chat_model_it_is_given() -> None:
    model = FakeListChatModel(responses=["ok"], custom_get_token_ids=lambda text: [0] * len(text))
    budget = Budget(max_tokens=300)
    kept = CapsaCompressor(budget=budget, model=model).compress_documents(documents(), QUERY)
    assert len(format_packet.invoke(kept)) <= 300  # one token per character, as the model counts
    estimated = CapsaCompressor(budget=budget).compress_documents(documents(), QUERY)
    assert all(d.metadata["capsa_receipt"]["whole"] for d in estimated)
    assert len(estimated) == 3 and [d.page_content for d in kept] != [
        d.page_content for d in estimated]


def test_compressor_gives_unique_ids_to_documents_without_them() -> None:
    plain = [Document(page_content=HOTEL), Document(page_content=TRAINS, id="x"),
             Document(page_content=MEALS, id="x")]
    kept = CapsaCompressor(budget=Budget(max_tokens=1000)).compress_documents(plain, QUERY)
    ids = [d.metadata["capsa_receipt"]["passage_id"] for d in kept]
    assert sorted(ids) == ["0", "2", "x"]


def test_compressor_runs_without_callbacks_or_a_parent_run() -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=60))
    assert compressor.compress_documents(documents(), QUERY, callbacks=[Recorder()])


def test_compressor_works_inside_contextual_compression_retriever() -> None:
    recorder = Recorder()
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=70)),
        base_retriever=RunnableLambda(lambda query: documents()),
    )
    kept = retriever.invoke(QUERY, config={"callbacks": [recorder]})
    assert kept[0].id == "hotel" and estimate_tokens(format_packet.invoke(kept)) <= 70
    [(name, report)] = recorder.events
    assert name == "capsa.compression_report"
    assert report["kept"] == [d.id for d in kept]
    accounted = {d["id"] for d in report["dropped"]} | set(report["kept"])
    assert accounted == {"hotel", "trains", "meals"}


async def test_compressor_reports_on_the_async_path_too() -> None:
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=70)),
        base_retriever=RunnableLambda(lambda query: documents()),
    )
    events = [event async for event in retriever.astream_events(QUERY, version="v2")
              if event["event"] == "on_custom_event"]
    assert [e["name"] for e in events] == ["capsa.compression_report"]
    assert events[0]["data"]["max_tokens"] == 70


async def test_compressor_acompress_matches_the_sync_result() -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=60))
    sync = compressor.compress_documents(documents(), QUERY)
    assert await compressor.acompress_documents(documents(), QUERY) == sync


def test_compressor_rejects_unknown_settings() -> None:
    with pytest.raises(ValueError, match="max_token"):
        CapsaCompressor(budget=Budget(max_tokens=10), max_token=5)  # type: ignore[call-arg]
