"""extract_bag and `capsa extract --dask` on a real two-worker LocalCluster (loopback only)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capsa.cli import main
from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES

distributed = pytest.importorskip("distributed")
dask_bag = pytest.importorskip("dask.bag")

from capsa.guard.dask import extract_bag  # noqa: E402 - needs the dask extra

pytestmark = [pytest.mark.enable_socket, pytest.mark.slow, pytest.mark.timeout(600)]

_REFUSED = {"quarterly-report.docx": "archive_ratio", "invoice.pdf": "type_mismatch"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as local:
        yield local


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster) as connected:
        yield connected


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name in [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]:
        (folder / name).write_bytes((CORPUS_DIR / name).read_bytes())
    return folder


def _paths(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def test_extract_bag_gives_each_corpus_file_exactly_one_record(client: Any, corpus: Path) -> None:
    records = extract_bag(_paths(corpus), client=client, npartitions=4).compute()
    assert Counter(r["label"] for r in records) == Counter(p.name for p in _paths(corpus))
    extracted = {r["label"] for r in records if r["outcome"] == "extracted"}
    assert extracted == {d.name for d in DOCUMENTS}
    omitted = {r["label"]: r["reason"] for r in records if r["outcome"] == "omitted"}
    assert omitted == _REFUSED


def test_extract_bag_gives_each_dask_worker_its_own_parser_pool(client: Any,
                                                                corpus: Path) -> None:
    records = extract_bag(_paths(corpus), client=client,
                          npartitions=len(_paths(corpus))).compute()
    assert len(records) == len(_paths(corpus))
    pools = client.run(lambda: (__import__("os").getpid(), sorted(
        key[0] for key in __import__("capsa.guard.pools", fromlist=["_POOLS"])._POOLS)))
    assert len(pools) == 2
    assert all(owners == [pid] for pid, owners in pools.values())


def test_extract_bag_accepts_a_bag_of_paths(client: Any, corpus: Path) -> None:
    paths = dask_bag.from_sequence([str(p) for p in _paths(corpus)], npartitions=3)
    records = extract_bag(paths, client=client).compute()
    assert sorted(r["label"] for r in records) == sorted(p.name for p in _paths(corpus))


def test_extract_bag_records_carry_the_text_and_its_digest(client: Any, corpus: Path) -> None:
    (record,) = extract_bag([corpus / "remote-work.md"], client=client).compute()
    assert record["outcome"] == "extracted"
    assert record["kind"] == "markdown"
    assert "20 working days" in record["text"]
    assert len(record["sha256"]) == 64


def test_extract_bag_is_lazy_without_a_client(client: Any, corpus: Path) -> None:
    bag = extract_bag([corpus / "remote-work.md", corpus / "invoice.pdf"])
    assert isinstance(bag, dask_bag.Bag)
    records = bag.compute()  # the active client is the default scheduler
    assert {r["label"]: r["outcome"] for r in records} == {
        "remote-work.md": "extracted", "invoice.pdf": "omitted"}


def test_cli_extract_on_dask_writes_one_line_per_good_file(cluster: Any, corpus: Path,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    status = main(["extract", str(corpus), "--dask", cluster.scheduler_address,
                   "--out", str(out)])
    assert status == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    extracted = [line for line in lines if line["outcome"] == "extracted"]
    assert sorted(line["label"] for line in extracted) == sorted(d.name for d in DOCUMENTS)
    assert all(line["id"] == line["sha256"] for line in extracted)


def test_cli_extract_on_dask_strict_fails_when_a_file_was_omitted(cluster: Any, corpus: Path,
                                                                  tmp_path: Path) -> None:
    status = main(["extract", str(corpus / "invoice.pdf"), "--dask", cluster.scheduler_address,
                   "--strict", "--out", str(tmp_path / "none.jsonl")])
    assert status == 2


def test_extract_bag_runs_the_extractor_it_was_given(client: Any, corpus: Path) -> None:
    from capsa.guard.extractors import PlainTextExtractor, Router

    text_only = Router([PlainTextExtractor()])
    records = extract_bag([corpus / "remote-work.md", corpus / "travel-policy.pdf"],
                          client=client, extractor=text_only).compute()
    outcomes = {r["label"]: (r["outcome"], r.get("reason")) for r in records}
    assert outcomes == {"remote-work.md": ("extracted", None),
                        "travel-policy.pdf": ("omitted", "unsupported_type")}


def test_extract_bag_defaults_to_the_ingestion_limits(client: Any, tmp_path: Path) -> None:
    long_text = tmp_path / "long.txt"
    long_text.write_text("word " * 20_000)  # over the attachment preset's 50,000 characters
    (record,) = extract_bag([long_text], client=client).compute()
    assert record["outcome"] == "extracted"


def test_extract_bag_walks_a_directory_and_refuses_the_links_it_meets(
        client: Any, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("alpha")
    (tmp_path / "link.txt").symlink_to(tmp_path / "sub" / "a.txt")
    records = extract_bag([tmp_path], client=client).compute()
    outcomes = {r["source"]: (r["outcome"], r.get("reason")) for r in records}
    assert outcomes == {str(tmp_path / "sub" / "a.txt"): ("extracted", None),
                        str(tmp_path / "link.txt"): ("omitted", "symlink")}


def test_extract_bag_resumes_from_a_manifest(client: Any, corpus: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    paths = [corpus / "remote-work.md", corpus / "invoice.pdf"]
    first = extract_bag(paths, client=client, manifest=manifest).compute()
    again = extract_bag(paths, client=client, manifest=manifest).compute()
    assert sorted(r["outcome"] for r in first) == ["extracted", "omitted"]
    assert {r["label"]: (r["outcome"], r.get("previous")) for r in again} == {
        "remote-work.md": ("skipped", "extracted"), "invoice.pdf": ("skipped", "omitted")}


def test_cli_extract_on_dask_writes_omissions_as_json_lines(cluster: Any, corpus: Path,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    main(["extract", str(corpus / "invoice.pdf"), "--dask", cluster.scheduler_address,
          "--out", str(out)])
    (line,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (line["outcome"], line["reason"], line["source"]) == (
        "omitted", "type_mismatch", str(corpus / "invoice.pdf"))


def test_extract_bag_skips_dot_files_in_a_walk_unless_asked(tmp_path: Path) -> None:
    from capsa.guard.extractors import PlainTextExtractor

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("url = https://user:token@example.com/r.git")
    (tmp_path / ".env").write_text("API_KEY=sk-secret")
    (tmp_path / "notes.txt").write_text("alpha")

    def labels(**options: Any) -> list[str]:
        records = extract_bag([tmp_path], extractor=PlainTextExtractor(),
                              **options).compute(scheduler="sync")
        return sorted(r["label"] for r in records)

    assert labels() == ["notes.txt"]
    assert labels(hidden=True) == [".env", "config", "notes.txt"]
