"""The `capsa` command: `capsa extract`, `capsa demo`, `capsa shadow`, `capsa doctor`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

from capsa import __version__
from capsa.guard import Extracted, ExtractionLimits, Omission, TextExtractor
from capsa.guard.bulk import ExtractedPart, extracted_parts
from capsa.guard.shapes import SHAPES, Shape, check_shape

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["main"]

_LIMIT_FLAGS = {
    "max_bytes": int, "max_uncompressed_bytes": int, "max_expansion_ratio": float,
    "max_members": int, "max_nesting_depth": int, "max_pages": int, "max_pixels": int,
    "max_text_chars": int, "max_total_chars": int, "timeout_s": float, "cpu_s": int,
    "memory_bytes": int,
}
_TERMINAL_SEQUENCE = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: titles, hyperlinks
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b[@-_]")  # any other escape
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


_DEMO_NEEDS = {
    "langchain": ("langchain_core", "langchain", "langgraph"),
    "llama-index": ("llama_index.core",),
}
"""What `capsa demo` imports, by the extra that installs it."""

_SIGPIPE_STATUS = 128 + 13
"""What a shell reports for a command ended by SIGPIPE (`yes | head -1`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Behaves like a Unix tool: ``--version`` prints the version; a reader that
    closes the pipe early (``capsa doctor --json | head -1``) ends the run
    quietly with status 141, as a command ended by SIGPIPE does.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        status = _dispatch(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return _SIGPIPE_STATUS
    return status


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


def _dispatch(args: list[str]) -> int:
    if args[:1] in (["--version"], ["-V"]):
        print(f"capsa {__version__}")
        return 0
    if args and args[0] == "doctor":
        from capsa.guard.sandbox.doctor import main as doctor_main

        return doctor_main(args[1:])
    if args and args[0] == "shadow":
        from capsa.shadow._cli import main as shadow_main

        return shadow_main(args[1:])
    parser = _parser()
    options = parser.parse_args(args)
    if options.command == "extract":
        return _extract(options)
    if options.command == "demo":
        missing = _missing_extras(_DEMO_NEEDS)
        if missing:
            extras = ",".join(missing)
            print(f"capsa demo: needs the {' and '.join(missing)} "
                  f"extra{'s' if len(missing) > 1 else ''}: pip install 'capsa[{extras}]' "
                  f"(cannot import {', '.join(m for ms in missing.values() for m in ms)})",
                  file=sys.stderr)
            return 1
        from capsa.demo.run import main as demo_main

        status: int = demo_main(json_output=options.json, model_name=options.model)
        return status
    parser.print_help()
    return 1


def _missing_extras(needs: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """The extras whose modules cannot be imported here, with those modules; nothing imported."""
    missing: dict[str, list[str]] = {}
    for extra, modules in needs.items():
        for module in modules:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False  # a parent package is missing or blocked
            if not found:
                missing.setdefault(extra, []).append(module)
    return missing


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capsa", description=__doc__)
    parser.add_argument("-V", "--version", action="version", version=f"capsa {__version__}")
    commands = parser.add_subparsers(dest="command")
    extract = commands.add_parser(
        "extract", help="extract text from files through the guard",
        description="Extract text from untrusted files under the ingestion limits: one JSON "
                    "line per file on stdout (or --out), extracted or omitted, in the order "
                    "files finish (or input order with --ordered); files found inside "
                    "others (e-mail attachments) get lines of their own, after their parent's, "
                    "and are counted apart; a progress bar and a table of omitted files on "
                    "stderr. With --shape page or element, an extracted file gives one line "
                    "per page or element instead, with the metadata keys CapsaLoader puts on "
                    "that document.")
    extract.add_argument("paths", nargs="+", type=Path, help="files or directories")
    extract.add_argument("--out", type=Path, help="write JSON lines here instead of stdout")
    extract.add_argument("--strict", action="store_true",
                         help="exit with status 2 when any file was omitted")
    extract.add_argument("--workers", type=_positive, default=None,
                         help="files parsed at once, each in its own isolated worker "
                              "(default: the default pool's width, two; one on a single core)")
    extract.add_argument("--ordered", action="store_true",
                         help="write lines in input order (walked folders sorted) instead of "
                              "as files finish; a slow file then holds back the lines after it")
    extract.add_argument("--shape", choices=SHAPES, default="file",
                         help="one JSON line per extracted file (default), per page or per "
                              "element; a part's line adds its position (\"part\") and "
                              "\"metadata\": page_number, category, element_id, parent_id, "
                              "text_as_html, languages, filename, filetype and capsa's "
                              "provenance, as the loaders give them; files are still counted "
                              "as files, and the summary adds the parts")
    extract.add_argument("--symlinks", choices=("refuse", "within_root", "follow"),
                         default="refuse",
                         help="symbolic links met in a directory: refuse them (default), "
                              "follow those that stay inside it, or follow all")
    extract.add_argument("--hidden", action="store_true",
                         help="also read files and folders whose names start with a dot "
                              "(.git, .env) in a directory; skipped by default, as the "
                              "loaders skip them")
    extract.add_argument("--dask", metavar="SCHEDULER",
                         help="run on a Dask cluster (scheduler address, e.g. tcp://host:8786)")
    ingestion = ExtractionLimits.for_ingestion()
    for name, kind in _LIMIT_FLAGS.items():
        described = ExtractionLimits.model_fields[name].description or ""
        extract.add_argument(f"--{name.replace('_', '-')}", type=kind, dest=name,
                             help=f"{described} (default: {getattr(ingestion, name)})"
                                  .replace("%", "%%"))
    demo = commands.add_parser("demo", help="run the offline end-to-end demo")
    demo.add_argument("--json", action="store_true", help="print JSON instead of the story")
    demo.add_argument("--model", metavar="PROVIDER:NAME",
                      help="any LangChain chat model (keys from the environment); "
                           "default: a deterministic offline model")
    commands.add_parser("shadow", help="compare two retrieval routes (see capsa shadow -h)")
    commands.add_parser("doctor", help="show which isolation layers parsers get here "
                                       "(see capsa doctor -h)")
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def _extract(options: argparse.Namespace) -> int:
    from rich.console import Console

    limits = _limits(options)
    console = Console(stderr=True)
    report = _Report(own_output=options.out, shape=check_shape(options.shape))
    out: IO[str] = options.out.open("w", encoding="utf-8") if options.out else sys.stdout
    try:
        if options.dask:
            outcomes = _outcomes_on_dask(options, limits, console)
            report.total = sum(1 for outcome in outcomes if outcome.parent is None)
            for outcome in outcomes:
                report.write(outcome, out, limits)
        else:
            _extract_locally(options, limits, console, report, out)
    finally:
        if options.out:
            out.close()
    return report.finish(console, strict=options.strict)


def _limits(options: argparse.Namespace) -> ExtractionLimits:
    """The ingestion preset with every limit flag the user gave, validated."""
    given = {name: getattr(options, name) for name in _LIMIT_FLAGS
             if getattr(options, name) is not None}
    try:
        return ExtractionLimits.model_validate(
            ExtractionLimits.for_ingestion().model_dump() | given)
    except ValidationError as error:
        problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}"
                             for e in error.errors())
        raise SystemExit(f"capsa extract: {problems}") from None


def _extract_locally(options: argparse.Namespace, limits: ExtractionLimits, console: Any,
                     report: _Report, out: IO[str]) -> None:
    from rich.progress import Progress

    from capsa.guard.bulk import default_width, extract_many

    report.total = sum(_count(path, options.symlinks, options.hidden) for path in options.paths)
    workers = options.workers if options.workers is not None else default_width()
    pool = _pool(workers, limits)
    try:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(report.counts(), total=report.total)
            for outcome in extract_many(options.paths, workers=workers,
                                        limits=limits, extractor=pool,
                                        symlinks=options.symlinks, hidden=options.hidden,
                                        ordered=options.ordered):
                if isinstance(outcome, (Extracted, Omission)):
                    report.write(outcome, out, limits)
                top_level = getattr(outcome, "parent", None) is None
                progress.update(task, advance=1 if top_level else 0,
                                description=report.counts())
    finally:
        close = getattr(pool, "close", None)
        if close is not None:
            close()


def _pool(workers: int, limits: ExtractionLimits) -> TextExtractor:
    """The isolated parser pool: `workers` files parse at once, each in its own child."""
    from capsa.guard import IsolatedExtractor
    from capsa.guard.extractors import default_router

    return IsolatedExtractor(default_router(), workers=workers, limits=limits)


def _count(path: Path, symlinks: Any = "refuse", hidden: bool = False) -> int:
    """How many outcomes a path will give: one per walked entry, or one for itself."""
    if path.is_dir():
        from capsa.guard.walk import walk_files

        return sum(1 for _ in walk_files(path, symlinks=symlinks, hidden=hidden))
    return 1


def _outcomes_on_dask(options: argparse.Namespace, limits: ExtractionLimits,
                      console: Any) -> list[Extracted | Omission]:
    from distributed import Client

    from capsa.guard.dask import extract_bag

    client = Client(options.dask)  # type: ignore[no-untyped-call]
    with client, console.status(f"extracting on {_printable(options.dask)}"):
        records = extract_bag(options.paths, client=client, limits=limits,
                              hidden=options.hidden).compute()
    return [Extracted.model_validate(_fields(record)) if record["outcome"] == "extracted"
            else Omission.model_validate(_fields(record)) for record in records]


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "outcome"}


class _Report:
    """Counts, the set-wide ceiling and the omissions of one `capsa extract` run.

    Files found inside others (an e-mail's attachments) are counted apart
    from the files given, so the summary never reads "60 of 51 files".
    """

    def __init__(self, *, own_output: Path | None = None, shape: Shape = "file") -> None:
        self.own_output = own_output.resolve() if own_output is not None else None
        self.shape: Shape = shape
        """What one line of output is: a file, a page or an element."""
        self.parts = 0
        """Lines written for extracted files (and those found inside them) with a shape
        other than ``"file"``."""
        self.total = 0
        """Top-level files: the paths given and the files walked under them."""
        self.extracted = 0
        """Top-level files extracted."""
        self.inside_extracted = 0
        """Files found inside others, extracted."""
        self.inside_omitted = 0
        """Files found inside others, omitted."""
        self.used_chars = 0
        self.omitted: list[Omission] = []

    def counts(self) -> str:
        inside = self.inside_extracted + self.inside_omitted
        found = f"; {inside} found inside them" if inside else ""
        return f"{self.extracted} extracted, {len(self.omitted) - self.inside_omitted} omitted" \
               f"{found}{self._parts()}"

    def _parts(self) -> str:
        if self.shape == "file":
            return ""
        return f"; {self.parts} part{'s' if self.parts != 1 else ''} written, one per {self.shape}"

    def write(self, outcome: Extracted | Omission, out: IO[str],
              limits: ExtractionLimits) -> None:
        """One JSON line per file, extracted or omitted; the set ceiling applied on the way.

        With a shape other than ``"file"`` an extracted file is one line per
        part; the ceiling still takes or refuses the file whole, so no file's
        pages are written only in part. The run's own output file, met in a
        walk of a folder it lies in, is not an input: its outcome is dropped
        and it leaves the count.
        """
        if (self.own_output is not None and outcome.source is not None
                and outcome.parent is None
                and Path(outcome.source).resolve() == self.own_output):
            self.total -= 1
            return
        if isinstance(outcome, Extracted):
            chars = len(outcome.text)
            if self.used_chars + chars <= limits.max_total_chars:
                self.used_chars += chars
                if outcome.parent is None:
                    self.extracted += 1
                else:
                    self.inside_extracted += 1
                if self.shape == "file":
                    out.write(json.dumps(_extracted_record(outcome)) + "\n")
                    return
                for part in extracted_parts(outcome, self.shape):
                    self.parts += 1
                    out.write(json.dumps(_part_record(part)) + "\n")
                return
            outcome = Omission(
                label=outcome.label, stage="set", reason="set_ceiling", source=outcome.source,
                parent=outcome.parent,
                detail=f"{chars} characters would take the set to {self.used_chars + chars}, "
                       f"over the set-wide limit of {limits.max_total_chars}")
        self.omitted.append(outcome)
        if outcome.parent is not None:
            self.inside_omitted += 1
        out.write(json.dumps({"outcome": "omitted", "source": outcome.source,
                              "label": outcome.label, "parent": outcome.parent,
                              "stage": outcome.stage, "reason": outcome.reason,
                              "detail": outcome.detail}) + "\n")

    def summary(self) -> str:
        """The last line: top-level files, then the files found inside them, if any."""
        line = (f"extracted {self.extracted} of {self.total} files; "
                f"omitted {len(self.omitted) - self.inside_omitted}")
        inside = self.inside_extracted + self.inside_omitted
        if inside:
            line += (f"; found {inside} file{'s' if inside != 1 else ''} inside them: "
                     f"extracted {self.inside_extracted}, omitted {self.inside_omitted}")
        return line + self._parts()

    def finish(self, console: Any, *, strict: bool) -> int:
        """Print the summary and the table of omissions; the exit status."""
        from rich.table import Table
        from rich.text import Text

        from capsa.guard.bulk import display_name

        status = 2 if self.omitted and strict else 0
        console.print(Text(self.summary()), soft_wrap=True)
        if self.omitted and not console.is_terminal:
            # Logs and CI: one whole line per omission, so a long path is never
            # folded or cut and `grep` finds the file by name.
            for item in self.omitted:
                line = Text("omitted ")
                line.append_text(_printable(display_name(item)))
                line.append(": ")
                line.append_text(_printable(f"{item.stage}/{item.reason}: {item.detail}"))
                console.print(line, soft_wrap=True)
        elif self.omitted:
            table = Table("file", "stage", "reason", "detail", title="omitted")
            for column in table.columns:
                column.overflow = "fold"
            for item in self.omitted:
                table.add_row(_printable(display_name(item)), _printable(item.stage),
                              _printable(item.reason), _printable(item.detail))
            console.print(table)
        return status


def _printable(value: str) -> Text:
    """`value` as inert rich text: terminal sequences, control and bidi characters removed.

    A `Text` is never parsed as markup or emoji codes, so a file named
    ``[link=mailto:a@b]x.txt`` or a detail holding ``[/x]`` prints as written.
    """
    from rich.text import Text

    value = _TERMINAL_SEQUENCE.sub("", value)
    return Text("".join(" " if ch in "\t\n\r" else ch for ch in value
                        if ch in "\t\n\r" or unicodedata.category(ch) not in _UNPRINTABLE))


def _part_record(part: ExtractedPart) -> dict[str, object]:
    """A part's line: its file's fields, as a file's line has them, then the part's."""
    return {"outcome": "extracted", "id": part.id, "source": part.source, "label": part.label,
            "parent": part.parent, "kind": part.kind, "bytes": part.byte_size,
            "sha256": part.sha256, "part": part.index, "text": part.text,
            "metadata": part.metadata}


def _extracted_record(item: Extracted) -> dict[str, object]:
    return {"outcome": "extracted", "id": item.sha256, "source": item.source,
            "label": item.label, "parent": item.parent, "kind": item.kind, "bytes": item.byte_size,
            "sha256": item.sha256, "text": item.text}


if __name__ == "__main__":
    raise SystemExit(main())
