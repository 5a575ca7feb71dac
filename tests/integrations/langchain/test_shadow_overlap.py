"""Shadow evaluation over a real splitter's output: overlapping chunks pair.

Documents come through `CapsaLoader` and are cut by LangChain's
`RecursiveCharacterTextSplitter` with its defaults (4000 characters, 200 of
overlap), so neighbouring chunks share text and a copied file yields chunks
with the same words under another source.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langchain_text_splitters import RecursiveCharacterTextSplitter

from capsa.demo.routes import budgeted_route, lexical_route
from capsa.langchain import CapsaLoader, ShadowRetriever
from capsa.shadow import CorpusPassage, PairedDecision, ShadowReport, compare_routes


@pytest.fixture(scope="module")
def chunks(manual_files: list[Path]) -> list[Document]:
    return RecursiveCharacterTextSplitter().split_documents(CapsaLoader(manual_files).load())


def _passages(chunks: list[Document]) -> list[CorpusPassage]:
    return [CorpusPassage(f"{Path(c.metadata['source']).name}#{n}", c.page_content)
            for n, c in enumerate(chunks)]


def _shares_text(a: str, b: str) -> bool:
    return a == b or a[-150:] in b or b[-150:] in a


def test_the_default_splitter_output_overlaps_and_repeats(chunks) -> None:
    texts = [c.page_content for c in chunks]
    assert any(_shares_text(a, b) for a, b in itertools.pairwise(texts))
    assert len(set(texts)) < len(texts)  # the copied file's chunks


def test_bundled_routes_pair_every_query_over_overlapping_chunks(chunks, manual_queries) -> None:
    passages = _passages(chunks)
    lexical, budgeted = lexical_route(passages), budgeted_route(passages)
    queries = manual_queries
    run = compare_routes(queries, lexical, budgeted)
    assert (run.invalidated, dict(run.causes)) == (0, {})
    assert ShadowReport.from_rows(run.rows).queries == len(queries)
    # The scenario does put overlapping chunks in one block.
    selections = [[c.text for c in lexical.run(q).candidates
                   if c.source_id in lexical.run(q).selected] for q in queries]
    assert any(_shares_text(a, b) for texts in selections
               for i, a in enumerate(texts) for b in texts[i + 1:])


def test_shadow_retriever_pairs_plain_routes_over_chunks_without_ids(chunks,
                                                                    manual_queries) -> None:
    passages = _passages(chunks)
    by_id = {p.source_id: chunk for p, chunk in zip(passages, chunks, strict=True)}
    assert all(chunk.id is None for chunk in chunks)
    route = lexical_route(passages)

    def top(k: int) -> RunnableLambda[str, list[Document]]:
        return RunnableLambda(lambda q: [by_id[c.source_id] for c in route.retrieve(q)[:k]])

    rows: list[PairedDecision] = []
    shadow = ShadowRetriever(baseline=top(3), candidate=top(5), sink=rows.extend)
    for query in manual_queries:
        shadow.invoke(query)
    shadow.flush()
    counts = shadow.counts
    shadow.close()
    assert (counts.paired, counts.invalidated) == (len(manual_queries), 0)
    assert all(r.baseline_included for r in rows if r.baseline_selected)
