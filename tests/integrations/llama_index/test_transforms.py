"""CapsaTransform inside a real IngestionPipeline, over the sample corpus, with 1 and 2 workers."""

from __future__ import annotations

import logging
import pickle
import re
from pathlib import Path

import llama_index.core
import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.ingestion.pipeline import get_transformation_hash
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.schema import BaseNode, Document, MetadataMode, TextNode

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES, QUESTIONS
from capsa.errors import UnguardedInput
from capsa.guard import ExtractionLimits
from capsa.guard.extractors import PlainTextExtractor
from capsa.llama_index import CapsaDirectoryReader, CapsaReader, CapsaTransform
from capsa.llama_index.readers import CapsaOmissionEvent

_REFUSED = {("quarterly-report.docx", "archive_ratio"), ("invoice.pdf", "type_mismatch")}


class _Collect(BaseEventHandler):
    events: list[BaseEvent] = []

    @classmethod
    def class_name(cls) -> str:
        return "_CollectTransformEvents"

    def handle(self, event: BaseEvent, **kwargs: object) -> None:
        self.events.append(event)


@pytest.fixture
def corpus(tmp_path: Path) -> list[Document]:
    """The corpus as SimpleDirectoryReader describes it: placeholder text, file metadata."""
    docs = []
    for name in sorted([d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]):
        path = tmp_path / name
        path.write_bytes((CORPUS_DIR / name).read_bytes())
        docs.append(Document(text=f"unparsed {name}", id_=f"doc-{name}",
                             metadata={**default_file_metadata_func(str(path)),
                                       "capsa_pending": True}))
    return docs


@pytest.fixture
def offline_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned workers unpickle the splitter's tiktoken encoding: use the bundled file.

    llama-index-core sets TIKTOKEN_CACHE_DIR only while it loads its own
    tokenizer, so a fresh worker process would try to download cl100k_base.
    """
    bundled = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(bundled))


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _text_by_label(nodes: list[BaseNode]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for node in nodes:
        label = node.metadata["capsa_label"]
        joined[label] = joined.get(label, "") + " " + node.get_content()
    return {label: _flat(text) for label, text in joined.items()}


def _assert_corpus_extracted(nodes: list[BaseNode]) -> None:
    texts = _text_by_label(nodes)
    assert sorted(texts) == sorted(d.name for d in DOCUMENTS)
    for question in QUESTIONS:
        assert _flat(question.answer) in texts[question.document_name], question.question
    assert all(not text.startswith(" unparsed") for text in texts.values())
    assert {n.ref_doc_id for n in nodes} == {f"doc-{d.name}" for d in DOCUMENTS}


def test_transform_survives_a_pickle_round_trip() -> None:
    transform = CapsaTransform(limits=ExtractionLimits(max_pages=3, timeout_s=5))
    copy = pickle.loads(pickle.dumps(transform))
    assert copy == transform
    assert copy.limits.max_pages == 3
    assert copy.to_dict()["class_name"] == "CapsaTransform"


def test_transform_has_a_stable_class_name() -> None:
    assert CapsaTransform.class_name() == "CapsaTransform"


def test_transform_cache_key_changes_with_the_limits() -> None:
    nodes = [Document(text="x", metadata={"file_path": "/nowhere/a.txt",
                                                 "capsa_pending": True})]
    default = get_transformation_hash(nodes, CapsaTransform())
    assert default == get_transformation_hash(nodes, CapsaTransform())
    assert default != get_transformation_hash(
        nodes, CapsaTransform(limits=ExtractionLimits(max_pages=3)))


def test_transform_passes_nodes_without_a_file_path_through_unchanged() -> None:
    plain = TextNode(text="already text", metadata={"source": "chat"})
    assert list(CapsaTransform()([plain])) == [plain]
    assert plain.metadata == {"source": "chat"}


@pytest.mark.slow
def test_transform_in_a_pipeline_extracts_the_corpus_with_one_worker(
        corpus: list[Document]) -> None:
    pipeline = IngestionPipeline(transformations=[CapsaTransform(), SentenceSplitter()])
    nodes = list(pipeline.run(documents=corpus, num_workers=1))
    _assert_corpus_extracted(nodes)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.usefixtures("offline_tiktoken")
@pytest.mark.filterwarnings("ignore:Specified num_workers exceed")
def test_transform_in_a_pipeline_extracts_the_corpus_with_two_workers(
        corpus: list[Document]) -> None:
    pipeline = IngestionPipeline(transformations=[CapsaTransform(), SentenceSplitter()])
    nodes = list(pipeline.run(documents=corpus, num_workers=2))
    _assert_corpus_extracted(nodes)


@pytest.mark.slow
def test_transform_drops_refused_files_and_reports_them(
        corpus: list[Document], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="capsa.llama_index.transforms"):
        out = CapsaTransform()(corpus)
    labels = {node.metadata["capsa_label"] for node in out}
    assert labels.isdisjoint(name for name, _ in _REFUSED)
    assert len(out) == len(DOCUMENTS)
    for name, reason in _REFUSED:
        assert any(name in r.getMessage() and reason in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_transform_in_a_pipeline_emits_an_omission_event_per_refused_file(
        corpus: list[Document]) -> None:
    handler = _Collect()
    handler.events = []
    get_dispatcher().add_event_handler(handler)
    try:
        nodes = IngestionPipeline(transformations=[CapsaTransform()]).run(documents=corpus,
                                                                         num_workers=1)
    finally:
        get_dispatcher().event_handlers.remove(handler)
    assert {n.metadata["capsa_label"] for n in nodes} == {d.name for d in DOCUMENTS}
    events = [e for e in handler.events if isinstance(e, CapsaOmissionEvent)]
    assert {(e.label, e.reason) for e in events} == _REFUSED
    assert {e.stage for e in events} == {"archive", "sniff"}


@pytest.mark.slow
def test_transform_keeps_provenance_out_of_llm_and_embed_text(corpus: list[Document]) -> None:
    (doc,) = [n for n in CapsaTransform()(corpus) if n.metadata["file_name"] == "remote-work.md"]
    assert doc.metadata["capsa_kind"] == "markdown"
    assert doc.metadata["file_path"].endswith("remote-work.md")
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        assert "capsa_sha256" not in doc.get_content(metadata_mode=mode)
    assert doc.metadata["capsa_sha256"] in doc.get_content(metadata_mode=MetadataMode.ALL)


@pytest.mark.slow
def test_transform_never_changes_the_nodes_it_was_given(corpus: list[Document]) -> None:
    before = [(d.id_, d.text, dict(d.metadata)) for d in corpus]
    CapsaTransform()(corpus)
    assert [(d.id_, d.text, dict(d.metadata)) for d in corpus] == before


@pytest.mark.slow
def test_transform_merges_nodes_of_one_file_into_one_document(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nThe stipend is EUR 30.\n", encoding="utf-8")
    pages = [Document(text=f"page {i}", id_=f"page-{i}", metadata={"file_path": str(path),
                                                                   "page_label": str(i),
                                                                   "capsa_pending": True})
             for i in (1, 2)]
    (doc,) = CapsaTransform()(pages)
    assert doc.id_ == "page-1"
    assert "EUR 30" in doc.text


@pytest.mark.slow
def test_transform_reports_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    handler = _Collect()
    handler.events = []
    get_dispatcher().add_event_handler(handler)
    try:
        missing = Document(text="", metadata={"file_path": str(tmp_path / "gone.pdf"),
                                                        "capsa_pending": True})
        out = CapsaTransform()([missing])
    finally:
        get_dispatcher().event_handlers.remove(handler)
    assert list(out) == []
    events = [e for e in handler.events if isinstance(e, CapsaOmissionEvent)]
    assert [(e.label, e.reason) for e in events] == [("gone.pdf", "corrupt")]


@pytest.mark.slow
def test_transform_after_a_deferred_directory_reader_yields_one_document_per_file(
        tmp_path: Path) -> None:
    for name in ("remote-work.md", "handbook.html"):
        (tmp_path / name).write_bytes((CORPUS_DIR / name).read_bytes())
    docs = CapsaDirectoryReader(str(tmp_path), defer=True).load_data()
    assert [d.text for d in docs] == ["", ""]  # nothing parsed before the transform
    out = CapsaTransform()(docs)
    assert sorted(n.metadata["capsa_label"] for n in out) == ["handbook.html", "remote-work.md"]
    assert {n.metadata["capsa_kind"] for n in out} == {"html", "markdown"}
    assert not any("capsa_pending" in n.metadata for n in out)


def test_transform_refuses_loudly_what_simple_directory_reader_parsed(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n\nThe stipend is EUR 30.\n", encoding="utf-8")
    docs = SimpleDirectoryReader(str(tmp_path)).load_data()
    with pytest.raises(UnguardedInput) as raised:
        CapsaTransform()(docs)
    assert raised.value.sources == (str(tmp_path / "notes.md"),)
    assert "CapsaDirectoryReader" in str(raised.value)


def test_transform_passes_documents_capsa_already_read_through(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha", encoding="utf-8")
    docs = CapsaDirectoryReader(str(tmp_path), reader=CapsaReader(
        extractor=PlainTextExtractor())).load_data()
    assert list(CapsaTransform()(docs)) == docs


def test_transform_defaults_to_the_ingestion_limits() -> None:
    assert CapsaTransform().limits == ExtractionLimits.for_ingestion()


def test_transform_omission_names_the_file_it_came_from(tmp_path: Path) -> None:
    handler = _Collect()
    handler.events.clear()
    get_dispatcher().add_event_handler(handler)
    try:
        empty = tmp_path / "empty.txt"
        empty.write_bytes(b"")
        node = Document(text="", metadata={"file_path": str(empty), "capsa_pending": True})
        assert list(CapsaTransform()([node])) == []
    finally:
        get_dispatcher().event_handlers.remove(handler)
    (event,) = [e for e in handler.events if isinstance(e, CapsaOmissionEvent)]
    assert (event.reason, event.source) == ("empty", str(empty))


def test_transform_warning_names_the_refused_attachment_not_its_e_mail(
        tmp_path: Path, photo_eml: bytes, caplog: pytest.LogCaptureFixture) -> None:
    mail = tmp_path / "message.eml"
    mail.write_bytes(photo_eml)
    node = Document(text="", metadata={"file_path": str(mail), "capsa_pending": True})
    with caplog.at_level(logging.WARNING, logger="capsa.llama_index.transforms"):
        docs = list(CapsaTransform()([node]))
    assert [d.metadata["capsa_label"] for d in docs] == ["message.eml"]
    (warning,) = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert warning.startswith(f"capsa refused profilephoto.png in {mail} at text (no_text)")


def _comparable(documents: list[Document]) -> list[tuple[str, dict[str, object], list[str]]]:
    """What a document tells the index, but its id (digest or path, by design)."""
    return [(d.text, d.metadata, sorted(d.excluded_llm_metadata_keys)) for d in documents]


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["file", "element"])
def test_a_deferred_read_gives_the_documents_a_direct_read_gives(tmp_path: Path,
                                                                shape: str) -> None:
    for name in ("remote-work.md", "handbook.html"):
        (tmp_path / name).write_bytes((CORPUS_DIR / name).read_bytes())
    reader = CapsaReader(shape=shape)

    direct = CapsaDirectoryReader(str(tmp_path), reader=reader).load_data()
    deferred = CapsaDirectoryReader(str(tmp_path), reader=reader, defer=True)
    read = list(deferred.transform()(deferred.load_data()))

    assert _comparable(read) == _comparable(direct)
    if shape == "element":
        assert len(read) > 2 and all("_part_" in d.id_ for d in read)


def test_a_transform_with_other_limits_or_shape_refuses_the_placeholders(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("x" * 500, encoding="utf-8")
    strict = ExtractionLimits(max_bytes=100)
    reader = CapsaDirectoryReader(str(tmp_path), reader=CapsaReader(limits=strict), defer=True)
    placeholders = reader.load_data()

    for other in (CapsaTransform(), CapsaTransform(limits=strict, shape="page")):
        with pytest.raises(ValueError, match=r"reader\.transform"):
            other(placeholders)
    assert list(reader.transform()(placeholders)) == []  # refused as too large, as directly


@pytest.mark.parametrize("build", [
    lambda: CapsaReader(limit=ExtractionLimits(max_bytes=100)),
    lambda: CapsaTransform(limit=ExtractionLimits(max_bytes=100)),
    lambda: CapsaTransform(shapes="page"),
])
def test_a_misspelt_setting_is_refused_not_ignored(build: object) -> None:
    with pytest.raises(ValueError, match="xtra"):
        build()  # type: ignore[operator]


def test_a_misspelt_directory_reader_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="xtra"):
        CapsaDirectoryReader(str(tmp_path), limts=1)
