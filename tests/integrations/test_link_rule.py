"""One link rule at every entry point that reads a folder.

The folder holds a file, a link to a file inside it, a link to a file
outside it (a stand-in for ``/etc/hostname``) and a link to a folder outside
it. By default every link is refused as ``symlink``; ``within_root`` reads the
inside link only; ``follow`` reads them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader

from capsa.cli import main
from capsa.guard import Extracted, Omission, extract_many
from capsa.guard.extractors import PlainTextExtractor
from capsa.langchain import CapsaLoader
from capsa.llama_index import CapsaDirectoryReader, CapsaReader

SECRET = "host secret"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "hostname.txt").write_text(SECRET)
    (outside / "deep" / "more.txt").write_text(SECRET)
    root = tmp_path / "inbox"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    (root / "inside.txt").symlink_to(root / "a.txt")
    (root / "outside.txt").symlink_to(outside / "hostname.txt")
    (root / "elsewhere").symlink_to(outside / "deep")
    return root


def _loader(root: Path, rule: str) -> tuple[list[str], list[tuple[str, str]]]:
    loader = CapsaLoader(root, extractor=PlainTextExtractor(), symlinks=rule, recursive=True)
    texts = [d.page_content for d in loader.load()]
    return texts, [(o.label, o.reason) for o in loader.omitted]


def _bulk(root: Path, rule: str) -> tuple[list[str], list[tuple[str, str]]]:
    outcomes = list(extract_many([root], extractor=PlainTextExtractor(), workers=1,
                                 symlinks=rule))  # type: ignore[arg-type]
    return ([o.text for o in outcomes if isinstance(o, Extracted)],
            [(o.label, o.reason) for o in outcomes if isinstance(o, Omission)])


def _simple_directory_reader(root: Path, rule: str) -> tuple[list[str], list[tuple[str, str]]]:
    reader = CapsaReader(extractor=PlainTextExtractor(), symlinks=rule, root=str(root))
    docs = SimpleDirectoryReader(str(root), recursive=True,
                                 file_extractor={".txt": reader}).load_data()
    return [d.text for d in docs], [(o.label, o.reason) for o in reader.omitted]


def _directory_reader(root: Path, rule: str) -> tuple[list[str], list[tuple[str, str]]]:
    reader = CapsaDirectoryReader(root, symlinks=rule,
                                  reader=CapsaReader(extractor=PlainTextExtractor()))
    docs = reader.load_data()
    return [d.text for d in docs], [(o.label, o.reason) for o in reader.omitted]


ENTRY_POINTS: dict[str, Callable[[Path, str], tuple[list[str], list[tuple[str, str]]]]] = {
    "CapsaLoader": _loader,
    "extract_many": _bulk,
    "CapsaReader under SimpleDirectoryReader": _simple_directory_reader,
    "CapsaDirectoryReader": _directory_reader,
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_links_are_refused_by_default(entry: str, folder: Path) -> None:
    texts, refused = ENTRY_POINTS[entry](folder, "refuse")
    assert SECRET not in " ".join(texts)
    assert texts == ["alpha"]
    assert ("inside.txt", "symlink") in refused and ("outside.txt", "symlink") in refused


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_within_root_follows_only_links_that_stay_inside(entry: str, folder: Path) -> None:
    texts, refused = ENTRY_POINTS[entry](folder, "within_root")
    assert SECRET not in " ".join(texts)
    assert texts == ["alpha", "alpha"]
    assert ("outside.txt", "symlink") in refused


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_follow_is_an_explicit_choice(entry: str, folder: Path) -> None:
    texts, _ = ENTRY_POINTS[entry](folder, "follow")
    assert SECRET in " ".join(texts)


@pytest.mark.slow
@pytest.mark.parametrize(("rule", "leaks"), [("refuse", False), ("follow", True)])
def test_capsa_extract_applies_the_same_rule(folder: Path, tmp_path: Path, rule: str,
                                             leaks: bool) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(folder), "--out", str(out), "--symlinks", rule,
                 "--workers", "1"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(SECRET in r.get("text", "") for r in records) is leaks
    if not leaks:
        assert {r["label"] for r in records if r.get("reason") == "symlink"} >= {
            "inside.txt", "outside.txt"}


def test_within_root_needs_a_root() -> None:
    with pytest.raises(ValueError, match="root"):
        CapsaReader(symlinks="within_root")


@pytest.mark.parametrize("swapped", ["file", "folder"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_link_swapped_in_after_the_walk_is_refused_not_followed(
        entry: str, swapped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A process that can write to the folder swaps the walked file, or a folder on the
    # way to it, for a link between the walk's check and the read.
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "a.txt").write_text(SECRET)
    root = tmp_path / "inbox"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("alpha")
    done: list[bool] = []

    def swap() -> None:
        if done:
            return
        done.append(True)
        (root / "sub" / "a.txt").unlink()
        if swapped == "file":
            (root / "sub" / "a.txt").symlink_to(outside / "sub" / "a.txt")
        else:
            (root / "sub").rmdir()
            (root / "sub").symlink_to(outside / "sub", target_is_directory=True)

    import capsa.guard.bulk
    import capsa.langchain.loaders
    import capsa.llama_index.readers

    for module in (capsa.guard.bulk, capsa.langchain.loaders, capsa.llama_index.readers):
        real = module.read_bounded

        def racing(*args: object, _real: Callable[..., bytes] = real, **kwargs: object) -> bytes:
            swap()
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, "read_bounded", racing)
    texts, refused = ENTRY_POINTS[entry](root, "refuse")
    assert done and SECRET not in " ".join(texts)
    assert ("a.txt", "symlink") in refused
