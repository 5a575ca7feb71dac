from __future__ import annotations

from capsa.capsule import (
    CAPSULE_HEADER,
    NO_RESULTS,
    EvidenceLedger,
    build_capsule,
    estimate_tokens,
    render_evidence,
)


def _ledger(*questions):
    """Questions given as (chunks, cited ids); each question is four messages long."""
    ledger = EvidenceLedger()
    for index, (chunks, cited) in enumerate(questions):
        ledger = ledger.begin_question(index * 4).record_retrieval(chunks, tool="search")
        ledger = ledger.record_citations(cited).end_question(index * 4 + 4)
    return ledger


def test_build_capsule_is_empty_when_nothing_was_cited(make_chunk):
    capsule = build_capsule(_ledger(([make_chunk("c1")], [])))
    assert capsule.text == ""
    assert capsule.chunk_ids == ()
    assert capsule.pictures == ()


def test_build_capsule_orders_groups_newest_first_under_one_header(make_chunk):
    ledger = _ledger(
        ([make_chunk("a1"), make_chunk("a2")], ["a1"]),
        ([make_chunk("b1")], ["b1"]),
        ([make_chunk("c1")], ["c1"]),
    )
    capsule = build_capsule(ledger)
    assert capsule.chunk_ids == ("c1", "b1", "a1")
    assert capsule.text.count(CAPSULE_HEADER) == 1
    assert capsule.text.startswith(CAPSULE_HEADER)
    positions = [capsule.text.index(f'<group rank="{k}" of="3">') for k in (1, 2, 3)]
    assert positions == sorted(positions)
    assert (
        capsule.text.index('id="c1"')
        < capsule.text.index('id="b1"')
        < capsule.text.index('id="a1"')
    )


def test_build_capsule_renders_a_chunk_cited_twice_once_in_the_newest_group(make_chunk):
    ledger = _ledger(([make_chunk("a1")], ["a1"]), ([make_chunk("b1")], ["b1"]))
    ledger = ledger.begin_question(8).record_citations(["a1"]).end_question(10)
    capsule = build_capsule(ledger)
    assert capsule.chunk_ids == ("a1", "b1")
    assert capsule.text.count('<chunk id="a1"') == 1


def test_build_capsule_puts_all_chunks_cited_by_one_question_in_one_group(make_chunk):
    ledger = _ledger(([make_chunk("a1"), make_chunk("a2"), make_chunk("a3")], ["a3", "a1"]))
    capsule = build_capsule(ledger)
    assert capsule.text.count("<group ") == 1
    assert capsule.chunk_ids == ("a1", "a3")


def test_build_capsule_keeps_a_long_chunk_whole(make_chunk):
    long_text = "word " * 4000
    capsule = build_capsule(_ledger(([make_chunk("c1", content=long_text)], ["c1"])))
    assert long_text in capsule.text


def test_build_capsule_excludes_uncited_evidence_and_its_pictures(make_chunk):
    chunks = [
        make_chunk("cited", picture_refs=["#/pictures/0"]),
        make_chunk("uncited", picture_refs=["#/pictures/1"]),
    ]
    capsule = build_capsule(_ledger((chunks, ["cited"])))
    assert "uncited" not in capsule.text
    assert [p.ref for p in capsule.pictures] == ["#/pictures/0"]


def test_build_capsule_names_source_by_title_and_a_differing_uri(make_chunk):
    chunks = [
        make_chunk("c1", title="Travel Policy", uri="travel-policy.pdf"),
        make_chunk("c2", title="same", uri="same"),
        make_chunk("c3", uri="notes.md"),
        make_chunk("c4", document_id="doc-4"),
    ]
    text = build_capsule(_ledger((chunks, ["c1", "c2", "c3", "c4"]))).text
    assert '<chunk id="c1" title="Travel Policy" uri="travel-policy.pdf">' in text
    assert '<chunk id="c2" title="same">' in text
    assert '<chunk id="c3" uri="notes.md">' in text
    assert '<chunk id="c4" document="doc-4">' in text


def test_build_capsule_names_collections_only_when_several_are_involved(make_chunk):
    one = build_capsule(_ledger(([make_chunk("c1", collection="hr")], ["c1"])))
    assert "collection=" not in one.text
    two = build_capsule(
        _ledger(
            ([make_chunk("c1", collection="hr"), make_chunk("c2", collection="ops")], ["c1", "c2"])
        )
    )
    assert 'collection="hr"' in two.text
    assert 'collection="ops"' in two.text


def test_build_capsule_attaches_a_picture_shared_by_two_chunks_once(make_chunk):
    chunks = [
        make_chunk("c1", document_id="d", picture_refs=["#/pictures/0"]),
        make_chunk("c2", document_id="d", picture_refs=["#/pictures/0"]),
    ]
    capsule = build_capsule(_ledger((chunks, ["c1", "c2"])))
    assert [(p.chunk_id, p.ref) for p in capsule.pictures] == [("c1", "#/pictures/0")]


def test_build_capsule_keeps_the_same_reference_in_two_documents_or_collections(make_chunk):
    chunks = [
        make_chunk("c1", document_id="d1", picture_refs=["#/pictures/0"]),
        make_chunk("c2", document_id="d2", picture_refs=["#/pictures/0"]),
        make_chunk("c3", document_id="d1", collection="archive", picture_refs=["#/pictures/0"]),
    ]
    capsule = build_capsule(_ledger((chunks, ["c1", "c2", "c3"])))
    assert [(p.collection, p.document_id) for p in capsule.pictures] == [
        (None, "d1"),
        (None, "d2"),
        ("archive", "d1"),
    ]
    assert len({p.label for p in capsule.pictures}) == 3


def test_build_capsule_labels_pictures_with_chunk_reference_and_origin(make_chunk):
    chunk = make_chunk("c1", collection="hr", title="Notice", picture_refs=["#/pictures/2"])
    label = build_capsule(_ledger(([chunk], ["c1"]))).pictures[0].label
    assert "[c1]" in label
    assert "#/pictures/2" in label
    assert '"hr"' in label
    assert "knowledge base" in label
    assert "not provided by the user" in label


def test_build_capsule_lists_pictures_newest_group_first(make_chunk):
    ledger = _ledger(
        ([make_chunk("old", picture_refs=["#/pictures/0"])], ["old"]),
        ([make_chunk("new", document_id="e", picture_refs=["#/pictures/0"])], ["new"]),
    )
    assert [p.chunk_id for p in build_capsule(ledger).pictures] == ["new", "old"]


def test_build_capsule_with_max_tokens_drops_oldest_groups_and_says_so(make_chunk):
    ledger = _ledger(
        ([make_chunk("a1")], ["a1"]),
        ([make_chunk("b1")], ["b1"]),
        ([make_chunk("c1")], ["c1"]),
    )
    full = build_capsule(ledger)
    bounded = build_capsule(ledger, max_tokens=full.tokens - 10)
    assert bounded.tokens <= full.tokens - 10
    assert bounded.chunk_ids == ("c1", "b1")
    assert bounded.omitted == ("a1",)
    assert '<omitted count="1" reason="max_tokens" ids="a1"/>' in bounded.text


def test_build_capsule_with_a_tiny_bound_is_empty_and_reports_the_omission(make_chunk):
    capsule = build_capsule(_ledger(([make_chunk("a1")], ["a1"])), max_tokens=1)
    assert capsule.chunk_ids == ()
    assert capsule.omitted == ("a1",)
    assert capsule.text == ""
    assert capsule.tokens == 0


def test_build_capsule_bound_holds_with_many_long_ids(make_chunk):
    chunks = [make_chunk(f"{k:08d}-9d4a-4e7b-a6f0-2c5d8e9b1a73") for k in range(60)]
    ledger = _ledger(*(([chunk], [chunk.chunk_id]) for chunk in chunks))
    capsule = build_capsule(ledger, max_tokens=500)
    assert 0 < capsule.tokens <= 500
    assert len(capsule.chunk_ids) + len(capsule.omitted) == 60
    assert 'more="' in capsule.text  # ids that do not fit are counted, not listed


def test_build_capsule_leaves_out_citations_of_the_question_in_progress(make_chunk):
    ledger = _ledger(([make_chunk("a1")], ["a1"]))
    ledger = ledger.begin_question(4).record_retrieval([make_chunk("b1")], tool="search")
    ledger = ledger.record_citations(["b1", "a1"])
    capsule = build_capsule(ledger)
    assert capsule.chunk_ids == ("a1",)
    assert '<group rank="1" of="1">' in capsule.text


def test_build_capsule_counts_tokens_with_the_given_tokenizer(make_chunk):
    ledger = _ledger(([make_chunk("a1")], ["a1"]))
    assert build_capsule(ledger).tokens == estimate_tokens(build_capsule(ledger).text)
    assert build_capsule(ledger, tokenizer=len).tokens == len(build_capsule(ledger).text)


def test_build_capsule_is_byte_identical_for_the_same_ledger(make_chunk):
    ledger = _ledger(([make_chunk("a1"), make_chunk("a2")], ["a2", "a1"]))
    assert build_capsule(ledger) == build_capsule(EvidenceLedger.from_json(ledger.to_json()))


def test_render_evidence_shows_each_chunk_id_source_and_text(make_chunk):
    text = render_evidence(
        [make_chunk("c1", title="Travel", uri="t.pdf", content="EUR 230."), make_chunk("c2")]
    )
    assert text.startswith(
        '<chunk id="c1" title="Travel" uri="t.pdf">\nEUR 230.\n</chunk>\n\n'
        '<chunk id="c2" document="doc">\n'
    )


def test_render_evidence_names_collections_only_when_several(make_chunk):
    one = render_evidence([make_chunk("c1", collection="hr")])
    two = render_evidence([make_chunk("c1", collection="hr"), make_chunk("c2", collection="ops")])
    assert "collection=" not in one
    assert 'collection="hr"' in two and 'collection="ops"' in two


def test_render_evidence_says_when_nothing_was_found():
    assert render_evidence([]) == NO_RESULTS
