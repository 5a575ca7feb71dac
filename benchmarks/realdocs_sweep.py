"""A sweep of real documents that other projects left on this machine, through the guard.

The real-document set (``benchmarks/realdocs.py``) is mostly files made for it.
This sweep looks for files nobody made for capsa: Python's own e-mail and
codec test data, LibreOffice's templates, package documentation PDFs,
python-docx's and python-pptx's templates, Rust's and Debian's HTML manuals,
pictures with words in them. Each found file goes through

1. `extract_many` with its defaults (the ingestion preset), and
2. `extract_attachment` with the attachment preset,

through one shared `IsolatedExtractor`, and, where it is cheap, through its raw
parser alone (pypdf, Tesseract, unstructured's ``partition_*``: see
``benchmarks/realdocs.py``). Rows are written as JSON lines so anomalies can be
read off: an untyped exception, a refusal of a file the raw parser reads, much
less text than raw, replacement characters or mojibake.

Nothing is downloaded; files that are missing on this machine are skipped.
Compressed documentation (``*.pdf.gz``) is decompressed in memory and given
to the guard as ``(name, bytes)``; Python's test messages (``msg_NN.txt``)
are given both as the ``.txt`` they are and as ``.eml``, the name a mail
client would save them under; the legacy-encoded texts of Python's
``cjkencodings`` are compared with the UTF-8 twin beside each.

Run ``python benchmarks/realdocs_sweep.py [--out rows.jsonl] [--no-raw]``.
It asserts nothing and is not part of the test suite. The pool's workers import
capsa the way the interpreter's site-packages say (an editable install's ``.pth``
comes before ``PYTHONPATH`` there), so with another checkout on ``PYTHONPATH`` the
parent's steps (sniffing, decoding text) are that checkout's and the parsers' are
the installed one's.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import importlib.util
import json
import os
import re
import sys
import sysconfig
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_realdocs() -> Any:
    spec = importlib.util.spec_from_file_location("capsa_bench_realdocs", HERE / "realdocs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


realdocs = _load_realdocs()

PYTEST_DATA = os.path.join(sysconfig.get_paths()["stdlib"], "test")
"""The running Python's own test data (its e-mail and CJK-encoding samples), where the
interpreter ships it; Debian's python3 does not, and those groups are then skipped."""
VENV = sorted(glob.glob("/work/main/.venv/lib/python3*/site-packages"))
SITE = VENV[0] if VENV else "/nonexistent"
LO = "/usr/lib/libreoffice/share/template/common"
RUST = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"

GROUPS: dict[str, list[str]] = {
    "pdf": [
        "/usr/share/doc/libtasn1-doc/libtasn1.pdf",
        "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf",
        "/usr/lib/libreoffice/share/xpdfimport/xpdfimport_err.pdf",
        f"{SITE}/matplotlib/mpl-data/images/matplotlib.pdf",
        f"{SITE}/matplotlib/mpl-data/images/home.pdf",
        "/usr/share/doc/zlib1g-dev/crc-doc.1.0.pdf.gz",
        "/usr/share/doc/nettle-dev/nettle.pdf.gz",
        "/usr/share/doc/fontconfig/fontconfig-user.pdf.gz",
        "/usr/share/doc/bzip2/manual.pdf.gz",
        "/usr/share/doc/valgrind/valgrind_manual.pdf.gz",
    ],
    "ooxml": [
        f"{SITE}/docx/templates/default.docx",
        f"{SITE}/pptx/templates/default.pptx",
    ],
    "odf": [
        "/usr/lib/libreoffice/share/template/common/internal/idxexample.odt",
        "/usr/lib/libreoffice/program/opencl/cl-test.ods",
        "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/docutils/writers/odf_odt/styles.odt",
        f"{LO}/officorr/Modern_business_letter_serif.ott",
        f"{LO}/personal/CV.ott",
        f"{LO}/wizard/letter/bus-elegant_l.ott",
        f"{LO}/wizard/report/stl-01.ott",
        f"{LO}/wizard/styles/default.ots",
        f"{LO}/presnt/Focus.otp",
        f"{LO}/presnt/Vintage.otp",
        "/usr/lib/libreoffice/share/template/en-US/presnt/debian-presentation.otp",
    ],
    "legacy-office": [
        "/root/.pyenv/versions/2.7.18/lib/python2.7/pdb.doc",  # Python 2's pdb help: text
    ],
    "mail": [f"{PYTEST_DATA}/test_email/data/msg_{n:02d}.txt" for n in range(1, 48)]
    + [f"{PYTEST_DATA}/test_email/data/msg_12a.txt"],
    "text": [
        f"{PYTEST_DATA}/cjkencodings/{name}.txt" for name in (
            "big5", "big5hkscs", "cp949", "euc_jisx0213", "euc_jp", "euc_kr", "gb18030",
            "gb2312", "gbk", "hz", "iso2022_jp", "iso2022_kr", "johab", "shift_jis",
            "shift_jisx0213")
    ] + [
        f"{PYTEST_DATA}/tokenizedata/tokenize_tests-latin1-coding-cookie-and-utf8-bom-sig.txt",
        f"{PYTEST_DATA}/tokenizedata/tokenize_tests-utf8-coding-cookie-and-utf8-bom-sig.txt",
        "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/scipy/io/matlab/tests/data/japanese_utf8.txt",
        f"{SITE}/spacy/tests/tokenizer/sun.txt",
        "/usr/share/tcltk/tk8.6/msgs/el.msg",  # Tcl message catalogues: text named .msg
        "/usr/share/tcltk/tk8.6/msgs/ru.msg",
        "/usr/share/doc/base-passwd/users-and-groups.txt.gz",
        "/usr/share/doc/python3/python-policy.txt.gz",
    ],
    "markdown": [
        f"{SITE}/../../../../README.md",
        "/usr/share/doc/git/SubmittingPatches",
    ],
    "csv": [
        f"{SITE}/tornado/test/csv_translations/fr_FR.csv",
        f"{SITE}/matplotlib/mpl-data/sample_data/Stocks.csv",
        f"{SITE}/matplotlib/mpl-data/sample_data/msft.csv",
        "/usr/share/distro-info/debian.csv",
        f"{SITE}/numpy/_core/tests/data/umath-validation-set-log.csv",
        "/usr/share/package-lists/nuget.tsv",
    ],
    "json": [],
    "html": [
        f"{SITE}/tornado/test/templates/utf8.html",
        f"{RUST}/book/ch01-01-installation.html",
        f"{RUST}/std/index.html",
        f"{RUST}/book/print.html",
        "/usr/share/doc/python3/python-policy.html/index.html",
    ],
    "image": [
        f"{PYTEST_DATA}/imghdrdata/python.png",
        f"{PYTEST_DATA}/imghdrdata/python.jpg",
        f"{PYTEST_DATA}/imghdrdata/python.tiff",
        f"{PYTEST_DATA}/imghdrdata/python.webp",
        f"{PYTEST_DATA}/imghdrdata/python.gif",
        f"{PYTEST_DATA}/imghdrdata/python.bmp",
        f"{RUST}/book/img/trpl14-01.png",
        f"{RUST}/book/img/trpl14-03.png",
        f"{RUST}/rustc/images/llvm-cov-show-01.png",
        f"{RUST}/embedded-book/assets/nrf52-memory-map.png",
        f"{RUST}/embedded-book/assets/verify.jpeg",
        f"{RUST}/cargo/images/auth-level-acl.png",
        f"{SITE}/networkx/drawing/tests/baseline/test_display_labels_and_colors.png",
        f"{SITE}/docx/templates/default-docx-template/docProps/thumbnail.jpeg",
    ],
}
"""Where each kind was found; globs are not used, so the sweep is the same on every run."""

EXTRA_GLOBS: dict[str, str] = {
    "json": f"{SITE}/jsonschema_specifications/schemas/draft7/metaschema.json",
    "markdown": "/usr/share/doc/*/README.md",
    "html": "/usr/share/doc/*/html/*.html",
}
"""A few files of each kind taken by glob, capped by `EXTRA_PER_KIND`, sorted for stability."""
EXTRA_PER_KIND = 4


@dataclass
class Item:
    group: str
    name: str
    origin: str
    payload: bytes
    as_pair: bool
    """Given to the guard as ``(name, bytes)`` rather than as its path."""
    note: str = ""


def found_items() -> Iterator[Item]:
    """Every file of `GROUPS` present here, plus renamed and derived variants."""
    seen: set[str] = set()
    for group, paths in GROUPS.items():
        extra = EXTRA_GLOBS.get(group)
        if extra:
            paths = paths + sorted(glob.glob(extra))[:EXTRA_PER_KIND]
        for raw in paths:
            path = Path(raw).resolve()
            if not path.is_file() or str(path) in seen:
                continue
            seen.add(str(path))
            data = path.read_bytes()
            if path.suffix == ".gz":
                yield Item(group, path.name[:-3], str(path), gzip.decompress(data), True,
                           "decompressed from .gz")
                continue
            yield Item(group, path.name, str(path), data, False)
            if group == "mail":
                yield Item(group, path.stem + ".eml", str(path), data, True,
                           "the same message named .eml")
    # derived odd ones, made in memory from found files
    tasn1 = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
    if tasn1.is_file():
        data = tasn1.read_bytes()
        yield Item("pdf", "libtasn1-truncated.pdf", str(tasn1), data[: len(data) // 2], True,
                   "first half of libtasn1.pdf: a damaged download")
    docx = Path(f"{SITE}/docx/templates/default.docx")
    if docx.is_file():
        data = docx.read_bytes()
        yield Item("ooxml", "default-truncated.docx", str(docx), data[:-200], True,
                   "default.docx without its last 200 bytes (end of central directory)")


_MOJIBAKE = re.compile(r"[ÃÂ][\u0080-\u00bf]|â€|[\u0080-\u009f]")


def text_health(text: str) -> dict[str, int]:
    """Counts that flag garbage: replacement characters, UTF-8-read-as-Latin-1, C1 controls."""
    return {"replacement": text.count("\ufffd"), "mojibake": len(_MOJIBAKE.findall(text)),
            "private_use": sum(1 for ch in text if "\ue000" <= ch <= "\uf8ff")}


@dataclass
class Row:
    group: str
    name: str
    origin: str
    size: int
    sniffed: str
    note: str
    many: str = ""
    many_detail: str = ""
    many_chars: int = 0
    many_s: float = 0.0
    many_children: int = 0
    many_encoding: str | None = None
    many_notes: list[str] = field(default_factory=list)
    attach: str = ""
    attach_detail: str = ""
    attach_chars: int = 0
    attach_s: float = 0.0
    raw_chars: int | None = None
    raw_s: float | None = None
    agreement: float | None = None
    health: dict[str, int] = field(default_factory=dict)
    truth_agreement: float | None = None
    """For a legacy-encoded text with a UTF-8 twin: Jaccard with the twin."""


def outcome_fields(outcome: Any) -> tuple[str, str, int]:
    from capsa.guard import Extracted

    if isinstance(outcome, Extracted):
        return "extracted", "", len(outcome.text)
    return getattr(outcome, "reason", type(outcome).__name__), getattr(outcome, "detail", ""), 0


def run(items: list[Item], *, raw: bool, workers: int) -> list[Row]:
    from capsa.errors import ExtractionFailed, IngestionRejected
    from capsa.guard import (
        Attachment,
        Extracted,
        ExtractionLimits,
        IsolatedExtractor,
        extract_attachment,
        extract_many,
        media_type_for_name,
        sniff,
    )
    from capsa.guard.extractors import default_router

    rows: list[Row] = []
    with IsolatedExtractor(default_router(), workers=workers) as pool:
        pool.warm_up()
        for item in items:
            row = Row(item.group, item.name, item.origin, len(item.payload),
                      sniff(item.payload), item.note)
            source: Any = (item.name, item.payload) if item.as_pair else item.origin
            capsa_text = ""
            began = time.perf_counter()
            try:
                top: Any = None
                for outcome in extract_many([source], extractor=pool, workers=1):
                    if getattr(outcome, "parent", None) is None:
                        top = outcome
                    else:
                        row.many_children += 1
                row.many, row.many_detail, row.many_chars = outcome_fields(top)
                if isinstance(top, Extracted):
                    row.many_encoding = top.encoding
                    row.many_notes = list(top.notes)
                    row.health = text_health(top.text)
                    text = top.text.rpartition(realdocs.LISTING)[0] or top.text
                    capsa_text = text
                    twin = Path(item.origin).with_name(Path(item.origin).stem + "-utf8.txt")
                    if twin.is_file():
                        truth = twin.read_text("utf-8")
                        row.truth_agreement = round(realdocs.jaccard(text, truth), 3)
            except Exception as error:  # the sweep's finding, never its end
                row.many, row.many_detail = "EXCEPTION", "".join(
                    traceback.format_exception_only(error)).strip()
            row.many_s = round(time.perf_counter() - began, 3)

            began = time.perf_counter()
            try:
                done = extract_attachment(
                    Attachment(label=item.name, payload=item.payload,
                               media_type=media_type_for_name(item.name)),
                    pool, ExtractionLimits.for_attachments())
                row.attach, row.attach_chars = "extracted", len(done.text)
            except IngestionRejected as error:
                row.attach, row.attach_detail = error.reason, error.detail
            except ExtractionFailed as error:
                row.attach, row.attach_detail = f"failed:{error.cause}", error.detail
            except Exception as error:
                row.attach, row.attach_detail = "EXCEPTION", "".join(
                    traceback.format_exception_only(error)).strip()
            row.attach_s = round(time.perf_counter() - began, 3)

            if raw and row.sniffed not in ("gif", "binary", "zip", "ole", "postscript"):
                began = time.perf_counter()
                tmp = Path("/tmp") / f"capsa-sweep-raw-{item.name}"
                tmp.write_bytes(item.payload)
                try:
                    raw_text = realdocs.raw_text(tmp)
                finally:
                    tmp.unlink()
                row.raw_s = round(time.perf_counter() - began, 3)
                row.raw_chars = None if raw_text is None else len(raw_text.strip())
                if raw_text and row.many == "extracted" and realdocs.words(raw_text):
                    row.agreement = round(realdocs.jaccard(capsa_text, raw_text), 3)
            rows.append(row)
            print(json.dumps(asdict(row), ensure_ascii=False)[:400], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default="/tmp/capsa-realdocs-sweep.jsonl")
    parser.add_argument("--no-raw", action="store_true")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated groups")
    args = parser.parse_args()
    items = list(found_items())
    if args.only:
        wanted = set(args.only.split(","))
        items = [i for i in items if i.group in wanted]
    rows = run(items, raw=not args.no_raw, workers=args.workers)
    with open(args.out, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
    print(Counter((r.group, r.many) for r in rows))
    print(Counter((r.group, r.attach) for r in rows))


if __name__ == "__main__":
    main()
