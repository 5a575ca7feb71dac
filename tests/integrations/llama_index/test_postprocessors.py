"""CapsaNodePostprocessor alone, in a query engine and in a chat engine, with MockLLM."""

from __future__ import annotations

import hashlib
import logging
import pickle
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, Settings, SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import BaseMemory
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ValidationError

from capsa.budget import Budget, estimate_tokens
from capsa.demo.corpus_source import DOCUMENTS, QUESTIONS
from capsa.llama_index import CapsaNodePostprocessor, budget_for_llm
from capsa.llama_index.postprocessors import CapsaCompressionEvent

HOTEL = ("Flights are booked in economy class. The nightly hotel cap is EUR 165. "
         "In high-cost cities the hotel cap is EUR 230. Taxis need a receipt.")
TRAINS = "Rail travel is booked in standard class. Tickets are bought 14 days ahead."


class HashEmbedding(BaseEmbedding):
    """Deterministic bag-of-words vectors: texts sharing words are similar."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 64] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"


class Events(BaseEventHandler):
    """Collects capsa's instrumentation events."""

    seen: list[BaseEvent] = []

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, CapsaCompressionEvent):
            self.seen.append(event)

    @classmethod
    def class_name(cls) -> str:
        return "Events"


class ListMemory(BaseMemory):
    """Chat memory in a list (the default `Memory` opens an SQLite engine per engine)."""

    messages: list[ChatMessage] = []

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ListMemory:
        return cls(messages=[])

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return list(self.messages)

    def get_all(self) -> list[ChatMessage]:
        return list(self.messages)

    def put(self, message: ChatMessage) -> None:
        self.messages = [*self.messages, message]

    def set(self, messages: list[ChatMessage]) -> None:
        self.messages = list(messages)

    def reset(self) -> None:
        self.messages = []

    @classmethod
    def class_name(cls) -> str:
        return "ListMemory"


@pytest.fixture
def events() -> Iterator[Events]:
    handler = Events(seen=[])
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    yield handler
    dispatcher.event_handlers.remove(handler)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [Document(text=d.text, metadata={"file_name": d.name}, id_=d.name)
                 for d in DOCUMENTS]
    return VectorStoreIndex.from_documents(documents, embed_model=HashEmbedding())


def nodes() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=TRAINS, id_="trains"), score=0.2),
            NodeWithScore(node=TextNode(text=HOTEL, id_="hotel", metadata={"page": 2}), score=0.1)]


def test_postprocessor_returns_new_nodes_and_leaves_the_originals_alone() -> None:
    originals = nodes()
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=25)).postprocess_nodes(
        originals, query_str="hotel cap in high-cost cities")
    assert [n.node.node_id for n in kept] == ["hotel"]
    assert kept[0].node.get_content() != HOTEL and "EUR 230" in kept[0].node.get_content()
    assert kept[0].score == 0.1 and kept[0].node.metadata["page"] == 2
    assert originals[1].node.get_content() == HOTEL
    assert "capsa_receipt" not in originals[1].node.metadata
    assert originals[1].node.excluded_llm_metadata_keys == []


def test_postprocessor_hides_its_receipt_from_the_llm_and_the_embedder() -> None:
    [kept, *_] = CapsaNodePostprocessor(budget=Budget(max_tokens=500)).postprocess_nodes(
        nodes(), query_str="hotel")
    assert kept.node.metadata["capsa_receipt"]["whole"]
    assert "capsa_receipt" not in kept.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "capsa_receipt" not in kept.node.get_content(metadata_mode=MetadataMode.EMBED)


def test_postprocessor_emits_an_instrumentation_event_with_the_report(events: Events) -> None:
    CapsaNodePostprocessor(budget=Budget(max_tokens=25, strict_floor=True)).postprocess_nodes(
        nodes(), query_str="hotel cap in high-cost cities")
    [event] = events.seen
    assert event.kept == ["hotel"] and event.max_tokens == 25 and event.emptied_by is None
    assert event.dropped == [{"id": "trains", "reason": "irrelevant",
                              "detail": "no relevant evidence: nothing in it scores above "
                                        "min_relevance 0.0 for the query"}]


def test_a_mistyped_query_word_is_read_as_the_nodes_word_and_the_event_says_so(
        events: Events) -> None:
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=25, strict_floor=True)) \
        .postprocess_nodes(nodes(), query_str="hotell cap in London")
    assert [n.node.node_id for n in kept] == ["hotel"]
    [event] = events.seen
    assert event.respelt == [["hotell", "hotel"]] and event.query == "hotell cap in London"


@pytest.mark.parametrize("ids", [["a", "a#2", "a"], ["x", "x", "x#1"], ["a", "2", "a"]])
def test_repeated_node_ids_are_named_once_and_never_take_a_real_id(
        events: Events, ids: list[str]) -> None:
    """Two chunks of one document share its id; a made-up name never takes another node's."""
    texts = ["The nightly hotel cap is EUR 165.", "Trains are booked in standard class.",
             "The nightly hotel cap is EUR 165 in London too."]
    given = [NodeWithScore(node=TextNode(id_=i, text=t), score=0.9 - n / 10)
             for n, (i, t) in enumerate(zip(ids, texts, strict=True))]
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=400)).postprocess_nodes(
        given, query_str="hotel cap")
    [event] = events.seen
    named = event.kept + [d["id"] for d in event.dropped]
    assert len(set(named)) == 3 and len(kept) == len(event.kept)
    real = {i for i in ids if ids.count(i) == 1}
    assert real <= set(named)
    for name, node in zip(event.kept, kept, strict=True):  # and names that node, not another
        assert name not in real or node.node.node_id == name


async def test_postprocessor_async_path_matches_the_sync_one(events: Events) -> None:
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=45))
    sync = post.postprocess_nodes(nodes(), query_str="hotel cap")
    result = await post.apostprocess_nodes(nodes(), query_bundle=QueryBundle("hotel cap"))
    assert [(n.node.node_id, n.node.get_content()) for n in result] == [
        (n.node.node_id, n.node.get_content()) for n in sync]
    assert len(events.seen) == 2


def test_postprocessor_needs_the_query() -> None:
    with pytest.raises(ValueError, match="needs the query"):
        CapsaNodePostprocessor(budget=Budget(max_tokens=45)).postprocess_nodes(nodes())


def test_postprocessor_serialises_under_its_class_name() -> None:
    data = CapsaNodePostprocessor(budget=Budget(max_tokens=45)).to_dict()
    assert data["class_name"] == "CapsaNodePostprocessor" and data["budget"]["max_tokens"] == 45


@pytest.mark.parametrize("sample", QUESTIONS, ids=lambda q: q.question[:40])
def test_query_engine_sends_mockllm_exactly_the_packed_nodes(index: VectorStoreIndex,
                                                            sample: Any) -> None:
    engine = index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=250))],
        llm=MockLLM(), similarity_top_k=4)
    response = engine.query(sample.question)
    if not response.source_nodes:  # the retriever found nothing relevant: nothing is sent
        assert response.response == "Empty Response"
        return
    context = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM)
                          for n in response.source_nodes)
    template = engine.get_prompts()["response_synthesizer:text_qa_template"]
    assert response.response == template.format(context_str=context, query_str=sample.question)
    assert "capsa_receipt" not in response.response
    assert estimate_tokens(context) <= 250
    assert all(n.node.metadata["capsa_receipt"]["dropped"] is None for n in response.source_nodes)


def test_query_engine_keeps_the_answer_on_the_sample_corpus(index: VectorStoreIndex) -> None:
    engine = index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=250))],
        llm=MockLLM(), similarity_top_k=4)
    found = [sample.answer in str(engine.query(sample.question).response) for sample in QUESTIONS]
    assert sum(found) >= len(QUESTIONS) - 2


def test_chat_engine_packs_the_context_it_sends(index: VectorStoreIndex) -> None:
    engine = ContextChatEngine.from_defaults(
        retriever=index.as_retriever(similarity_top_k=4), llm=MockLLM(),
        memory=ListMemory.from_defaults(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=200))])
    response = engine.chat("What is the nightly hotel cap in high-cost cities?")
    assert response.source_nodes
    assert all("capsa_receipt" in n.node.metadata for n in response.source_nodes)
    assert "EUR 230" in response.response


CONTEXT = re.compile(r"-{5,}\n(.*)\n-{5,}", re.DOTALL)


def catalogue(path: str) -> dict[str, Any]:
    """Metadata as a document catalogue adds it: the reader's file facts plus a record's fields."""
    stem = Path(path).stem
    return {**default_file_metadata_func(path), "title": stem.replace("-", " ").title(),
            "department": "Finance and Procurement", "owner": "policy-office@example.com",
            "classification": "internal", "effective_date": "2024-01-01"}


@pytest.fixture
def reader_index(tmp_path: Path) -> VectorStoreIndex:
    """The usual pipeline: SimpleDirectoryReader's metadata, a splitter's UUID node ids."""
    for doc in DOCUMENTS:
        (tmp_path / doc.name).write_text(doc.text, encoding="utf-8")
    documents = SimpleDirectoryReader(str(tmp_path), file_metadata=catalogue).load_data()
    nodes = SentenceSplitter(chunk_size=120, chunk_overlap=0).get_nodes_from_documents(documents)
    assert all(len(node.node_id) == 36 for node in nodes)  # uuid4
    return VectorStoreIndex(nodes, embed_model=HashEmbedding())


def sent_context(response: Any) -> str:
    """The node texts MockLLM received (it echoes its prompt), between the template's rules."""
    match = CONTEXT.search(str(response.response))
    assert match is not None
    return match.group(1)


@pytest.mark.parametrize("max_tokens", [60, 120, 250])
def test_query_engine_prompt_holds_the_budget_with_reader_metadata_and_uuid_ids(
        reader_index: VectorStoreIndex, max_tokens: int) -> None:
    # No relevance floor: the point is that the whole budget can reach the LLM, which the
    # floor would rightly leave unused when the retrieved nodes hold nothing more relevant.
    budget = Budget(max_tokens=max_tokens, min_relevance=None)
    engine = reader_index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=budget)],
        llm=MockLLM(), similarity_top_k=6)
    context = sent_context(engine.query("What is the nightly hotel cap in high-cost cities?"))
    assert estimate_tokens(context) <= max_tokens
    assert estimate_tokens(context) >= max_tokens * 0.6  # the budget reaches the LLM
    assert "capsa" not in context


def test_query_engine_prompt_holds_the_budget_counted_by_settings_tokenizer(
        reader_index: VectorStoreIndex) -> None:
    count = Settings.tokenizer  # LlamaIndex's convention: str -> list of token ids
    engine = reader_index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=90),
                                                    tokenizer=count)],
        llm=MockLLM(), similarity_top_k=6)
    context = sent_context(engine.query("What is the nightly hotel cap in high-cost cities?"))
    assert 50 <= len(count(context)) <= 90


def test_query_engine_shows_file_names_never_server_paths(reader_index: VectorStoreIndex,
                                                          tmp_path: Path) -> None:
    engine = reader_index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=250))],
        llm=MockLLM(), similarity_top_k=4)
    context = sent_context(engine.query("What is the nightly hotel cap?"))
    assert str(tmp_path) not in context and "file_name: " in context


def test_postprocessor_warns_when_the_budget_holds_no_node(
        events: Events, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        kept = CapsaNodePostprocessor(budget=Budget(max_tokens=3)).postprocess_nodes(
            nodes(), query_str="hotel cap")
    assert kept == []
    assert "3-token budget holds none of the 2 nodes" in caplog.text
    [event] = events.seen
    assert {d["id"]: d["reason"] for d in event.dropped} == {"hotel": "budget",
                                                            "trains": "budget"}
    assert event.emptied_by == "budget"


def test_postprocessor_refuses_unknown_constructor_arguments() -> None:
    with pytest.raises(ValidationError, match="top_k"):
        CapsaNodePostprocessor(budget=Budget(max_tokens=45), top_k=3)


def test_postprocessor_refuses_to_serialise_away_its_tokenizer() -> None:
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=45), tokenizer=Settings.tokenizer)
    with pytest.raises(TypeError, match="will not drop it"):
        post.to_dict()


def test_postprocessor_round_trips_through_to_dict_with_the_tokenizer_passed_back() -> None:
    data = CapsaNodePostprocessor(budget=Budget(max_tokens=45), hide_paths=False).to_dict()
    again = CapsaNodePostprocessor.from_dict(data, tokenizer=Settings.tokenizer)
    assert again.budget == Budget(max_tokens=45) and again.hide_paths is False
    assert again.tokenizer is Settings.tokenizer


def test_postprocessor_pickles_with_its_tokenizer_or_refuses() -> None:
    kept = pickle.loads(pickle.dumps(
        CapsaNodePostprocessor(budget=Budget(max_tokens=45), tokenizer=estimate_tokens)))
    assert kept.tokenizer is estimate_tokens
    with pytest.raises(TypeError, match="cannot be pickled with its tokenizer"):
        pickle.dumps(CapsaNodePostprocessor(budget=Budget(max_tokens=45),
                                            tokenizer=lambda text: len(text)))


def test_postprocessor_refuses_a_tokenizer_that_cannot_count() -> None:
    with pytest.raises(TypeError, match="cannot count tokens"):
        CapsaNodePostprocessor(budget=Budget(max_tokens=45), tokenizer=object())


def test_budget_for_llm_fits_the_query_engines_whole_prompt_in_the_window(
        index: VectorStoreIndex) -> None:
    system = "You are the travel desk. Answer from the policy excerpts only. " * 100
    llm = MockLLM(system_prompt=system)  # echoes its prompt; a 3,900-token window
    count = Settings.tokenizer  # the count LlamaIndex's PromptHelper fits prompts by
    mode = "simple_summarize"  # one LLM call (compact may re-split and refine)
    engine = index.as_query_engine(llm=llm, similarity_top_k=6, response_mode=mode)
    template = engine.get_prompts()["response_synthesizer:text_qa_template"]
    budget = budget_for_llm(llm, prompt_template=template.get_template(llm=llm),
                            output_tokens=256, margin_tokens=30, tokenizer=count)
    assert budget.max_tokens < 2400  # less than the six documents retrieved (about 2,530)
    post = CapsaNodePostprocessor(budget=budget, tokenizer=count)
    engine = index.as_query_engine(llm=llm, similarity_top_k=6, response_mode=mode,
                                   node_postprocessors=[post])
    response = engine.query("What is the nightly hotel cap in high-cost cities?")
    prompt = str(response.response)
    assert "EUR 230" in prompt
    assert len(count(prompt)) <= llm.metadata.context_window - 256  # system prompt included


async def test_async_postprocessing_leaves_the_event_loop_free(loop_watch: Any) -> None:
    large = [NodeWithScore(node=TextNode(text=text, id_=f"n{n}"), score=1.0)
             for n, text in enumerate(loop_watch.large_texts())]
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=2000), tokenizer=loop_watch.tokenizer)
    loop_watch.enter("tenant-c")
    kept = await loop_watch.run(post.apostprocess_nodes(
        large, query_bundle=QueryBundle("local variable unbound")))
    assert kept and loop_watch.ticks_while_packing > 0
    assert threading.get_ident() not in loop_watch.threads
    assert loop_watch.tenants == {"tenant-c"}


LODGING = "How much can I spend on lodging per night?"
"""A paraphrase of the hotel cap: no term in common with the node that answers it."""
POLICY = (HOTEL + " Travellers choose hotels from the preferred list. Receipts are kept for "
          "seven years. Claims are filed within thirty days of the trip.")


class FixedRetriever(BaseRetriever):
    """A vector store's answer to a paraphrase: the right node first, scored 0.92."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=POLICY, id_="policy"), score=0.92),
                NodeWithScore(node=TextNode(text=TRAINS, id_="trains"), score=0.41)]


def test_postprocessor_keeps_the_top_node_of_a_paraphrased_question() -> None:
    # issue 21: every node was dropped as irrelevant at 40 tokens
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=40)).postprocess_nodes(
        FixedRetriever().retrieve(LODGING), query_str=LODGING)
    assert [n.node.node_id for n in kept] == ["policy"]
    assert estimate_tokens("\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM)
                                        for n in kept)) <= 40


def test_chat_engine_calls_the_llm_with_context_on_every_paraphrased_turn() -> None:
    # issue 21: ContextChatEngine answered "Empty Response" on every turn
    engine = ContextChatEngine.from_defaults(
        retriever=FixedRetriever(), llm=MockLLM(), memory=ListMemory.from_defaults(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=40))])
    for question in (LODGING, "And where the lodging is expensive?",
                     "What may I spend a night at most?"):
        response = engine.chat(question)
        assert response.response != "Empty Response" and response.source_nodes
        assert "Flights are booked in economy class." in response.response


def test_postprocessor_compresses_the_best_node_when_no_node_fits_whole() -> None:
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=12)).postprocess_nodes(
        FixedRetriever().retrieve(LODGING), query_str=LODGING)
    [node] = kept
    receipt = node.node.metadata["capsa_receipt"]
    assert node.node.node_id == "policy" and not receipt["whole"]
    assert node.node.get_content() == "Flights are booked in economy class. …"


def test_postprocessor_cuts_the_best_node_when_not_even_a_sentence_fits() -> None:
    clause = ("Lodging is refunded up to the nightly cap of the city the traveller stays in, "
              "as set in the annex, for every night of a trip approved in advance, ") * 2
    retrieved = [NodeWithScore(node=TextNode(text=clause + "and no more.", id_="long"),
                               score=0.9)]
    [node] = CapsaNodePostprocessor(budget=Budget(max_tokens=20)).postprocess_nodes(
        retrieved, query_str="What does a stay cost?")
    assert node.node.metadata["capsa_receipt"]["truncated"]
    assert node.node.get_content().startswith("Lodging is refunded")
    assert re.search(r"<truncated shown=\"\d+\" total=\"\d+\"/>$", node.node.get_content())
    assert estimate_tokens(node.node.get_content(metadata_mode=MetadataMode.LLM)) <= 20


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
def test_postprocessor_sends_no_more_than_its_budget_for_any_tokenizer(
        tokenizer: Callable[[str], int], max_tokens: int) -> None:
    retrieved = [NodeWithScore(node=TextNode(text=POLICY, id_="policy",
                                             metadata={"file_name": "travel.pdf"}), score=0.5),
                 *nodes()]
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=max_tokens),
                                  tokenizer=tokenizer).postprocess_nodes(
        retrieved, query_str="hotel cap")
    sent = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in kept)
    assert tokenizer(sent) <= max_tokens


def test_a_files_extracted_title_is_read_beside_its_file_name() -> None:
    # SimpleDirectoryReader names the file; TitleExtractor adds document_title.
    question = "Where was the 1956 film Tosca made?"
    milan = TextNode(id_="milan", text="It was made in Milan. The cast sang in Italian.",
                     metadata={"file_name": "scan-0041.pdf", "document_title": "Opera houses"})
    rome = TextNode(id_="rome",
                    text="It was made at the Cinecittà studios in Rome. The cast sang in Italian.",
                    metadata={"file_name": "scan-0042.pdf", "document_title": "Tosca (1956 film)"})
    postprocessor = CapsaNodePostprocessor(budget=Budget(max_tokens=40))  # frames show titles
    kept = postprocessor.postprocess_nodes([NodeWithScore(node=milan, score=0.5),
                                            NodeWithScore(node=rome, score=0.5)],
                                           query_str=question)

    assert [item.node.metadata["file_name"] for item in kept] == ["scan-0042.pdf"]
    assert kept[0].node.metadata["capsa_receipt"]["source"] == "scan-0042.pdf"


def test_a_node_named_only_by_its_title_is_scored_under_it() -> None:
    # Nodes built in code, as many apps do: no file, a title in the metadata.
    question = "Where was the 1956 film Tosca made?"
    milan = TextNode(text="It was made in Milan. The cast sang in Italian.",
                     metadata={"title": "Madama Butterfly"})
    rome = TextNode(text="It was made at the Cinecittà studios in Rome. The cast sang in Italian.",
                    metadata={"document_title": "Tosca (1956 film)"})
    postprocessor = CapsaNodePostprocessor(budget=Budget(max_tokens=30))
    kept = postprocessor.postprocess_nodes([NodeWithScore(node=milan, score=0.5),
                                            NodeWithScore(node=rome, score=0.5)],
                                           query_str=question)

    assert [item.node.metadata.get("document_title") for item in kept] == ["Tosca (1956 film)"]
    assert kept[0].node.metadata["capsa_receipt"]["source"] == "Tosca (1956 film)"
    assert "Rome" in kept[0].node.get_content(metadata_mode=MetadataMode.NONE)
