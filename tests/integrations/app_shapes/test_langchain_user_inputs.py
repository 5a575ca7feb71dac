"""LangChain app shapes the other app-shape tests do not cover: what users really pass in.

Rerankers that write NumPy scores (FlashRank, FAISS-backed retrievers) in a
`DocumentCompressorPipeline`, scores that are NaN or infinite, a reorder step
after capsa, metadata no JSON encoder takes (datetime, NumPy, bytes, paths),
``astream_events`` carrying capsa's report with the caller's tags, a per-call
``k`` out of range, and a shadow comparison scored by a reranker's NumPy score.
Each test asserts what a user would expect; a failing one is a bug.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import BaseCallbackHandler, Callbacks
from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from capsa.budget import Budget, Passage, estimate_tokens, pack
from capsa.langchain import BudgetedRetriever, CapsaCompressor, ShadowRetriever, format_packet
from capsa.shadow import PairedDecision

QUESTION = "What is the hotel cap in London?"
PREFIX = "Answer from the context only.\n"


def corpus() -> list[Document]:
    return [
        Document(id="hotel", page_content="The hotel cap in London is EUR 230.",
                 metadata={"source": "/srv/policies/travel.pdf"}),
        Document(id="rail", page_content="Trains are booked in standard class every day.",
                 metadata={"source": "/srv/policies/travel.pdf"}),
        Document(id="meals", page_content="Meals are paid up to EUR 55 a day.",
                 metadata={"source": "/srv/policies/meals.md"}),
    ]


class FlashRankLike(BaseDocumentCompressor):
    """Stands in for FlashRank/Cohere rerankers: writes ``relevance_score``, maybe reorders.

    FlashRank writes the model's NumPy ``float32`` score, as FAISS-backed
    retrievers do; `as_float` makes the same reranker write Python floats.
    With ``sort=False`` it keeps the order it was handed (a hybrid merge's,
    whose scores came from the dense half), so capsa must weigh the scores.
    """

    scores: dict[str, float]
    as_float: bool = False
    sort: bool = True

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        ranked = (sorted(documents, key=lambda d: -self.scores[str(d.id)]) if self.sort
                  else list(documents))
        out = []
        for document in ranked:
            score = self.scores[str(document.id)]
            value = float(score) if self.as_float else np.float32(score)
            out.append(Document(id=document.id, page_content=document.page_content,
                                metadata={**document.metadata, "relevance_score": value}))
        return out


class Reverse(BaseDocumentTransformer):
    """A reorder step after compression, as `LongContextReorder` is used."""

    def transform_documents(self, documents: Sequence[Document],
                            **kwargs: Any) -> Sequence[Document]:
        return list(reversed(documents))


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.reports: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.sent.extend(messages)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == "capsa.compression_report":
            self.reports.append(data)

    def context(self) -> str:
        [messages] = self.sent
        return str(messages[0].content).removeprefix(PREFIX)


def rag_chain(retriever: Runnable[str, list[Document]]) -> Runnable[str, str]:
    prompt = ChatPromptTemplate.from_messages([("system", PREFIX + "{context}"),
                                               ("human", "{question}")])
    return ({"context": retriever | format_packet, "question": RunnablePassthrough()}
            | prompt | FakeListChatModel(responses=["EUR 230."]) | StrOutputParser())


def reranked(as_float: bool, max_tokens: int, sort: bool) -> ContextualCompressionRetriever:
    scores = {"hotel": 0.9, "rail": 0.1, "meals": 0.3}
    documents = [Document(id=d.id, page_content=d.page_content) for d in corpus()]
    pipeline = DocumentCompressorPipeline(transformers=[
        FlashRankLike(scores=scores, as_float=as_float, sort=sort),
        CapsaCompressor(budget=Budget(max_tokens=max_tokens))])
    return ContextualCompressionRetriever(base_compressor=pipeline,
                                          base_retriever=RunnableLambda(lambda q: documents))


@pytest.mark.parametrize("sort", [True, False], ids=["reranked", "merged"])
@pytest.mark.parametrize("max_tokens", [80, 30])
def test_a_rerankers_numpy_scores_count_as_its_float_scores(max_tokens: int, sort: bool) -> None:
    """FlashRank's float32 relevance_score was read as no score at all."""
    numpy_kept = reranked(as_float=False, max_tokens=max_tokens, sort=sort).invoke(QUESTION)
    float_kept = reranked(as_float=True, max_tokens=max_tokens, sort=sort).invoke(QUESTION)
    assert [d.id for d in numpy_kept] == [d.id for d in float_kept]  # packed order: by score
    assert ([d.metadata["capsa_receipt"] for d in numpy_kept]
            == [d.metadata["capsa_receipt"] for d in float_kept])
    assert isinstance(numpy_kept[0].metadata["relevance_score"], np.float32)  # left as given


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), np.float32("nan")],
                         ids=["nan", "inf", "-inf", "float32-nan"])
@pytest.mark.parametrize("max_tokens", [80, 30])
def test_a_non_finite_score_counts_as_no_score(bad: float, max_tokens: int) -> None:
    """A NaN or infinite score put the only matching document last or called others irrelevant."""
    def docs(score: float | None) -> list[Document]:
        return [Document(id="hotel", page_content="The hotel cap in London is EUR 230.",
                         metadata={"relevance_score": score}),
                Document(id="rail", page_content="Trains are booked in standard class every day.",
                         metadata={"relevance_score": 0.9}),
                Document(id="meals", page_content="Meals are paid up to EUR 55 a day.",
                         metadata={"relevance_score": 0.3})]

    compressor = CapsaCompressor(budget=Budget(max_tokens=max_tokens))
    with_bad = compressor.compress_documents(docs(bad), QUESTION)
    without = compressor.compress_documents(docs(None), QUESTION)
    assert [d.id for d in with_bad] == [d.id for d in without]
    assert with_bad[0].id == "hotel"
    assert ([d.metadata["capsa_receipt"] for d in with_bad]
            == [d.metadata["capsa_receipt"] for d in without])


def test_core_pack_treats_a_nan_score_as_no_score() -> None:
    def passages(score: float | None) -> list[Passage]:
        return [Passage(id="1", text="The hotel cap in London is EUR 230.", score=score),
                Passage(id="2", text="Trains are booked in standard class every day.", score=0.9),
                Passage(id="3", text="Meals are paid up to EUR 55 a day.", score=0.3)]

    budget = Budget(max_tokens=30)
    nan = pack(QUESTION, passages(float("nan")), budget)
    none = pack(QUESTION, passages(None), budget)
    assert [r.dropped for r in nan.receipts] == [r.dropped for r in none.receipts]


def test_a_reorder_step_after_capsa_keeps_handles_and_budget() -> None:
    pipeline = DocumentCompressorPipeline(transformers=[
        CapsaCompressor(budget=Budget(max_tokens=60)), Reverse()])
    retriever = ContextualCompressionRetriever(base_compressor=pipeline,
                                               base_retriever=RunnableLambda(lambda q: corpus()))
    recorder = Recorder()
    rag_chain(retriever).invoke(QUESTION, config={"callbacks": [recorder]})
    context = recorder.context()
    assert estimate_tokens(context) <= 60 and "EUR 230" in context
    [report] = recorder.reports
    handles = {d.metadata["capsa_handle"]: d.id for d in retriever.invoke(QUESTION)}
    # Each document is shown under the handle the report's receipt names it by.
    for handle, ident in handles.items():
        assert f'<document id="{handle}"' in context
        assert ident in report["kept"]


def test_metadata_no_json_encoder_takes_reaches_the_model_and_stays_the_callers() -> None:
    nested = {"reviewed": {"by": "ops", "at": datetime.date(2024, 5, 1)}}
    documents = [
        Document(id="hotel", page_content="The hotel cap in London is EUR 230.",
                 metadata={"source": Path("/srv/policies/travel.pdf"),
                           "created": datetime.datetime(2024, 1, 2, 3, 4, 5),
                           "vector": np.arange(4, dtype=np.float32), "raw": b"\x00\xff",
                           "page_number": np.int64(3), **copy.deepcopy(nested)}),
        Document(id="rail", page_content="Trains are booked in standard class.",
                 metadata={"source": PurePosixPath("/srv/rail.md"), "score": np.float64(0.2),
                           "tags": {"rail", "booking"}}),
    ]
    before = repr(documents)
    recorder = Recorder()
    answer = rag_chain(BudgetedRetriever(retriever=RunnableLambda(lambda q: documents),
                                         budget=Budget(max_tokens=80))).invoke(
        QUESTION, config={"callbacks": [recorder]})
    assert answer == "EUR 230."
    context = recorder.context()
    assert 'source="travel.pdf"' in context and "/srv" not in context
    assert estimate_tokens(context) <= 80
    assert repr(documents) == before
    [report] = recorder.reports
    assert sorted(report["kept"] + [d["id"] for d in report["dropped"]]) == ["hotel", "rail"]


async def test_astream_events_carry_the_report_with_the_callers_tags_and_metadata() -> None:
    config: Any = {"tags": ["tenant-a"], "metadata": {"user": "u-1"}}
    compression = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=80)),
        base_retriever=RunnableLambda(lambda q: corpus()))
    budgeted = BudgetedRetriever(retriever=RunnableLambda(lambda q: corpus()),
                                 budget=Budget(max_tokens=80))
    for retriever in (compression, budgeted):
        chain = rag_chain(retriever)
        events = [e async for e in chain.astream_events(QUESTION, config, version="v2")]
        custom = [e for e in events if e["event"] == "on_custom_event"]
        assert [e["name"] for e in custom] == ["capsa.compression_report"]
        assert "tenant-a" in custom[0]["tags"] and custom[0]["metadata"]["user"] == "u-1"
        assert custom[0]["data"]["query"] == QUESTION
        streamed = [e for e in events if e["event"] == "on_chat_model_stream"]
        assert "".join(e["data"]["chunk"].content for e in streamed) == "EUR 230."


@pytest.mark.parametrize("k", [0, -1, 2.5])
def test_a_per_call_k_out_of_range_is_refused_like_the_field(k: Any) -> None:
    """k=0 per call emptied the packet and reported every document as 'empty'."""
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda q: corpus()),
                                  budget=Budget(max_tokens=80))
    with pytest.raises(ValueError, match="BudgetedRetriever k"):
        retriever.invoke(QUESTION, k=k)
    with pytest.raises(ValueError, match="k"):
        BudgetedRetriever(retriever=RunnableLambda(lambda q: corpus()),
                          budget=Budget(max_tokens=80), k=k)


async def test_a_per_call_k_is_checked_on_the_async_path_too() -> None:
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda q: corpus()),
                                  budget=Budget(max_tokens=80))
    with pytest.raises(ValueError, match="BudgetedRetriever k"):
        await retriever.ainvoke(QUESTION, k=0)
    assert len(await retriever.ainvoke(QUESTION, k="1")) == 1  # as the field coerces it


def test_shadow_scored_by_a_rerankers_numpy_scores_compares_instead_of_refusing() -> None:
    """With score_key on float32 scores every comparison was refused as 'invalid score'."""
    docs = [Document(id="a", page_content="Refunds within 30 days.",
                     metadata={"relevance_score": np.float32(0.25)}),
            Document(id="b", page_content="Store credit never expires.",
                     metadata={"relevance_score": np.float32(0.75)})]
    rows: list[PairedDecision] = []
    shadow = ShadowRetriever(baseline=RunnableLambda(lambda q: docs),
                             candidate=RunnableLambda(lambda q: docs), sink=rows.extend,
                             score_key="relevance_score")
    try:
        shadow.invoke("refunds")
        shadow.flush()
    finally:
        shadow.close()
    assert (shadow.counts.paired, shadow.counts.capture_refused) == (1, 0)
    assert sorted(r.baseline_score for r in rows if r.baseline_score is not None) == [0.25, 0.75]


def test_a_bytes_source_is_shown_by_its_file_name() -> None:
    documents = [Document(page_content="The hotel cap in London is EUR 230.",
                          metadata={"source": b"/srv/travel.pdf"})]
    kept = CapsaCompressor(budget=Budget(max_tokens=80)).compress_documents(documents, QUESTION)
    assert 'source="travel.pdf"' in format_packet.invoke(kept)


def test_a_mistyped_question_is_read_as_the_documents_spell_it_and_the_report_says_so() -> None:
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=40)),
        base_retriever=RunnableLambda(lambda q: corpus()))
    recorder = Recorder()
    rag_chain(retriever).invoke("What is the hotel cap in Londno?",
                                config={"callbacks": [recorder]})
    [report] = recorder.reports
    assert report["respelt"] == [["Londno", "London"]]
    assert report["kept"][0] == "hotel" and "EUR 230" in recorder.context()
