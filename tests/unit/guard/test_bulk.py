"""`extract_many`: a whole store through the guard, one outcome per file, resumable."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from capsa.guard import Extracted, ExtractionLimits, Omission, Skipped, extract_many
from capsa.guard.extractors import PlainTextExtractor

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


class FailsOnce:
    """Runs out of memory on ``b"flaky"`` until told to recover; decodes everything else."""

    kinds = PlainTextExtractor.kinds
    recovered = False

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        if payload == b"flaky" and not self.recovered:
            raise MemoryError
        return payload.decode()


def outcomes(sources: Iterable[Any], **kwargs: Any) -> dict[str, Extracted | Omission | Skipped]:
    options: dict[str, Any] = {"extractor": PlainTextExtractor(), "workers": 2, **kwargs}
    found = list(extract_many(sources, **options))
    by_label = {outcome.label: outcome for outcome in found}
    assert len(by_label) == len(found), "every label appears once in these tests"
    return by_label


def test_extract_many_yields_one_outcome_per_pair() -> None:
    result = outcomes([("a.txt", b"alpha"), ("b.txt", b""), ("c.md", b"# gamma")])

    assert {label: type(o).__name__ for label, o in result.items()} == {
        "a.txt": "Extracted", "b.txt": "Omission", "c.md": "Extracted"}


def test_extract_many_walks_directories_and_reads_paths(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha")
    (tree / "sub" / "b.csv").write_text("x,y\n1,2\n")
    single = tmp_path / "single.txt"
    single.write_text("single")

    result = outcomes([tree, str(single)])

    assert sorted(result) == ["a.txt", "b.csv", "single.txt"]
    assert all(isinstance(o, Extracted) for o in result.values())


def test_extract_many_declares_a_type_from_the_extension_and_checks_it() -> None:
    result = outcomes([("report.pdf", PNG)])

    omission = result["report.pdf"]
    assert isinstance(omission, Omission)
    assert (omission.stage, omission.reason) == ("sniff", "type_mismatch")


def test_extract_many_refuses_an_oversized_path_without_reading_it(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * 101)

    result = outcomes([tmp_path], limits=ExtractionLimits(max_bytes=100))

    omission = result["big.txt"]
    assert isinstance(omission, Omission)
    assert (omission.reason, omission.detail) == ("too_large", "101 bytes, over the limit of 100")


def test_extract_many_reports_an_unreadable_path_as_an_omission(tmp_path: Path) -> None:
    result = outcomes([tmp_path / "missing.txt"])

    omission = result["missing.txt"]
    assert isinstance(omission, Omission)
    assert omission.reason == "corrupt"
    assert "could not read the file" in omission.detail


def test_extract_many_refuses_fewer_than_one_worker() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        list(extract_many([("a.txt", b"a")], workers=0, extractor=PlainTextExtractor()))


def test_extract_many_records_every_outcome_in_the_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "run.jsonl"

    outcomes([("a.txt", b"alpha"), ("b.txt", b"")], manifest=manifest)

    entries = sorted((json.loads(line) for line in manifest.read_text().splitlines()),
                     key=lambda e: e["label"])
    assert [(e["label"], e["outcome"], e.get("reason")) for e in entries] == [
        ("a.txt", "extracted", None), ("b.txt", "omitted", "empty")]


def test_extract_many_rerun_skips_finished_files_and_retries_parser_losses(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "run.jsonl"
    extractor = FailsOnce()
    sources = [("done.txt", b"done"), ("empty.txt", b""), ("flaky.txt", b"flaky")]
    first = outcomes(sources, manifest=manifest, extractor=extractor)
    extractor.recovered = True

    second = outcomes(sources, manifest=manifest, extractor=extractor)

    assert isinstance(first["flaky.txt"], Omission)
    assert first["flaky.txt"].reason == "memory_limit"
    assert {label: type(o).__name__ for label, o in second.items()} == {
        "done.txt": "Skipped", "empty.txt": "Skipped", "flaky.txt": "Extracted"}
    skipped = second["empty.txt"]
    assert isinstance(skipped, Skipped)
    assert skipped.previous == "omitted"


def test_extract_many_ignores_a_manifest_line_cut_by_a_crash(tmp_path: Path) -> None:
    manifest = tmp_path / "run.jsonl"
    outcomes([("a.txt", b"alpha")], manifest=manifest)
    with manifest.open("a") as handle:
        handle.write('{"sha256": "abc", "lab')

    second = outcomes([("a.txt", b"alpha")], manifest=manifest)

    assert isinstance(second["a.txt"], Skipped)
