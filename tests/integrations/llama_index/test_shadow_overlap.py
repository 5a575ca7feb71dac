"""Shadow evaluation over a real splitter's output: overlapping nodes pair.

Documents come through `CapsaReader` and are cut by LlamaIndex's
`SentenceSplitter` with its defaults (1024 tokens, 200 of overlap), so
neighbouring nodes share sentences and a copied file yields nodes with the
same words under another id.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from capsa.demo.routes import LexicalRoute, budgeted_route, lexical_route
from capsa.llama_index import CapsaReader, ShadowRetriever
from capsa.shadow import CorpusPassage, PairedDecision, ShadowReport, compare_routes


@pytest.fixture(scope="module")
def nodes(manual_files: list[Path]) -> list[BaseNode]:
    documents = [doc for path in manual_files for doc in CapsaReader().load_data(path)]
    return SentenceSplitter().get_nodes_from_documents(documents)


def _passages(nodes: list[BaseNode]) -> list[CorpusPassage]:
    return [CorpusPassage(n.node_id, n.get_content()) for n in nodes]


def _shares_text(a: str, b: str) -> bool:
    return a == b or a[-150:] in b or b[-150:] in a


class TopK(BaseRetriever):
    """The lexical route's top `k` nodes, scored as the route scores them."""

    def __init__(self, route: LexicalRoute, nodes: dict[str, BaseNode], k: int) -> None:
        super().__init__()
        self.route, self.nodes, self.k = route, nodes, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self.route.retrieve(query_bundle.query_str)[: self.k]
        return [NodeWithScore(node=self.nodes[c.source_id], score=c.score) for c in found]


def test_the_default_splitter_output_overlaps_and_repeats(nodes) -> None:
    texts = [n.get_content() for n in nodes]
    assert any(_shares_text(a, b) for a, b in itertools.pairwise(texts))
    assert len(set(texts)) < len(texts)  # the copied file's nodes


def test_bundled_routes_pair_every_query_over_overlapping_nodes(nodes, manual_queries) -> None:
    passages = _passages(nodes)
    lexical = lexical_route(passages)
    run = compare_routes(manual_queries, lexical, budgeted_route(passages))
    assert (run.invalidated, dict(run.causes)) == (0, {})
    assert ShadowReport.from_rows(run.rows).queries == len(manual_queries)
    runs = [lexical.run(q) for q in manual_queries]
    selections = [[c.text for c in r.candidates if c.source_id in r.selected] for r in runs]
    assert any(_shares_text(a, b) for texts in selections
               for i, a in enumerate(texts) for b in texts[i + 1:])


def test_shadow_retriever_pairs_plain_routes_over_overlapping_nodes(nodes,
                                                                   manual_queries) -> None:
    route = lexical_route(_passages(nodes))
    by_id = {n.node_id: n for n in nodes}
    rows: list[PairedDecision] = []
    shadow = ShadowRetriever(baseline=TopK(route, by_id, 3), candidate=TopK(route, by_id, 5),
                             sink=rows.extend, use_node_scores=True)
    for query in manual_queries:
        shadow.retrieve(query)
    shadow.flush()
    counts = shadow.counts
    shadow.close()
    assert (counts.paired, counts.invalidated) == (len(manual_queries), 0)
    assert all(r.baseline_included for r in rows if r.baseline_selected)
