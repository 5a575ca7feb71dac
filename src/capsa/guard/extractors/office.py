"""Legacy Office and OpenDocument files, converted in the sandbox, then read as OOXML.

``.doc``, ``.xls`` and ``.ppt`` (OLE compound files) and ``.ods`` and ``.odp``
go through LibreOffice headless (``soffice --convert-to``); ``.odt`` goes through
pandoc, as unstructured's own ``partition_odt`` does. Either way the result is
a DOCX, XLSX or PPTX in the child's scratch directory, which then takes the
same path as any OOXML file: the zip inspection under the file's limits, the
XML pre-scans, the text floors and unstructured.

Everything happens inside the file's sealed child, so LibreOffice runs under
the limits every parser runs under: its wall clock, CPU and memory, its
scratch tmpfs (where its profile lives), Landlock, and seccomp. LibreOffice
will not start without its single-instance pipe, so these kinds' children
get the one filter that lets a process make a Unix socket and listen on it
(never connect: `capsa.guard.sandbox.seccomp.UNIX_LISTEN_KINDS`); the pipe is
bound in the child's scratch (``-env:OSL_SOCKET_PATH=.``). Each conversion
has a fresh profile, written before LibreOffice starts with macros disabled
outright (``DisableMacrosExecution``, security level "very high"), so a
document's auto-run macro never runs, signed or not.

Before a converter sees the bytes, an OLE file's directory is inspected under
the limits (`capsa.guard.archive.inspect_ole`) and an OpenDocument zip is
inspected like any zip, with every XML part scanned for entity declarations.
An ODT then loses the text it hides from its reader, which pandoc would keep
(`capsa.guard.extractors._odt_hidden`), and a note says how many parts went.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard.archive import inspect_ole, open_inspected
from capsa.guard.extractors._floors import refuse as _refuse
from capsa.guard.extractors._odt_hidden import PrunedDocument, drop_hidden_text, hidden_note
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.port import Parsed

__all__ = ["LIBREOFFICE_PACKAGES", "OfficeExtractor", "find_soffice"]

LIBREOFFICE_PACKAGES = ("libreoffice-writer-nogui", "libreoffice-calc-nogui",
                        "libreoffice-impress-nogui")
"""The Debian packages that give ``soffice`` the three filters capsa converts with."""
_INSTALL_HINT = ("install LibreOffice: apt-get install --no-install-recommends "
                 + " ".join(LIBREOFFICE_PACKAGES))

_TARGETS: dict[str, tuple[str, str]] = {
    "doc": ("docx", "docx:MS Word 2007 XML"),
    "xls": ("xlsx", "xlsx:Calc MS Excel 2007 XML"),
    "ods": ("xlsx", "xlsx:Calc MS Excel 2007 XML"),
    "ppt": ("pptx", "pptx:Impress MS PowerPoint 2007 XML"),
    "odp": ("pptx", "pptx:Impress MS PowerPoint 2007 XML"),
}
"""Each LibreOffice kind: the OOXML kind it becomes and the ``--convert-to`` filter."""
_OLE_KINDS = frozenset({"doc", "xls", "ppt"})
_ODF_KINDS = frozenset({"odt", "ods", "odp"})
_NO_MACROS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry"
 xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>1</value></prop></item>
</oor:items>
"""  # noqa: E501 - registry XML, one item a line
"""The fresh profile's settings: no macro runs (signed or not, whatever the document asks),
links from untrusted documents are not followed, Calc never updates external links."""
_RESTART = 81
"""``soffice.bin``'s exit status asking its launcher to start it again (it has just
registered its bundled extensions in a new profile); the launcher script would loop."""
_QUIET_ENV = {"SAL_USE_VCLPLUGIN": "svp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def find_soffice(path: str | None = None) -> str | None:
    """Where ``soffice`` is on `path` (the worker's ``PATH`` when None), or None.

    Examples:
        >>> find_soffice("/nonexistent") is None
        True
    """
    return shutil.which("soffice", path=path)


class OfficeExtractor:
    """Text from .doc, .xls, .ppt, .odt, .ods and .odp, converted to OOXML first.

    Args:
        limits: the bounds for the container inspections; `with_limits` replaces
            them per call.
        inner: what reads the converted DOCX, XLSX or PPTX (an
            `UnstructuredExtractor` by default).
        path: where to look for ``soffice`` (the ``PATH`` when None); a path
            without it makes the LibreOffice kinds refuse as ``missing_extra``.
    """

    kinds = frozenset({"doc", "xls", "ppt", "odt", "ods", "odp"})

    def __init__(self, limits: ExtractionLimits = DEFAULT_LIMITS, *, inner: Any = None,
                 path: str | None = None) -> None:
        if inner is None:
            from capsa.guard.extractors.unstructured import UnstructuredExtractor

            inner = UnstructuredExtractor(limits)
        self.limits = limits
        self.inner = inner
        self.path = path

    def with_limits(self, limits: ExtractionLimits) -> OfficeExtractor:
        """A copy that inspects, converts and reads under the call's `limits`."""
        configure = getattr(self.inner, "with_limits", None)
        inner = configure(limits) if configure is not None else self.inner
        return OfficeExtractor(limits, inner=inner, path=self.path)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Convert `payload` in scratch, then return the converted file's text."""
        if kind not in self.kinds:
            raise _refuse("unsupported_type", f"OfficeExtractor does not handle {kind}")
        hidden = 0
        if kind in _OLE_KINDS:
            inspect_ole(payload, self.limits, label="<payload>")
        else:
            pruned = self._scan_odf(kind, payload)
            payload, hidden = pruned.payload, pruned.removed
        started = time.monotonic()
        if kind == "odt":
            target, converted, tool = "docx", _pandoc_to_docx(payload, self._budget_s()), "pandoc"
        else:
            soffice = find_soffice(self.path)
            if soffice is None:
                raise missing_libreoffice(kind)
            target, filter_name = _TARGETS[kind]
            converted = _libreoffice(soffice, kind, filter_name, payload, self._budget_s(),
                                     self.limits.memory_bytes)
            tool = "LibreOffice"
        notes = (f"converted from {kind.upper()} to {target.upper()} by {tool} "
                 f"({time.monotonic() - started:.1f} s)",
                 *((hidden_note(hidden),) if hidden else ()))
        parsed = self.inner.extract(target, None, converted, max_pages=max_pages)
        if isinstance(parsed, str):
            return Parsed(parsed, notes=notes)
        return Parsed(parsed.text, encoding=parsed.encoding,
                      encoding_confidence=parsed.encoding_confidence,
                      embedded=parsed.embedded, notes=(*notes, *parsed.notes))

    def _budget_s(self) -> float:
        """The converter's own deadline: most of the file's, so its timeout is the one named."""
        return max(0.9 * self.limits.timeout_s, 0.1)

    def _scan_odf(self, kind: str, payload: bytes) -> PrunedDocument:
        """Inspect and scan an OpenDocument zip; an ODT also loses the text it hides, which
        pandoc would keep (`capsa.guard.extractors._odt_hidden`). ODS and ODP, which
        LibreOffice converts, are handed over as they are."""
        from capsa.guard.extractors.unstructured import _scan_xml_parts

        with open_inspected(payload, self.limits, label="<payload>") as archive:
            # ODF parts may carry a DOCTYPE (OpenOffice 1 manifests do); entities never
            _scan_xml_parts(archive, forbid="ENTITY")
            if kind != "odt":
                return PrunedDocument(payload=payload, removed=0)
            return drop_hidden_text(payload, archive,
                                    max_bytes=self.limits.max_uncompressed_bytes)

    def self_test(self) -> dict[str, str]:
        """Whether each kind's converter is installed (``soffice`` on the path, pandoc).

        A full LibreOffice conversion takes a second or two; every worker start
        would pay it, so this checks presence only. A kind whose converter is
        missing reports ``missing_extra: ...``, which the pool turns into a
        ``missing_extra`` refusal naming what to install.
        """
        soffice = find_soffice(self.path)
        office = "ok" if soffice is not None else f"missing_extra: {_INSTALL_HINT}"
        report = {kind: office for kind in sorted(self.kinds - {"odt"})}
        try:
            import pypandoc  # type: ignore[import-untyped]

            pypandoc.get_pandoc_path()
            report["odt"] = "ok"
        except (ImportError, OSError) as exc:
            report["odt"] = ("missing_extra: pandoc for .odt: pip install 'capsa[unstructured]' "
                             f"({type(exc).__name__})")
        return report


def missing_libreoffice(kind: str) -> IngestionRejected:
    """The refusal for a LibreOffice kind on a machine without LibreOffice."""
    return IngestionRejected(
        f"a .{kind} file needs LibreOffice, which is not installed here; {_INSTALL_HINT}",
        label="<payload>", stage="parser", reason="missing_extra")


def _libreoffice(soffice: str, kind: str, filter_name: str, payload: bytes,
                 budget_s: float, memory_bytes: int) -> bytes:
    """Run one headless conversion in a fresh directory of the child's scratch."""
    binary = _office_binary(soffice)
    with tempfile.TemporaryDirectory(prefix="office-") as work:
        profile = os.path.join(work, "profile")
        _seed_profile(profile, binary)
        source = os.path.join(work, f"input.{kind}")
        with open(source, "wb") as handle:
            handle.write(payload)
        out = os.path.join(work, "out")
        os.mkdir(out)
        command = [binary, "--headless", "--invisible", "--nologo", "--norestore",
                   "--nodefault", "--nolockcheck", "--nofirststartwizard",
                   f"-env:UserInstallation=file://{profile}",
                   "-env:OSL_SOCKET_PATH=.",  # cwd: a path in scratch may pass sun_path's 108
                   "--convert-to", filter_name, "--outdir", out, source]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TMPDIR": work,
               **_QUIET_ENV}
        clock = _Clock(budget_s, "LibreOffice")
        finished = _run(command, env, clock, cwd=work)
        if finished.returncode == _RESTART:  # a fresh profile's first start asks for a second
            finished = _run(command, env, clock, cwd=work)
        target = _TARGETS[kind][0]
        result = os.path.join(out, f"input.{target}")
        if not os.path.exists(result):
            raise _failure(kind, finished, memory_bytes)
        with open(result, "rb") as handle:
            return handle.read()


def _seed_profile(profile: str, binary: str) -> None:
    """A fresh profile: capsa's settings, and its extensions marked as synchronized.

    A profile LibreOffice has never seen makes ``soffice.bin`` register its
    bundled extensions and exit asking for a restart (81), doubling the cost
    of every conversion. Its build id and two ``lastsynchronized`` stamps,
    written here, tell it the (empty) extension state is current; the restart
    is still granted if a build asks for it anyway.
    """
    user = os.path.join(profile, "user")
    for folder in ("bundled", "shared"):
        os.makedirs(os.path.join(user, "extensions", folder))
        with open(os.path.join(user, "extensions", folder, "lastsynchronized"), "w") as handle:
            handle.write("1")
    build = _build_id(os.path.dirname(binary))
    if build is not None:
        with open(os.path.join(user, "extensions", "buildid"), "w") as handle:
            handle.write(build)
    with open(os.path.join(user, "registrymodifications.xcu"), "w") as handle:
        handle.write(_NO_MACROS)


def _build_id(program: str) -> str | None:
    """The ``buildid`` in LibreOffice's own ``versionrc`` (``40(Build:2)``), or None."""
    try:
        with open(os.path.join(program, "versionrc"), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("buildid="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        return None
    return None


def _office_binary(soffice: str) -> str:
    """``soffice.bin`` beside the ``soffice`` launcher, or the launcher when there is none.

    The launcher is a shell script (``ls``, ``uname``, ``sed``) that starts a
    splash process (``oosplash``) which then starts ``soffice.bin``; started
    directly, the office is one process tree shorter and its first call is
    LibreOffice's own.
    """
    program = os.path.join(os.path.dirname(os.path.realpath(soffice)), "soffice.bin")
    return program if os.access(program, os.X_OK) else soffice


def _pandoc_to_docx(payload: bytes, budget_s: float) -> bytes:
    try:
        import pypandoc
    except ImportError as exc:
        raise IngestionRejected(
            "an .odt file needs pandoc: pip install 'capsa[unstructured]'",
            label="<payload>", stage="parser", reason="missing_extra") from exc
    pandoc = pypandoc.get_pandoc_path()
    with tempfile.TemporaryDirectory(prefix="odt-") as work:
        source, result = os.path.join(work, "input.odt"), os.path.join(work, "output.docx")
        with open(source, "wb") as handle:
            handle.write(payload)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TMPDIR": work}
        finished = _run([pandoc, "--from=odt", "--to=docx", "-o", result, source], env,
                        _Clock(budget_s, "pandoc"), cwd=work)
        if finished.returncode != 0 or not os.path.exists(result):
            said = (finished.stderr or b"").decode("utf-8", "replace")
            raise _refuse("corrupt", f"pandoc could not read the .odt file "
                                     f"(exit {finished.returncode}): {said.strip()[:300]}")
        with open(result, "rb") as handle:
            return handle.read()


class _Clock:
    """One conversion's share of the file's wall clock, across LibreOffice's restart."""

    def __init__(self, budget_s: float, tool: str) -> None:
        self.budget_s, self.tool = budget_s, tool
        self.started = time.monotonic()

    def remaining(self) -> float:
        return max(self.started + self.budget_s - time.monotonic(), 0.05)

    def expired(self) -> ExtractionFailed:
        return ExtractionFailed(
            f"{self.tool} ran {time.monotonic() - self.started:.1f} s converting the file, "
            f"past its share of the wall-clock limit ({self.budget_s:.1f} s of timeout_s)",
            label="<payload>", cause="timeout")


def _run(command: list[str], env: dict[str, str], clock: _Clock, *,
         cwd: str) -> subprocess.CompletedProcess[bytes]:
    """Run a converter with no input, its output captured, under the file's deadline."""
    try:
        return subprocess.run(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=clock.remaining(), check=False)
    except subprocess.TimeoutExpired:
        raise clock.expired() from None


_OUT_OF_MEMORY = ("std::bad_alloc", "failed to map segment", "cannot allocate memory",
                  "out of memory")
"""What LibreOffice (or the loader starting it) prints when the address-space limit bites."""


def _failure(kind: str, finished: subprocess.CompletedProcess[bytes],
             memory_bytes: int) -> ExtractionFailed | IngestionRejected:
    """Why a conversion produced nothing: memory, a crash, or a file it could not read."""
    said = (finished.stderr or finished.stdout or b"").decode("utf-8", "replace").strip()
    lowered = said.lower()
    if any(sign.lower() in lowered for sign in _OUT_OF_MEMORY):
        return ExtractionFailed(
            f"LibreOffice ran out of memory converting the {kind} file, within the allowance "
            f"of {memory_bytes} bytes (memory_bytes): {said[:200]}", label="<payload>",
            cause="memory_limit")
    if finished.returncode < 0:
        return ExtractionFailed(
            f"LibreOffice died of signal {-finished.returncode} converting the {kind} file: "
            f"{said[:200]}", label="<payload>", cause="crashed")
    return _refuse("corrupt", f"LibreOffice could not convert the {kind} file "
                              f"(exit {finished.returncode}): {said[:300]}")
