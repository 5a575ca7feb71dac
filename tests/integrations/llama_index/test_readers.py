"""CapsaReader inside real LlamaIndex ingestion, over the sample corpus."""

from __future__ import annotations

import asyncio
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES
from capsa.errors import IngestionRejected
from capsa.guard.bulk import display_name
from capsa.guard.extractors import PlainTextExtractor
from capsa.llama_index import CapsaDirectoryReader, CapsaReader
from capsa.llama_index.readers import CapsaOmissionEvent

pytestmark = pytest.mark.slow


class _Collect(BaseEventHandler):
    events: list[BaseEvent] = []

    @classmethod
    def class_name(cls) -> str:
        return "_Collect"

    def handle(self, event: BaseEvent, **kwargs: object) -> None:
        self.events.append(event)


def _corpus_copy(tmp_path: Path) -> Path:
    for name in [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]:
        (tmp_path / name).write_bytes((CORPUS_DIR / name).read_bytes())
    return tmp_path


def test_reader_in_simple_directory_reader_never_skips_silently(tmp_path: Path) -> None:
    reader = CapsaReader()
    folder = _corpus_copy(tmp_path)
    extractors = {ext: reader for ext in (".pdf", ".docx", ".xlsx", ".html", ".eml", ".png",
                                          ".md")}
    docs = SimpleDirectoryReader(str(folder), file_extractor=extractors).load_data()
    assert sorted(d.metadata["capsa_label"] for d in docs) == sorted(d.name for d in DOCUMENTS)
    assert {(o.label, o.reason) for o in reader.omitted} == {
        ("quarterly-report.docx", "archive_ratio"), ("invoice.pdf", "type_mismatch")}


def test_reader_keeps_provenance_out_of_the_llm_text(tmp_path: Path) -> None:
    from llama_index.core.schema import MetadataMode

    (doc,) = CapsaReader().load_data(CORPUS_DIR / "remote-work.md")
    assert doc.metadata["capsa_kind"] == "markdown"
    assert "capsa_sha256" not in doc.get_content(metadata_mode=MetadataMode.LLM)
    assert "capsa_sha256" not in doc.get_content(metadata_mode=MetadataMode.EMBED)


def test_reader_emits_an_instrumentation_event_per_omission(tmp_path: Path) -> None:
    handler = _Collect()
    handler.events.clear()
    get_dispatcher().add_event_handler(handler)
    try:
        empty = tmp_path / "empty.txt"
        empty.write_bytes(b"")
        reader = CapsaReader(extractor=PlainTextExtractor())
        assert reader.load_data(empty) == []
    finally:
        get_dispatcher().event_handlers.remove(handler)
    events = [e for e in handler.events if isinstance(e, CapsaOmissionEvent)]
    assert [(e.label, e.reason) for e in events] == [("empty.txt", "empty")]


def test_reader_raises_when_asked(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(IngestionRejected):
        CapsaReader(extractor=PlainTextExtractor(), on_rejection="raise").load_data(empty)


def test_reader_has_a_stable_class_name() -> None:
    assert CapsaReader.class_name() == "CapsaReader"


def _mixed_folder(root: Path) -> Path:
    (root / "a.txt").write_text("alpha")
    (root / "b.md").write_text("beta")
    (root / "empty.txt").write_bytes(b"")
    (root / "fake.pdf").write_text("not a pdf at all")
    return root


def test_reader_keeps_omissions_from_simple_directory_reader_workers(tmp_path: Path) -> None:
    reader = CapsaReader(extractor=PlainTextExtractor())
    folder = _mixed_folder(tmp_path)
    docs = SimpleDirectoryReader(
        str(folder), file_extractor={".txt": reader, ".md": reader, ".pdf": reader},
    ).load_data(num_workers=2)
    assert sorted(d.text for d in docs) == ["alpha", "beta"]
    assert sorted((o.label, o.reason) for o in reader.omitted) == [
        ("empty.txt", "empty"), ("fake.pdf", "type_mismatch")]
    assert {o.source for o in reader.omitted} == {str(folder / "empty.txt"),
                                                  str(folder / "fake.pdf")}


def test_reader_pickled_keeps_a_custom_extractor() -> None:
    from capsa.guard.extractors import Router

    text_only = CapsaReader(extractor=Router([PlainTextExtractor()]))
    copy = pickle.loads(pickle.dumps(text_only))
    assert copy.load_data(CORPUS_DIR / "travel-policy.pdf") == []
    assert [(o.label, o.reason) for o in copy.omitted] == [
        ("travel-policy.pdf", "unsupported_type")]


def test_reader_pickled_keeps_a_pool_as_its_parsers_and_size() -> None:
    from capsa.guard import IsolatedExtractor
    from capsa.guard.extractors import Router

    pool = IsolatedExtractor(Router([PlainTextExtractor()]), workers=3)
    copy = pickle.loads(pickle.dumps(CapsaReader(extractor=pool)))
    assert [d.text for d in copy.load_data(CORPUS_DIR / "remote-work.md")] != []
    assert copy.load_data(CORPUS_DIR / "travel-policy.pdf") == []
    assert copy.omitted[0].reason == "unsupported_type"


def test_reader_reports_a_missing_file_and_reads_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    reader = CapsaReader(extractor=PlainTextExtractor())
    docs = reader.load_data([tmp_path / "gone.txt", tmp_path / "a.txt"])
    assert [d.text for d in docs] == ["alpha"]
    assert [(o.label, o.reason, o.source) for o in reader.omitted] == [
        ("gone.txt", "corrupt", str(tmp_path / "gone.txt"))]


def test_reader_reset_forgets_every_omission(tmp_path: Path) -> None:
    reader = CapsaReader(extractor=PlainTextExtractor())
    SimpleDirectoryReader(str(_mixed_folder(tmp_path)), file_extractor={".txt": reader},
                          ).load_data(num_workers=2)
    assert reader.omitted != []
    reader.reset()
    assert reader.omitted == []


def test_reader_defaults_to_the_ingestion_limits(tmp_path: Path) -> None:
    from capsa.guard import ExtractionLimits

    long_text = tmp_path / "long.txt"
    long_text.write_text("word " * 20_000)  # over the attachment preset's 50,000 characters
    reader = CapsaReader(extractor=PlainTextExtractor())
    assert reader.limits == ExtractionLimits.for_ingestion()
    assert len(reader.load_data(long_text)) == 1


async def test_reader_aload_data_lets_other_coroutines_run(tmp_path: Path,
                                                           loop_probe: Any) -> None:
    extractor, other_coroutine = loop_probe
    (tmp_path / "a.txt").write_text("alpha")
    reader = CapsaReader(extractor=extractor)
    docs, _ = await asyncio.gather(reader.aload_data(tmp_path / "a.txt"), other_coroutine())
    assert [d.text for d in docs] == ["alpha"]


async def test_reader_alazy_load_data_lets_other_coroutines_run(tmp_path: Path,
                                                                loop_probe: Any) -> None:
    extractor, other_coroutine = loop_probe
    (tmp_path / "a.txt").write_text("alpha")
    reader = CapsaReader(extractor=extractor)

    async def load() -> list[str]:
        return [d.text for d in await reader.alazy_load_data(tmp_path / "a.txt")]

    texts, _ = await asyncio.gather(load(), other_coroutine())
    assert texts == ["alpha"]


def test_reader_reports_a_file_missing_from_an_fsspec_filesystem(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    reader = CapsaReader(extractor=PlainTextExtractor())
    assert reader.load_data(tmp_path / "gone.txt", fs=fsspec.filesystem("file")) == []
    assert [(o.label, o.reason) for o in reader.omitted] == [("gone.txt", "corrupt")]


def _slow_first(folder: Path) -> list[Path]:
    paths = []
    for name, data in (("0-slow.txt", "slow"), ("a.txt", "alpha"), ("b.txt", "beta"),
                       ("c.txt", "gamma")):
        (folder / name).write_text(data)
        paths.append(folder / name)
    return paths


def test_reader_unordered_yields_other_files_while_a_slow_first_file_parses(
        tmp_path: Path, gated: Any) -> None:
    reader = CapsaReader(extractor=gated, workers=2, ordered=False)
    arrived: list[str] = []
    for document in reader.lazy_load_data(_slow_first(tmp_path)):
        arrived.append(document.metadata["capsa_label"])
        if len(arrived) == 3:
            gated.release.set()  # only now may the slow file finish
    assert arrived == ["a.txt", "b.txt", "c.txt", "0-slow.txt"]


def test_reader_load_data_keeps_exactly_the_input_order_by_default(
        tmp_path: Path, gated: Any) -> None:
    threading.Timer(0.3, gated.release.set).start()
    docs = CapsaReader(extractor=gated, workers=2).load_data(_slow_first(tmp_path))
    assert [d.metadata["capsa_label"] for d in docs] == ["0-slow.txt", "a.txt", "b.txt", "c.txt"]


def test_directory_reader_unordered_streams_a_walked_folder_as_files_finish(
        tmp_path: Path, gated: Any) -> None:
    _slow_first(tmp_path)
    reader = CapsaDirectoryReader(tmp_path, reader=CapsaReader(extractor=gated), workers=2,
                                  ordered=False)
    arrived: list[str] = []
    for document in reader.lazy_load_data():
        arrived.append(document.metadata["file_name"])
        if len(arrived) == 3:
            gated.release.set()
    assert arrived == ["a.txt", "b.txt", "c.txt", "0-slow.txt"]


def test_directory_reader_keeps_the_sorted_walk_order_by_default(
        tmp_path: Path, gated: Any) -> None:
    _slow_first(tmp_path)
    threading.Timer(0.3, gated.release.set).start()
    reader = CapsaDirectoryReader(tmp_path, reader=CapsaReader(extractor=gated, workers=2))
    assert [d.metadata["file_name"] for d in reader.load_data()] == [
        "0-slow.txt", "a.txt", "b.txt", "c.txt"]


async def test_reader_aload_data_parses_workers_files_at_once(tmp_path: Path) -> None:
    class Together(PlainTextExtractor):
        barrier = threading.Barrier(3, timeout=10)

        def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                    max_pages: int) -> str:
            self.barrier.wait()  # broken (an omission) unless three parse at once
            return super().extract(kind, media_type, payload, max_pages=max_pages)

    for name in "abc":
        (tmp_path / f"{name}.txt").write_text(name)
    reader = CapsaReader(extractor=Together(), workers=3)
    docs = await reader.aload_data([tmp_path / f"{name}.txt" for name in "abc"])
    assert [d.text for d in docs] == ["a", "b", "c"]
    assert reader.omitted == []


def test_reader_omission_names_the_refused_attachment_and_its_parent(
        tmp_path: Path, photo_mail: Any) -> None:
    mail = tmp_path / "message.txt"
    mail.write_bytes(b"MAIL:Here is my new profile photo.")
    reader = CapsaReader(extractor=photo_mail)
    assert [d.metadata["capsa_label"] for d in reader.load_data(mail)] == ["message.txt"]
    (omission,) = reader.omitted
    assert (omission.label, omission.parent, omission.source) == (
        "message.txt/profilephoto.png", "message.txt", str(mail))
    assert display_name(omission) == f"profilephoto.png in {mail}"
