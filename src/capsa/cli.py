"""The `capsa` command: `capsa extract`, `capsa demo`, `capsa shadow`, `capsa doctor`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from capsa.errors import IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    Omission,
    extract_attachment,
    media_type_for_name,
    read_bounded,
    safe_label,
)

__all__ = ["main"]

_LIMIT_FLAGS = {
    "max_bytes": int, "max_uncompressed_bytes": int, "max_expansion_ratio": float,
    "max_members": int, "max_nesting_depth": int, "max_pages": int, "max_pixels": int,
    "max_text_chars": int, "max_total_chars": int, "timeout_s": float, "cpu_s": int,
    "memory_bytes": int,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "doctor":
        from capsa.guard.doctor import main as doctor_main

        return doctor_main(args[1:])
    if args and args[0] == "shadow":
        from capsa.shadow._cli import main as shadow_main

        return shadow_main(args[1:])
    parser = _parser()
    options = parser.parse_args(args)
    if options.command == "extract":
        return _extract(options)
    if options.command == "demo":
        from capsa.demo.run import main as demo_main

        status: int = demo_main(json_output=options.json, model_name=options.model)
        return status
    parser.print_help()
    return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capsa", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    extract = commands.add_parser(
        "extract", help="extract text from files through the guard",
        description="Extract text from untrusted files: JSON lines of documents on stdout "
                    "(or --out), a progress bar and a table of omitted files on stderr.")
    extract.add_argument("paths", nargs="+", type=Path, help="files or directories")
    extract.add_argument("--out", type=Path, help="write JSON lines here instead of stdout")
    extract.add_argument("--strict", action="store_true",
                         help="exit with status 2 when any file was omitted")
    extract.add_argument("--workers", type=int, default=2, help="isolated parser workers")
    extract.add_argument("--dask", metavar="SCHEDULER",
                         help="run on a Dask cluster (scheduler address, e.g. tcp://host:8786)")
    for name, kind in _LIMIT_FLAGS.items():
        extract.add_argument(f"--{name.replace('_', '-')}", type=kind, dest=name,
                             help=ExtractionLimits.model_fields[name].description)
    demo = commands.add_parser("demo", help="run the offline end-to-end demo")
    demo.add_argument("--json", action="store_true", help="print JSON instead of the story")
    demo.add_argument("--model", metavar="PROVIDER:NAME",
                      help="any LangChain chat model (keys from the environment); "
                           "default: a deterministic offline model")
    commands.add_parser("shadow", help="compare two retrieval routes (see capsa shadow -h)")
    commands.add_parser("doctor", help="show which isolation layers parsers get here "
                                       "(see capsa doctor -h)")
    return parser


def _files(paths: Sequence[Path]) -> Iterator[tuple[Path, bool]]:
    """Each file with whether it was found by walking (its symlinks are then not followed)."""
    for path in paths:
        if path.is_dir():
            yield from ((p, True) for p in sorted(path.rglob("*"))
                        if p.is_symlink() or p.is_file())
        else:
            yield path, False


def _extract(options: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from capsa.guard import IsolatedExtractor
    from capsa.guard.extract import default_extractor

    limits = ExtractionLimits(**{name: getattr(options, name) for name in _LIMIT_FLAGS
                                 if getattr(options, name) is not None})
    console = Console(stderr=True)
    found = list(_files(options.paths))
    files = [path for path, _ in found]
    if options.dask:
        links = [Omission(label=safe_label(p.name), stage="size", reason="unsupported_type",
                          detail="a symbolic link found in a directory walk is not followed")
                 for p, walked in found if walked and p.is_symlink()]
        plain = [p for p, walked in found if not (walked and p.is_symlink())]
        return _extract_on_dask(options, plain, limits, console, links)
    omitted: list[Omission] = []
    out: IO[str] = options.out.open("w", encoding="utf-8") if options.out else sys.stdout
    pool: IsolatedExtractor | None = None
    try:
        if options.workers != 2:
            from capsa.guard.extractors import default_router

            pool = IsolatedExtractor(default_router(), workers=options.workers)
        extractor = pool or default_extractor()
        extracted = 0
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("extracting", total=len(files))
            for index, (path, walked) in enumerate(found):
                outcome = _one(path, index, extractor, limits, follow_symlinks=not walked)
                if isinstance(outcome, Omission):
                    omitted.append(outcome)
                else:
                    out.write(json.dumps(_record(outcome, path)) + "\n")
                    extracted += 1
                progress.advance(task)
    finally:
        if options.out:
            out.close()
        if pool is not None:
            pool.close()
    return _report(console, extracted, len(files), omitted, options.strict)


def _extract_on_dask(options: argparse.Namespace, files: list[Path], limits: ExtractionLimits,
                     console: Any, links: list[Omission]) -> int:
    from distributed import Client

    from capsa.guard.dask import extract_bag

    client = Client(options.dask)  # type: ignore[no-untyped-call]
    with client, console.status(f"extracting {len(files)} files on {options.dask}"):
        records = extract_bag(files, client=client, limits=limits).compute()
    out: IO[str] = options.out.open("w", encoding="utf-8") if options.out else sys.stdout
    omitted = links + [Omission(**{k: r[k] for k in ("label", "stage", "reason", "detail")})
                       for r in records if r["outcome"] == "omitted"]
    try:
        for record in records:
            if record["outcome"] == "extracted":
                out.write(json.dumps({key: record[key] for key in (
                    "label", "kind", "sha256", "text")} | {"id": record["sha256"],
                                                          "bytes": record["byte_size"]}) + "\n")
    finally:
        if options.out:
            out.close()
    extracted = sum(1 for r in records if r["outcome"] == "extracted")
    return _report(console, extracted, len(files) + len(links), omitted, options.strict)


def _report(console: Any, extracted: int, total: int, omitted: list[Omission],
            strict: bool) -> int:
    from rich.table import Table

    console.print(f"extracted {extracted} of {total} files; omitted {len(omitted)}")
    if omitted:
        table = Table("file", "stage", "reason", "detail", title="omitted")
        for item in omitted:
            table.add_row(item.label, item.stage, item.reason, item.detail)
        console.print(table)
    return 2 if omitted and strict else 0


def _one(path: Path, index: int, extractor: object, limits: ExtractionLimits, *,
         follow_symlinks: bool = True) -> Extracted | Omission:
    from capsa.errors import ExtractionFailed
    from capsa.guard.port import TextExtractor

    label = safe_label(path.name, index=index)
    try:
        payload = read_bounded(path, limits, label=label, follow_symlinks=follow_symlinks)
        assert isinstance(extractor, TextExtractor)
        attachment = Attachment(label=label, media_type=media_type_for_name(path.name),
                                payload=payload)
        return extract_attachment(attachment, extractor, limits, index=index)
    except (IngestionRejected, ExtractionFailed) as error:
        return Omission.from_error(error)
    except OSError as error:
        return Omission(label=label, stage="size", reason="corrupt",
                        detail=f"could not read the file: {error.strerror}")


def _record(item: Extracted, path: Path) -> dict[str, object]:
    return {"id": item.sha256, "source": str(path), "label": item.label, "kind": item.kind,
            "bytes": item.byte_size, "sha256": item.sha256, "text": item.text}


if __name__ == "__main__":
    raise SystemExit(main())
