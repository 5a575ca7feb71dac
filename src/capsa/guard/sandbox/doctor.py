"""``capsa doctor``: which isolation layers a parser gets on this machine.

It starts one real extraction worker, lets it fork a probe child that
confines itself exactly as every parse child does, and prints what the
kernel granted: each layer, what it stops, and, where it is missing, what
that leaves open. ``--require`` names layers (or ``all``) that must be
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

__all__ = ["main", "unmet"]

EXIT_MISSING = 3


def unmet(report: SandboxReport, required: Sequence[str]) -> list[str]:
    """The layers in `required` (``all`` meaning every one) that `report` lacks."""
    names = list(LAYERS) if "all" in required else list(required)
    return [name for name in names if not report.is_active(name)]


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
        description="Print which isolation layers capsa's parsers run under on this machine.")
    parser.add_argument("--require", action="append", default=[], metavar="LAYER",
                        choices=[*LAYERS, "all"],
                        help="exit 3 unless this layer is active (repeat; 'all' for every one)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    options = parser.parse_args(argv)
    report = probe()
    missing = unmet(report, options.require)
    if options.json:
        print(json.dumps({"layers": {k: v.model_dump() for k, v in report.layers.items()},
                          "required_missing": missing}, indent=2))
    else:
        print(render(report))
        if missing:
            print(f"\nrequired but missing: {', '.join(missing)}", file=sys.stderr)
    return EXIT_MISSING if missing else 0
