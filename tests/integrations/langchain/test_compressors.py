"""CapsaCompressor and format_packet, alone and inside LangChain's own machinery."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
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
    kept = CapsaCompressor(budget=Budget(max_tokens=35)).compress_documents(originals, QUERY)
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
    passages = [Passage(id=str(n), text=d.page_content, source=d.metadata["source"])
                for n, d in enumerate(documents(), start=1)]
    expected = pack(QUERY, passages, budget).render()
    assert format_packet.invoke(kept) == expected
    assert estimate_tokens(expected) <= 70


def test_format_packet_renders_a_tight_packet_in_the_compact_form_it_was_counted_in() -> None:
    budget = Budget(max_tokens=40)
    kept = CapsaCompressor(budget=budget).compress_documents(documents(), QUERY)
    passages = [Passage(id=str(n), text=d.page_content, source=d.metadata["source"])
                for n, d in enumerate(documents(), start=1)]
    packet = pack(QUERY, passages, budget)
    assert packet.compact and "</document>" not in packet.render()
    assert format_packet.invoke(kept) == packet.render()


def test_format_packet_keeps_the_truncation_marker_of_a_cut_document() -> None:
    giant = Document(page_content="the hotel cap " + "and more words " * 200, id="big")
    kept = CapsaCompressor(budget=Budget(max_tokens=60)).compress_documents([giant], "hotel cap")
    rendered = format_packet.invoke(kept)
    assert kept[0].metadata["capsa_receipt"]["truncated"]
    assert rendered.count("<truncated") == 1 and estimate_tokens(rendered) <= 60


def test_format_packet_renders_plain_documents_whole_and_escaped() -> None:
    rendered = format_packet.invoke([Document(page_content="Hi </document>", id="x")])
    assert rendered == ('<context source="retrieved">\n<document id="1">Hi &lt;/document>'
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
    assert sorted(ids) == ["1", "3", "x"]


def test_a_document_without_an_id_is_reported_under_the_handle_the_prompt_shows() -> None:
    recorder = Recorder()
    plain = [Document(page_content=HOTEL), Document(page_content=TRAINS),
             Document(page_content=MEALS)]
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=40)),
        base_retriever=RunnableLambda(lambda query: plain))

    kept = retriever.invoke(QUERY, config={"callbacks": [recorder]})
    [(_, report)] = recorder.events

    assert report["kept"] == [d.metadata["capsa_handle"] for d in kept]
    assert {d["id"] for d in report["dropped"]} == {"1", "2", "3"} - set(report["kept"])
    assert all(f"<document {d.metadata['capsa_handle']}" in format_packet.invoke(kept)
               for d in kept)


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


def pipeline_documents() -> list[Document]:
    """What loader, splitter and vector store hand a compressor: UUID ids, absolute paths."""
    return [Document(page_content=text, id=str(uuid.UUID(int=n + 1)),
                     metadata={"source": f"/srv/rag/acme/policies/{name}", "start_index": 0})
            for n, (text, name) in enumerate([(TRAINS, "travel.pdf"), (HOTEL, "travel.pdf"),
                                              (MEALS, "meals.md")])]


def test_format_packet_shows_short_handles_and_file_names_never_server_paths() -> None:
    kept = CapsaCompressor(budget=Budget(max_tokens=200)).compress_documents(
        pipeline_documents(), QUERY)
    rendered = format_packet.invoke(kept)
    assert "/srv/" not in rendered and "-0000-" not in rendered
    assert '<document id="2" source="travel.pdf">' in rendered


def test_compressor_receipts_name_real_ids_and_handles_map_back_to_them() -> None:
    originals = pipeline_documents()
    kept = CapsaCompressor(budget=Budget(max_tokens=200)).compress_documents(originals, QUERY)
    for document in kept:
        handle = int(document.metadata["capsa_handle"])
        assert document.metadata["capsa_receipt"]["passage_id"] == originals[handle - 1].id
        assert document.id == originals[handle - 1].id


def test_compressor_budget_is_measured_on_what_format_packet_sends() -> None:
    budget = Budget(max_tokens=60)
    kept = CapsaCompressor(budget=budget).compress_documents(pipeline_documents(), QUERY)
    assert "EUR 230" in format_packet.invoke(kept)
    assert estimate_tokens(format_packet.invoke(kept)) <= 60


def test_compressor_warns_when_the_budget_holds_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        kept = CapsaCompressor(budget=Budget(max_tokens=5)).compress_documents(documents(), QUERY)
    assert kept == []
    assert "5-token budget holds none of the 3 documents" in caplog.text


def test_compressor_accepts_an_encoder_returning_tokens() -> None:
    def encode(text: str) -> list[str]:
        return text.split()

    kept = CapsaCompressor(budget=Budget(max_tokens=40), tokenizer=encode).compress_documents(
        documents(), QUERY)
    assert len(format_packet.invoke(kept).split()) <= 40


def test_compressor_refuses_a_tokenizer_that_cannot_count_when_built() -> None:
    with pytest.raises(TypeError, match="cannot count tokens"):
        CapsaCompressor(budget=Budget(max_tokens=40), tokenizer=12)


def test_format_packet_marks_excerpts_exactly_as_the_packet_was_counted() -> None:
    budget = Budget(max_tokens=35, mark_excerpts=True)
    kept = CapsaCompressor(budget=budget).compress_documents(documents(), QUERY)
    passages = [Passage(id=str(n), text=d.page_content, source=d.metadata["source"])
                for n, d in enumerate(documents(), start=1)]
    expected = pack(QUERY, passages, budget).render()
    assert 'shown="' in expected and format_packet.invoke(kept) == expected


async def test_async_compression_leaves_the_event_loop_free(loop_watch: Any) -> None:
    texts = loop_watch.large_texts()
    docs = [Document(page_content=text, id=f"d{n}") for n, text in enumerate(texts)]
    compressor = CapsaCompressor(budget=Budget(max_tokens=2000), tokenizer=loop_watch.tokenizer)
    loop_watch.enter("tenant-a")
    kept = await loop_watch.run(compressor.acompress_documents(docs, "local variable unbound"))
    assert kept and loop_watch.ticks_while_packing > 0
    assert threading.get_ident() not in loop_watch.threads
    assert loop_watch.tenants == {"tenant-a"}


LODGING = "How much can I spend on lodging per night?"
"""A paraphrase of the hotel cap: no term in common with the passage that answers it."""


def scored_documents() -> list[Document]:
    """What a vector store returns for `LODGING`: the answer first, scored 0.92."""
    return [Document(page_content=HOTEL, id="hotel", metadata={"relevance_score": 0.92}),
            Document(page_content=TRAINS, id="trains", metadata={"relevance_score": 0.41})]


def test_compression_retriever_keeps_the_top_hit_of_a_paraphrased_question() -> None:
    # issue 21: the lexical floor dropped every document and the chain saw no context
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=40)),
        base_retriever=RunnableLambda(lambda query: scored_documents()),
    )
    kept = retriever.invoke(LODGING)
    assert [d.id for d in kept] == ["hotel"]
    assert estimate_tokens(format_packet.invoke(kept)) <= 40


def test_compression_chain_sends_context_to_the_model_for_a_paraphrased_question() -> None:
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=40)),
        base_retriever=RunnableLambda(lambda query: scored_documents()),
    )
    model = GenericFakeChatModel(messages=iter(["EUR 165."]))
    prompts: list[str] = []

    def prompt(question: str) -> str:
        prompts.append(f"Context:\n{format_packet.invoke(retriever.invoke(question))}\n\n"
                       f"Question: {question}")
        return prompts[-1]

    answer = (RunnableLambda(prompt) | model).invoke(LODGING)
    assert answer.content == "EUR 165."
    assert "Flights are booked in economy class." in prompts[0]


def test_compressor_with_a_strict_floor_may_return_nothing_and_says_why(
        caplog: pytest.LogCaptureFixture) -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=40, strict_floor=True))
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        kept = compressor.compress_documents(scored_documents(), LODGING)
    assert kept == [] and "strict relevance floor" in caplog.text


def super_additive(text: str) -> int:
    """Issue 21's counter: joined text costs more than its parts (see test_pack_hard_bound)."""
    return (len(text) // 15) ** 2 // 8 + len(text) // 15


def per_call_minimum(text: str) -> int:
    return max(3, len(text) // 4)


def non_monotone(text: str) -> int:
    return len(text) // 6 + sum(map(ord, text)) % 5


@pytest.mark.parametrize("tokenizer", [super_additive, per_call_minimum, non_monotone],
                         ids=lambda t: t.__name__)
@pytest.mark.parametrize("max_tokens", [3, 8, 20, 45, 90])
def test_compressor_sends_no_more_than_its_budget_for_any_tokenizer(
        tokenizer: Callable[[str], int], max_tokens: int) -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=max_tokens), tokenizer=tokenizer)
    kept = compressor.compress_documents(documents(), QUERY)
    assert tokenizer(format_packet.invoke(kept)) <= max_tokens


def test_a_wikipedia_url_source_is_read_as_its_passage_title() -> None:
    # As WikipediaRetriever returns them: the subject is named only by the URL.
    question = "Where was the 1956 film Tosca made?"
    milan = Document(page_content="It was made in Milan. The cast sang in Italian.",
                     metadata={"source": "https://en.wikipedia.org/wiki/Madama_Butterfly"})
    rome = Document(page_content="It was made at the Cinecittà studios in Rome. "
                                 "The cast sang in Italian.",
                    metadata={"source": "https://en.wikipedia.org/wiki/Tosca_(1956_film)"})
    kept = CapsaCompressor(budget=Budget(max_tokens=30)).compress_documents([milan, rome],
                                                                            question)

    assert [d.metadata["source"] for d in kept] == [rome.metadata["source"]]
    assert "Rome" in kept[0].page_content


def test_a_web_pages_title_is_read_beside_its_url() -> None:
    # As WebBaseLoader returns them: a URL that names nothing, and the page's <title>.
    question = "Where was the 1956 film Tosca made?"
    milan = Document(page_content="It was made in Milan. The cast sang in Italian.",
                     metadata={"source": "https://example.com/p/8411", "title": "Opera houses"})
    rome = Document(page_content="It was made at the Cinecittà studios in Rome. "
                                 "The cast sang in Italian.",
                    metadata={"source": "https://example.com/p/8412",
                              "title": "Tosca (1956 film)"})
    before = [dict(d.metadata) for d in (milan, rome)]
    kept = CapsaCompressor(budget=Budget(max_tokens=30)).compress_documents([milan, rome],
                                                                            question)

    assert [d.metadata["source"] for d in kept] == ["https://example.com/p/8412"]
    assert [dict(d.metadata) for d in (milan, rome)] == before


def test_a_document_with_a_title_and_no_source_is_scored_and_shown_under_its_title() -> None:
    question = "Where was the 1956 film Tosca made?"
    milan = Document(page_content="It was made in Milan. The cast sang in Italian.",
                     metadata={"title": "Madama Butterfly"})
    rome = Document(page_content="It was made at the Cinecittà studios in Rome. "
                                 "The cast sang in Italian.",
                    metadata={"title": "Tosca (1956 film)"})
    kept = CapsaCompressor(budget=Budget(max_tokens=30)).compress_documents([milan, rome],
                                                                            question)
    whole = CapsaCompressor(budget=Budget(max_tokens=400)).compress_documents([milan, rome],
                                                                             question)

    assert [d.metadata["title"] for d in kept] == ["Tosca (1956 film)"]
    assert 'source="Tosca (1956 film)"' in format_packet.invoke(whole)


@pytest.mark.parametrize("second", [30, 45, 60])
def test_documents_packed_twice_render_within_the_second_budget(second: int):
    """A two-stage pipeline re-packs packed documents: only the second packing's marks show."""
    filler = " ".join(f"Rule {i} says receipts are kept for audit {i}." for i in range(30))
    document = Document(id="a1", page_content=f"The nightly hotel cap is EUR 165. {filler}",
                        metadata={"source": "travel.pdf"})
    once = CapsaCompressor(budget=Budget(max_tokens=90, mark_excerpts=True)).compress_documents(
        [document], QUERY)
    twice = CapsaCompressor(
        budget=Budget(max_tokens=second, mark_excerpts=True)).compress_documents(once, QUERY)
    assert twice and estimate_tokens(format_packet.invoke(twice)) <= second
    assert document.metadata == {"source": "travel.pdf"}  # the caller's document is untouched


def test_repeated_handles_render_under_positions():
    """Documents merged from two packets each hold handle "1"; a citation must name one."""
    from langchain_classic.retrievers import EnsembleRetriever

    from capsa.langchain import BudgetedRetriever

    def retriever(text: str, id_: str) -> BudgetedRetriever:
        found = [Document(id=id_, page_content=text)]
        return BudgetedRetriever(retriever=RunnableLambda(lambda q: found),
                                 budget=Budget(max_tokens=100))

    ensemble = EnsembleRetriever(retrievers=[retriever(HOTEL, "hotel"), retriever(MEALS, "meals")])
    documents = ensemble.invoke(QUERY)
    assert [d.metadata["capsa_handle"] for d in documents] == ["1", "1"]
    shown = format_packet.invoke(documents)
    assert shown.count('<document id="1"') == 1 and shown.count('<document id="2"') == 1
    single = format_packet.invoke(documents[:1])
    assert '<document id="1"' in single  # a packet's own handles are kept when they are unique
