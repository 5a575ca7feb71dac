"""extract_many: one outcome per input, bounded look-ahead, a manifest that resumes."""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.guard import (
    EmbeddedFile,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    Omission,
    Parsed,
    Skipped,
    extract_many,
)
from capsa.guard.bulk import BulkSource, default_width, display_name, map_streaming, pool_width
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.testing import MisbehavingExtractor

_QUICK = ExtractionLimits(timeout_s=1, cpu_s=5)


class _CountingExtractor:
    """Plain text, slowly enough that the feeder could run ahead if it were allowed to."""

    kinds = PlainTextExtractor.kinds

    def __init__(self) -> None:
        self.finished = 0
        self.lock = threading.Lock()

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        time.sleep(0.005)
        with self.lock:
            self.finished += 1
        return payload.decode()


class _FailsOnce:
    """Runs out of memory on ``b"flaky"`` until told to recover; decodes everything else."""

    kinds = PlainTextExtractor.kinds
    recovered = False

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        if payload == b"flaky" and not self.recovered:
            raise MemoryError
        return payload.decode()


def _labels(outcomes: list[Extracted | Omission | Skipped]) -> Counter[str]:
    return Counter(o.label for o in outcomes)


def test_extract_many_gives_every_input_exactly_one_outcome() -> None:
    sources: list[BulkSource] = [(f"f{i}.txt", f"file {i}".encode()) for i in range(30)]
    sources += [("empty.txt", b""), ("image.pdf", b"\x89PNG\r\n\x1a\n...."), ("bin.dat", b"\0" * 9)]
    outcomes = list(extract_many(sources, workers=3, extractor=PlainTextExtractor()))
    assert _labels(outcomes) == Counter(name for name, _ in sources)
    reasons = {o.label: o.reason for o in outcomes if isinstance(o, Omission)}
    assert reasons == {"empty.txt": "empty", "image.pdf": "type_mismatch",
                       "bin.dat": "unsupported_type"}


def test_one_worker_streams_its_outcomes_in_input_order() -> None:
    # With one worker the next file is read while this one parses, so two can
    # finish before the stream looks: they must still come out as they went in
    # (the CLI's set-wide ceiling then omits the same, last, files every run).
    sources = [(f"f{i:02d}.txt", f"file {i}".encode()) for i in range(60)]
    for _ in range(3):
        outcomes = list(extract_many(sources, workers=1, extractor=PlainTextExtractor()))
        assert [o.label for o in outcomes] == [name for name, _ in sources]


def test_extract_many_attributes_each_text_to_its_own_file() -> None:
    sources = [(f"f{i}.txt", f"token-{i}".encode()) for i in range(40)]
    for outcome in extract_many(sources, workers=4, extractor=PlainTextExtractor()):
        assert isinstance(outcome, Extracted)
        assert outcome.text == f"token-{outcome.label[1:-4]}"


@pytest.mark.parametrize("workers", [1, 3])
def test_extract_many_pulls_at_most_twice_workers_sources_ahead(workers: int) -> None:
    extractor = _CountingExtractor()
    pulled = 0
    ahead: list[int] = []

    def sources() -> Iterator[tuple[str, bytes]]:
        nonlocal pulled
        for i in range(60):
            ahead.append(pulled - extractor.finished)
            pulled += 1
            yield f"f{i}.txt", b"x" * 100

    first_seen_at = None
    for outcome in extract_many(sources(), workers=workers, extractor=extractor):
        assert isinstance(outcome, Extracted)
        if first_seen_at is None:
            first_seen_at = pulled
    assert max(ahead) <= 2 * workers
    assert first_seen_at is not None and first_seen_at <= 2 * workers + 1
    assert extractor.finished == 60


def test_extract_many_walks_directories(tmp_path: Path) -> None:
    (tmp_path / "inbox" / "deeper").mkdir(parents=True)
    (tmp_path / "inbox" / "a.txt").write_text("alpha")
    (tmp_path / "inbox" / "deeper" / "b.md").write_text("# beta")
    (tmp_path / "loose.csv").write_text("x,y\n1,2\n")
    outcomes = list(extract_many([tmp_path / "inbox", str(tmp_path / "loose.csv")], workers=2,
                                 extractor=PlainTextExtractor()))
    assert sorted((o.label, o.kind) for o in outcomes if isinstance(o, Extracted)) == [
        ("a.txt", "text"), ("b.md", "markdown"), ("loose.csv", "csv")]


def _dotted(folder: Path) -> Path:
    """A project folder with a repository's config and an environment file beside a document."""
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("url = https://user:token@example.com/r.git")
    (folder / ".env").write_text("API_KEY=sk-secret")
    (folder / "notes.txt").write_text("alpha")
    return folder


def test_extract_many_skips_dot_files_and_folders_in_a_walk_unless_asked(tmp_path: Path) -> None:
    folder = _dotted(tmp_path / "project")

    walked = list(extract_many([folder], workers=1, extractor=PlainTextExtractor()))
    everything = list(extract_many([folder], workers=1, extractor=PlainTextExtractor(),
                                   hidden=True))
    named = list(extract_many([folder / ".env"], workers=1, extractor=PlainTextExtractor()))

    assert [o.label for o in walked] == ["notes.txt"]
    assert sorted(o.label for o in everything) == [".env", "config", "notes.txt"]
    assert [o.label for o in named] == [".env"]  # a path given by name is read


def test_extract_many_reports_an_unreadable_path_as_an_omission(tmp_path: Path) -> None:
    (outcome,) = extract_many([tmp_path / "missing.txt"], workers=1,
                              extractor=PlainTextExtractor())
    assert isinstance(outcome, Omission)
    assert (outcome.label, outcome.stage, outcome.reason) == ("missing.txt", "size", "corrupt")
    assert "could not read" in outcome.detail


def test_extract_many_refuses_an_oversized_path_before_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 2048)
    (outcome,) = extract_many([big], workers=1, extractor=PlainTextExtractor(),
                              limits=ExtractionLimits(max_bytes=1024))
    assert isinstance(outcome, Omission)
    assert (outcome.reason, outcome.detail) == ("too_large", "2048 bytes, over the limit of 1024")


def test_extract_many_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    outcomes: list[Extracted | Omission | Skipped] = []
    worker = threading.Thread(target=lambda: outcomes.extend(
        extract_many([fifo], workers=1, extractor=PlainTextExtractor())), daemon=True)
    worker.start()
    worker.join(timeout=3)
    blocked = worker.is_alive()
    if blocked:  # release the reader so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=5)
    assert not blocked
    assert len(outcomes) == 1 and isinstance(outcomes[0], Omission)


def test_extract_many_rejects_fewer_than_one_worker() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        list(extract_many([("a.txt", b"a")], workers=0, extractor=PlainTextExtractor()))


def test_manifest_rerun_skips_what_was_extracted_or_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    sources = [("a.txt", b"alpha"), ("b.txt", b"beta"), ("empty.txt", b"")]
    first = list(extract_many(sources, workers=2, extractor=PlainTextExtractor(),
                              manifest=manifest))
    assert all(not isinstance(o, Skipped) for o in first)
    second = list(extract_many(sources, workers=2, extractor=PlainTextExtractor(),
                               manifest=manifest))
    assert all(isinstance(o, Skipped) for o in second)
    assert {(o.label, o.previous) for o in second if isinstance(o, Skipped)} == {
        ("a.txt", "extracted"), ("b.txt", "extracted"), ("empty.txt", "omitted")}
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert len(lines) == 3


def test_manifest_records_every_outcome_with_its_reason(tmp_path: Path) -> None:
    manifest = tmp_path / "run.jsonl"
    list(extract_many([("a.txt", b"alpha"), ("b.txt", b"")], workers=2,
                      extractor=PlainTextExtractor(), manifest=manifest))
    entries = sorted((json.loads(line) for line in manifest.read_text().splitlines()),
                     key=lambda e: e["label"])
    assert [(e["label"], e["outcome"], e.get("reason"), e.get("stage")) for e in entries] == [
        ("a.txt", "extracted", None, None), ("b.txt", "omitted", "empty", "size")]


def test_manifest_rerun_retries_a_parser_that_ran_out_of_memory(tmp_path: Path) -> None:
    manifest = tmp_path / "run.jsonl"
    extractor = _FailsOnce()
    sources = [("done.txt", b"done"), ("flaky.txt", b"flaky")]
    first = {o.label: o for o in extract_many(sources, workers=2, extractor=extractor,
                                              manifest=manifest)}
    extractor.recovered = True
    second = {o.label: o for o in extract_many(sources, workers=2, extractor=extractor,
                                               manifest=manifest)}
    flaky = first["flaky.txt"]
    assert isinstance(flaky, Omission) and flaky.reason == "memory_limit"
    assert {label: type(o).__name__ for label, o in second.items()} == {
        "done.txt": "Skipped", "flaky.txt": "Extracted"}


def test_manifest_lines_that_are_not_records_are_ignored(tmp_path: Path) -> None:
    manifest = tmp_path / "run.jsonl"
    list(extract_many([("a.txt", b"alpha")], extractor=PlainTextExtractor(), manifest=manifest))
    with manifest.open("a") as handle:
        handle.write('123\n["list"]\n{"outcome": "extracted"}\n{"sha256": "abc", "lab')
    (again,) = extract_many([("a.txt", b"alpha")], extractor=PlainTextExtractor(),
                            manifest=manifest)
    assert isinstance(again, Skipped)


def test_manifest_inside_the_walked_directory_is_not_extracted(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    manifest = tmp_path / "manifest.jsonl"
    first = list(extract_many([tmp_path], extractor=PlainTextExtractor(), manifest=manifest))
    second = list(extract_many([tmp_path], extractor=PlainTextExtractor(), manifest=manifest))
    assert [o.label for o in first] == ["a.txt"]
    assert [(o.label, type(o).__name__) for o in second] == [("a.txt", "Skipped")]


def test_manifest_rerun_skips_by_content_not_by_name(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    list(extract_many([("a.txt", b"alpha")], extractor=PlainTextExtractor(), manifest=manifest))
    (renamed,) = extract_many([("renamed.txt", b"alpha")], extractor=PlainTextExtractor(),
                              manifest=manifest)
    (changed,) = extract_many([("a.txt", b"alpha, edited")], extractor=PlainTextExtractor(),
                              manifest=manifest)
    assert isinstance(renamed, Skipped) and renamed.label == "renamed.txt"
    assert isinstance(changed, Extracted)


@pytest.mark.slow
def test_manifest_rerun_retries_a_file_whose_parser_timed_out(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    sources = [("good.txt", b"echo: good"), ("slow.txt", b"takes forever")]
    with IsolatedExtractor(MisbehavingExtractor("sleep"), limits=_QUICK) as sleepy:
        first = {o.label: o for o in extract_many(sources, workers=1, limits=_QUICK,
                                                  extractor=sleepy, manifest=manifest)}
    slow = first["slow.txt"]
    assert isinstance(slow, Omission) and slow.reason == "timeout"
    assert isinstance(first["good.txt"], Extracted)
    with IsolatedExtractor(MisbehavingExtractor("echo"), limits=_QUICK) as healthy:
        second = {o.label: o for o in extract_many(sources, workers=1, limits=_QUICK,
                                                   extractor=healthy, manifest=manifest)}
    assert isinstance(second["good.txt"], Skipped)
    retried = second["slow.txt"]
    assert isinstance(retried, Extracted) and retried.text == "takes forever"
    with IsolatedExtractor(MisbehavingExtractor("echo"), limits=_QUICK) as healthy:
        third = list(extract_many(sources, workers=1, limits=_QUICK, extractor=healthy,
                                  manifest=manifest))
    assert all(isinstance(o, Skipped) for o in third)


def test_manifest_with_a_line_cut_by_a_crash_redoes_only_that_file(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    sources = [("a.txt", b"alpha"), ("b.txt", b"beta")]
    list(extract_many(sources, workers=1, extractor=PlainTextExtractor(), manifest=manifest))
    lines = manifest.read_text().splitlines()
    cut = next(line for line in lines if '"b.txt"' in line)
    kept = next(line for line in lines if '"a.txt"' in line)
    manifest.write_text(kept + "\n" + cut[: len(cut) // 2])
    again = {o.label: type(o).__name__ for o in extract_many(
        sources, workers=1, extractor=PlainTextExtractor(), manifest=manifest)}
    assert again == {"a.txt": "Skipped", "b.txt": "Extracted"}


@pytest.mark.slow
def test_extract_many_closes_its_own_pool_when_the_caller_stops_early(tmp_path: Path) -> None:
    for i in range(6):  # HTML: plain text would take the light path and start no worker
        (tmp_path / f"f{i}.html").write_text(f"<html><body><p>file {i}</p></body></html>")
    before = _worker_processes()
    outcomes = extract_many([tmp_path], workers=1)
    first = next(outcomes)
    assert isinstance(first, Extracted)
    assert len(_worker_processes()) > len(before)
    outcomes.close()
    deadline = time.monotonic() + 10
    while _worker_processes() != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _worker_processes() == before


def _worker_processes() -> set[int]:
    """Live capsa extraction workers started by this process."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = next(line for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent.split()[1]) == os.getpid() and b"capsa.guard.sandbox.zygote" in cmdline:
            found.add(int(entry))
    return found


@pytest.mark.slow
def test_extract_many_on_a_shared_pool_survives_a_worker_killed_mid_file() -> None:
    limits = ExtractionLimits(timeout_s=5, cpu_s=10)
    sources = [("slow.txt", b"slow"), ("quick.txt", b"echo: quick")]
    with IsolatedExtractor(MisbehavingExtractor("sleep"), workers=1, limits=limits) as pool:
        outcomes: list[Extracted | Omission | Skipped] = []
        feeder = threading.Thread(target=lambda: outcomes.extend(
            extract_many(sources, workers=2, limits=limits, extractor=pool)), daemon=True)
        feeder.start()
        time.sleep(1.0)  # slow.txt is in the worker; quick.txt waits for it
        os.kill(pool._all[0].process.pid, 9)
        feeder.join(timeout=10)
        stuck = feeder.is_alive()
        if stuck:  # hand the waiting thread a worker so the test can end
            pool._idle.put(pool._acquire())
            feeder.join(timeout=30)
    assert not stuck
    assert {o.label: type(o).__name__ for o in outcomes} == {"slow.txt": "Omission",
                                                             "quick.txt": "Extracted"}


def test_extract_many_does_not_follow_symlinks_found_in_a_walk(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the key is hunter2")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "note.txt").write_text("hello")
    (inbox / "link.txt").symlink_to(secret)
    (inbox / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    outcomes = list(extract_many([inbox], extractor=PlainTextExtractor(), workers=1))
    by_label = {o.label: o for o in outcomes}
    assert set(by_label) == {"note.txt", "link.txt", "dangling.txt"}
    assert isinstance(by_label["note.txt"], Extracted)
    for name in ("link.txt", "dangling.txt"):
        omission = by_label[name]
        assert isinstance(omission, Omission)
        assert omission.reason == "symlink"
    assert all("hunter2" not in getattr(o, "text", "") for o in outcomes)


def test_extract_many_outcomes_name_the_path_they_came_from(tmp_path: Path) -> None:
    for folder in ("q1", "q2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "report.txt").write_text(f"report for {folder}")
    (tmp_path / "q2" / "empty.txt").write_bytes(b"")
    outcomes = list(extract_many([tmp_path, ("given.txt", b"bytes")],
                                 extractor=PlainTextExtractor(), workers=1))
    sources = {o.source: o for o in outcomes}
    assert set(sources) == {str(tmp_path / "q1" / "report.txt"),
                            str(tmp_path / "q2" / "report.txt"),
                            str(tmp_path / "q2" / "empty.txt"), None}
    assert isinstance(sources[None], Extracted)
    assert sources[None].label == "given.txt"
    first = sources[str(tmp_path / "q1" / "report.txt")]
    assert isinstance(first, Extracted)
    assert first.text == "report for q1"
    assert isinstance(sources[str(tmp_path / "q2" / "empty.txt")], Omission)


# the ingestion preset, and files found inside files


def test_extract_many_defaults_to_the_ingestion_preset() -> None:
    (outcome,) = extract_many([("long.txt", b"word " * 20_000)],
                              extractor=PlainTextExtractor(), workers=1)

    assert isinstance(outcome, Extracted)


class _Wrapper:
    """A trusted test parser: ``WRAP:`` files hold one embedded text file."""

    kinds = frozenset({"text"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        if not payload.startswith(b"WRAP:"):
            return payload.decode()
        inner = EmbeddedFile(name="../inner.txt", media_type="text/plain", payload=payload[5:])
        return Parsed("wrapper text", embedded=(inner,))


def test_extract_many_yields_files_found_inside_a_file_after_it_with_its_source(
        tmp_path: Path) -> None:
    path = tmp_path / "outer.txt"
    path.write_bytes(b"WRAP:inner words")

    outcomes = list(extract_many([path], extractor=_Wrapper(), workers=1))

    assert [(o.label, o.parent, o.source) for o in outcomes] == [
        ("outer.txt", None, str(path)), ("outer.txt/inner.txt", "outer.txt", str(path))]
    assert [o.text for o in outcomes] == [  # type: ignore[union-attr]
        "wrapper text\n\nAttached:\n- inner.txt (11 bytes, text/plain; extracted separately)",
        "inner words"]


class _Gated(PlainTextExtractor):
    """Plain text; the payload ``b"slow"`` waits until `release` is set (at most 10 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        if payload == b"slow":
            self.release.wait(10)
        return super().extract(kind, media_type, payload, max_pages=max_pages)


_SLOW_FIRST: list[BulkSource] = [("slow.txt", b"slow"), ("a.txt", b"alpha"),
                                 ("b.txt", b"beta"), ("c.txt", b"gamma")]


def test_extract_many_yields_other_files_while_a_slow_first_file_parses() -> None:
    gated = _Gated()
    arrived: list[str] = []
    for outcome in extract_many(_SLOW_FIRST, extractor=gated, workers=2):
        arrived.append(outcome.label)
        if len(arrived) == 3:
            gated.release.set()  # only now may the slow file finish
    assert arrived == ["a.txt", "b.txt", "c.txt", "slow.txt"]


def test_extract_many_ordered_keeps_input_order_behind_a_slow_file() -> None:
    gated = _Gated()
    threading.Timer(0.3, gated.release.set).start()
    outcomes = list(extract_many(_SLOW_FIRST, extractor=gated, workers=2, ordered=True))
    assert [o.label for o in outcomes] == ["slow.txt", "a.txt", "b.txt", "c.txt"]


def test_extract_many_ordered_parses_the_files_behind_a_slow_one_meanwhile() -> None:
    gated = _Gated()
    parsed: list[str] = []

    def sources() -> Iterator[tuple[str, bytes]]:
        yield "slow.txt", b"slow"
        for i in range(6):
            yield f"f{i}.txt", f"file {i}".encode()
        gated.release.set()  # every other file was pulled while the slow one still parses

    for outcome in extract_many(sources(), extractor=gated, workers=2, ordered=True):
        parsed.append(outcome.label)
    assert parsed == ["slow.txt", *(f"f{i}.txt" for i in range(6))]


def test_pool_width_is_the_pools_worker_count_and_one_in_process() -> None:
    assert pool_width(IsolatedExtractor(PlainTextExtractor(), workers=3)) == 3
    assert pool_width(None) == default_width()
    assert pool_width(PlainTextExtractor()) == 1


@pytest.mark.parametrize("ordered", [False, True])
def test_map_streaming_raises_the_error_of_an_item_where_its_result_would_come(
        ordered: bool) -> None:
    def work(index: int, item: int) -> int:
        if item == 3:
            raise KeyError(item)
        return item

    seen: list[int] = []
    stream = map_streaming(work, range(6), workers=2, ordered=ordered)
    with pytest.raises(KeyError):
        seen.extend(stream)
    assert set(seen) <= {0, 1, 2, 4, 5} and (not ordered or seen == [0, 1, 2])


def test_map_streaming_with_one_worker_runs_in_the_callers_thread_reading_nothing_ahead(
        ) -> None:
    pulled: list[int] = []
    threads: set[int] = set()

    def items() -> Iterator[int]:
        for i in range(4):
            pulled.append(i)
            yield i

    for result in map_streaming(lambda index, item: threads.add(threading.get_ident()) or item,
                                items(), workers=1):
        assert pulled[-1] == result  # nothing was pulled past the item just yielded
    assert threads == {threading.get_ident()}


def test_map_streaming_closed_early_cancels_work_not_yet_started() -> None:
    started: list[int] = []

    def work(index: int, item: int) -> int:
        started.append(item)
        time.sleep(0.01)
        return item

    stream = map_streaming(work, range(100), workers=2)
    assert next(stream) in (0, 1)
    stream.close()
    assert len(started) <= 4  # the window, never the whole input


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=12),
       st.integers(min_value=1, max_value=4), st.booleans())
@settings(max_examples=25, deadline=None)
def test_map_streaming_yields_each_result_once_and_in_input_order_when_ordered(
        delays: list[int], workers: int, ordered: bool) -> None:
    def work(index: int, delay: int) -> int:
        time.sleep(delay / 1000)
        return index

    results = list(map_streaming(work, delays, workers=workers, ordered=ordered))
    assert sorted(results) == list(range(len(delays)))
    if ordered:
        assert results == list(range(len(delays)))


def test_display_name_names_a_refused_attachment_inside_its_parents() -> None:
    nested = Omission(label="mail.eml/fwd.eml/photo.png", parent="mail.eml/fwd.eml",
                      stage="text", reason="no_text", detail="the parser found no text",
                      source="inbox/mail.eml")
    assert display_name(nested) == "photo.png in fwd.eml in inbox/mail.eml"
    assert display_name(nested.model_copy(update={"source": None})) == \
        "photo.png in fwd.eml in mail.eml"


def test_map_streaming_runs_each_item_in_the_callers_context() -> None:
    tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")
    tenant.set("acme")
    seen = list(map_streaming(lambda index, item: tenant.get(), range(6), workers=3))
    assert seen == ["acme"] * 6
