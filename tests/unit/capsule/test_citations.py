from __future__ import annotations

from capsa.capsule import CitationRef, Evidence, cite_ids, parse_citations, resolve_citations

UUID_A = "3f2b8c1e-9d4a-4e7b-a6f0-2c5d8e9b1a73"
UUID_B = "a91c07d2-5e38-4f1b-8c6d-7b20e4f9c315"


def _evidence(chunk_id: str, content: str = "text", **fields) -> Evidence:
    return Evidence(chunk_id=chunk_id, content=content, document_id="d", **fields)


def test_cite_ids_accepts_exact_ids_in_given_order():
    result = cite_ids(["c2", "c1"], ["c1", "c2"])
    assert result.accepted == ("c2", "c1")
    assert result.repaired == ()
    assert result.ignored == ()


def test_cite_ids_strips_brackets_quotes_and_trailing_punctuation():
    assert cite_ids(["[c1]", "'c2'", "c3.", " `c4` "], ["c1", "c2", "c3", "c4"]).accepted == (
        "c1",
        "c2",
        "c3",
        "c4",
    )


def test_an_id_that_itself_has_outer_spaces_or_brackets_matches_as_written():
    known = ["  padded  ", "[7]", "c1"]
    assert cite_ids(["  padded  ", "[7]", "[c1]"], known).accepted == ("  padded  ", "[7]", "c1")
    assert parse_citations("See [  padded  ] and [c1].", known) == ("  padded  ", "c1")
    assert resolve_citations([CitationRef(chunk_id="[7]")],
                             [_evidence("[7]"), _evidence("7")]) == ("[7]",)


def test_cite_ids_repairs_a_dropped_character():
    damaged = UUID_A[:10] + UUID_A[11:]
    result = cite_ids([damaged], [UUID_A, UUID_B])
    assert result.accepted == (UUID_A,)
    assert result.repaired[0].written == damaged
    assert result.repaired[0].chunk_id == UUID_A


def test_cite_ids_repairs_a_dropped_hyphen_group():
    damaged = UUID_A.replace("-9d4a", "")
    assert cite_ids([damaged], [UUID_A, UUID_B]).accepted == (UUID_A,)


def test_cite_ids_repairs_case_changes():
    assert cite_ids([UUID_A.upper()], [UUID_A]).accepted == (UUID_A,)


def test_cite_ids_never_attributes_a_lookalike_short_id():
    result = cite_ids(["chunk-3", "chunk-1"], ["chunk-4", "chunk-12"])
    assert result.accepted == ()
    assert result.ignored == ("chunk-3", "chunk-1")


def test_cite_ids_never_attributes_an_unrelated_uuid():
    result = cite_ids([UUID_B], [UUID_A])
    assert result.accepted == ()
    assert result.ignored == (UUID_B,)


def test_cite_ids_ignores_a_repair_that_fits_two_candidates():
    first = "0123456789abcdef-x"
    second = "0123456789abcdef-y"
    assert cite_ids(["0123456789abcdef"], [first, second]).accepted == ()


def test_cite_ids_counts_a_repeated_id_once():
    assert cite_ids(["c1", "[c1]", "c1"], ["c1"]).accepted == ("c1",)


def test_cite_ids_ignores_empty_ids():
    assert cite_ids(["", "[]"], ["c1"]).ignored == ("", "[]")


def test_parse_citations_reads_several_ids_in_one_marker():
    assert parse_citations("Yes [c1, c2; c3].", ["c1", "c2", "c3"]) == ("c1", "c2", "c3")


def test_parse_citations_keeps_first_appearance_order_without_repeats():
    assert parse_citations("[c2] then [c1] then [c2]", ["c1", "c2"]) == ("c2", "c1")


def test_parse_citations_ignores_ids_not_retrieved_and_footnotes():
    assert parse_citations("See [c9], [1] and [the link](http://x).", ["c1"]) == ()


def test_parse_citations_does_not_repair_damaged_ids():
    assert parse_citations(f"[{UUID_A[:-1]}]", [UUID_A]) == ()


def test_resolve_citations_accepts_an_exact_chunk_id():
    assert resolve_citations(
        [CitationRef(chunk_id="[c2]")], [_evidence("c1"), _evidence("c2")]
    ) == ("c2",)


def test_resolve_citations_ignores_an_unknown_chunk_id():
    assert resolve_citations([CitationRef(chunk_id="c9")], [_evidence("c1")]) == ()


def test_resolve_citations_matches_quoted_text_ignoring_case_and_spacing():
    seen = [_evidence("c1", "Hotels in London cost\nEUR 230."), _evidence("c2", "Trains.")]
    assert resolve_citations([CitationRef(cited_text="hotels in london  cost eur 230")], seen) == (
        "c1",
    )


def test_resolve_citations_narrows_an_ambiguous_quote_by_url():
    seen = [
        _evidence("c1", "EUR 230 a night", uri="travel.pdf"),
        _evidence("c2", "EUR 230 a night", uri="board.eml"),
    ]
    ref = CitationRef(cited_text="EUR 230", url="board.eml")
    assert resolve_citations([ref], seen) == ("c2",)


def test_resolve_citations_leaves_an_ambiguous_quote_unattributed():
    seen = [_evidence("c1", "EUR 230 a night"), _evidence("c2", "EUR 230 a night")]
    assert resolve_citations([CitationRef(cited_text="EUR 230")], seen) == ()


def test_resolve_citations_matches_a_title_held_by_one_chunk():
    seen = [_evidence("c1", title="Travel"), _evidence("c2", title="Retention")]
    assert resolve_citations([CitationRef(title="Retention")], seen) == ("c2",)


def test_resolve_citations_leaves_a_url_shared_by_two_chunks_unattributed():
    seen = [_evidence("c1", uri="travel.pdf"), _evidence("c2", uri="travel.pdf")]
    assert resolve_citations([CitationRef(url="travel.pdf")], seen) == ()


def test_resolve_citations_ignores_a_ref_with_nothing_to_match():
    assert resolve_citations([CitationRef()], [_evidence("c1")]) == ()


def test_cite_result_acknowledges_what_was_recorded_and_ignored():
    result = cite_ids(["c1", "c2", "c9"], ["c1", "c2"])
    assert result.acknowledgement() == (
        "Recorded 2 citations: c1, c2. Ignored, not among the chunks you were shown: c9."
    )


def test_cite_result_acknowledges_an_empty_citation():
    assert cite_ids([], ["c1"]).acknowledgement() == "Recorded no citations."
