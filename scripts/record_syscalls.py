"""Record the syscalls real parsers make in the parse child; write the allow-list's evidence.

Writes ``src/capsa/guard/sandbox/_recorded_syscalls.py``. The parsers run the
way the pool runs them: one `IsolatedExtractor` over `default_router()`
with ``light_path=False`` (so plain text goes through a child too), the
default sandbox, one worker, and every file through `extract_attachment`,
so e-mail attachments come back and go through their own child.

Method: ``strace`` attached from outside. The pool is started first; its
zygote (the PID-namespace init, host pid ``pool.health["pid"]``) is then
traced with ``strace -f -ff -ttt --decode-pids=pidns -p PID``, as root, so
every child it forks from then on is traced from its first instruction
(the spare that was already waiting is retired by a warm-up file that is
not counted). Tracing from outside needs no change to the zygote: seccomp
and Landlock restrict what the traced processes call, not what the tracer
does, and ``--decode-pids=pidns`` turns the namespace's pids in ``clone``'s
results into host pids, so each trace file's parent is known.

What counts: a *parse child* is a process the zygote forks (a spare) and
every process or thread below it (``tesseract`` and ``pandoc`` started
through `subprocess`, their threads), all of which run under the child's
filter. The zygote's own calls never count. A spare's calls count from the
end of its confinement on: the last ``seccomp`` filter it installs itself,
else ``landlock_restrict_self``, else ``prctl(PR_SET_NO_NEW_PRIVS)``; the
set-up calls before that point are listed apart in ``CONFINING``. Each spare
belongs to the file whose request window holds its last syscall (it is
killed before the zygote answers); a spare that never got a file (retired
at close) is counted under ``"(idle spare)"``.

Files: ``tests/realdocs/files``, ``tests/realdocs/sample-files``,
``/work/shared/realdocs`` (where present) and generated samples of every
kind from `capsa.guard.samples`, good ones and a few hostile ones that end
in the child's error paths (recursion, memory, refused pre-flight).

Usage (as root, strace installed; under a minute on a laptop)::

    .venv/bin/python scripts/record_syscalls.py [--keep-traces DIR] [--output PATH]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import IsolatedExtractor
from capsa.guard.extract import Attachment, extract_attachment
from capsa.guard.extractors import default_router
from capsa.guard.limits import ExtractionLimits
from capsa.guard.port import Parsed
from capsa.guard.sandbox import seccomp
from capsa.guard.sniff import media_type_for_name

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "src/capsa/guard/sandbox/_recorded_syscalls.py"
FILE_SETS = (ROOT / "tests/realdocs/files", ROOT / "tests/realdocs/sample-files",
             Path("/work/shared/realdocs"))
SKIPPED_NAMES = frozenset({"LICENSE", "files.json", "README.md"})
"""Licence and index files that sit beside the documents, not documents themselves."""

LIMITS = ExtractionLimits(timeout_s=300.0, cpu_s=300, max_pages=50, max_text_chars=2_000_000,
                          max_total_chars=4_000_000)
"""Default limits but for time and text: strace slows a child several-fold, and a file
refused for length before it is parsed would record nothing."""

NOTED = ("socket", "socketpair", "prlimit64", "setpgid", "setsid", "setpriority",
         "memfd_create", "sendto", "sendmsg", "chmod", "fchmod", "fchmodat", "fchmodat2",
         "chown", "fchown", "lchown", "fchownat", "utimensat", "setxattr", "lsetxattr",
         "fsetxattr", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
         "clone", "clone3", "vfork", "fork", "ioctl", "mmap", "mprotect", "pkey_mprotect",
         "kill", "tgkill", "tkill", "execve", "unshare", "personality")
"""Syscalls whose argument patterns are written to ``ARGUMENT_NOTES``."""

ALWAYS_NEEDED: tuple[tuple[str, str], ...] = (
    ("exit_group", "every process ends with it, os._exit included"),
    ("exit", "every thread (OpenMP, pandoc's runtime, Python threads) ends with it"),
    ("rt_sigreturn", "return from any signal handler (SIGCHLD, Python's SIGINT, GHC's timer)"),
    ("restart_syscall", "the kernel resumes a sleep or wait a signal interrupted"),
    ("rt_sigaction", "libc, Python and subprocess install and reset handlers"),
    ("rt_sigprocmask", "subprocess and pthread_create block signals around fork and clone"),
    ("sigaltstack", "faulthandler and new threads set up an alternate signal stack"),
    ("brk", "glibc malloc grows the heap"),
    ("mmap", "large allocations, thread stacks and shared libraries"),
    ("munmap", "large frees and thread exit; a MemoryError path frees arenas"),
    ("mremap", "realloc of a large block (a growing bytes or list buffer)"),
    ("mprotect", "thread stack guards, the dynamic loader's RELRO"),
    ("madvise", "glibc free trims arenas (MADV_DONTNEED); thread exit frees its stack"),
    ("futex", "every lock and condition between threads"),
    ("sched_yield", "spin locks in glibc and OpenMP back off with it"),
    ("set_robust_list", "glibc calls it in every new thread and after fork"),
    ("rseq", "glibc 2.35+ registers restartable sequences in every new thread"),
    ("getrandom", "hash seeds, tempfile names, os.urandom, uuid"),
    ("clock_gettime", "time.monotonic where the vDSO is unavailable or falls back"),
    ("clock_nanosleep", "time.sleep and subprocess's polling waits"),
    ("nanosleep", "usleep in C libraries"),
    ("wait4", "subprocess reaps tesseract and pandoc"),
    ("waitid", "os.waitid and some subprocess paths"),
    ("kill", "pytesseract's timeout kills tesseract; subprocess.kill"),
    ("tgkill", "abort() and raise() signal the calling thread (a C assertion, SIGABRT)"),
    ("getpid", "abort(), raise() and Python's fork checks"),
    ("gettid", "abort(), raise() and thread identity"),
    ("write", "the result frame, and a traceback on stderr"),
    ("writev", "glibc writes its fatal messages (malloc corruption) with writev"),
    ("read", "the request frame and every file read"),
    ("close", "every file and pipe"),
    ("getrusage", "the spare adds its own set-up time to the CPU limit"),
    ("prlimit64", "the file's CPU, memory and file-size limits (own pid only)"),
    ("clone", "threads and subprocess's fork of tesseract and pandoc"),
    ("clone3", "glibc 2.34+ tries it first: answer ENOSYS, never kill, so it falls back"),
    ("vfork", "subprocess's vfork path for tesseract and pandoc"),
    ("execve", "subprocess runs tesseract and pandoc"),
    ("pipe2", "subprocess's pipes"),
    ("dup2", "subprocess wires the child's stdio"),
    ("dup3", "dup2 on AArch64, which has no dup2"),
    ("poll", "subprocess.communicate waits on pipes"),
    ("ppoll", "poll on AArch64, which has no poll"),
    ("getdents64", "subprocess closes inherited fds by listing /proc/self/fd"),
    ("sched_getaffinity", "os.cpu_count, OpenMP and tesseract size their thread pools"),
    ("unlink", "tempfile and pytesseract remove their scratch files"),
    ("unlinkat", "unlink and rmdir on AArch64, and shutil.rmtree"),
    ("lseek", "buffered reads and tell()"),
    ("fstat", "every open() checks what it opened"),
    ("newfstatat", "os.stat, and fstat in newer glibc"),
    ("ioctl", "isatty (TCGETS) on every open(); FIONBIO"),
    ("fcntl", "close-on-exec and non-blocking flags"),
    ("faccessat", "access on AArch64 (shutil.which finding tesseract and pandoc)"),
    ("faccessat2", "access with flags, which newer glibc tries first"),
    ("mkdirat", "mkdir on AArch64 (pandoc's and tempfile's scratch directories)"),
)
"""Calls a recording can miss because the path that makes them is rare, each with why."""

_LINE = re.compile(r"^(\d+\.\d+) ([a-z_][a-z0-9_]*)\((.*)$")
_RESULT = re.compile(r"\)\s+= (.*)$")
_HOST_PID = re.compile(r"(\d+) /\* (\d+) in strace's PID NS \*/")
_ERRNO = re.compile(r"-1 (E[A-Z0-9]+)")


@dataclass
class Window:
    """One request to the pool: which file, what kind, when."""

    source: str
    label: str
    kind: str
    start: float
    end: float = 0.0


@dataclass
class Call:
    """One syscall line of a trace."""

    time: float
    name: str
    args: list[str]
    result: str


@dataclass
class Trace:
    """One traced process or thread."""

    pid: int
    calls: list[Call] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)
    """The program making each call: the exec'd binary from a successful ``execve`` on."""


class _RecordingPool(IsolatedExtractor):
    """An `IsolatedExtractor` that notes when each request to a child began and ended."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.windows: list[Window] = []
        self.source = ""

    def run_parsed(self, kind: str, media_type: str | None, payload: bytes,
                   limits: ExtractionLimits, *, label: str, **options: Any) -> Parsed:
        window = Window(self.source, label, kind, time.time())
        try:
            return super().run_parsed(kind, media_type, payload, limits, label=label,
                                      **options)
        finally:
            window.end = time.time()
            self.windows.append(window)


# ------------------------------------------------------------------------------ the files


def real_files(roots: Iterable[Path]) -> Iterator[tuple[str, str, bytes]]:
    """(set, label, bytes) for every file under the real-document sets that exist here."""
    for root in roots:
        if not root.is_dir():
            print(f"skipping {root}: not here", file=sys.stderr)
            continue
        name = str(root.relative_to(ROOT)) if root.is_relative_to(ROOT) else str(root)
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.name not in SKIPPED_NAMES:
                yield name, str(path.relative_to(root)), path.read_bytes()


def generated_files() -> Iterator[tuple[str, str, bytes]]:
    """Good samples of every kind, then a few hostile ones that end in the child's error paths."""
    from PIL import Image

    from capsa.guard import samples

    def image_as(fmt: str) -> bytes:
        image = Image.open(io.BytesIO(samples.png_with_text("Northwind Harbor notice", size=40)))
        out = io.BytesIO()
        image.convert("RGB").save(out, format=fmt)
        return out.getvalue()

    text = "Northwind Harbor opens the east berth on Monday."
    good: dict[str, Callable[[], bytes]] = {
        **{f"sample.{kind}": make for kind, make in samples.SAMPLES.items()},
        "pdf_with_text.pdf": lambda: samples.pdf_with_text([text, "Second page."]),
        "docx_bytes.docx": lambda: samples.docx_bytes(samples.paragraphs_xml([text] * 3)),
        "pptx_with_slides.pptx": lambda: samples.pptx_with_slides(3),
        "pptx_with_texts.pptx": lambda: samples.pptx_with_texts(
            [[text], ["berths", "cranes"]], table=[["a", "b"], ["1", "2"]]),
        "xlsx_with_cells.xlsx": lambda: samples.xlsx_with_cells([["berth", "open"], [text, 1]]),
        "png_with_text.png": lambda: samples.png_with_text(text),
        "image.jpg": lambda: image_as("JPEG"),
        "image.webp": lambda: image_as("WEBP"),
        "frames.tiff": lambda: samples.tiff_frames(2),
        "eml_simple.eml": lambda: samples.eml_simple(text),
        "eml_with_attachments.eml": lambda: samples.eml_with_attachments(text, [
            ('filename="notes.txt"', "text/plain", text.encode()),
            ('filename="berths.pdf"', "application/pdf", samples.pdf_with_text([text])),
            ('filename="scan.png"', "image/png", samples.png_with_text(text))]),
        "html_page.html": lambda: samples.html_page([text, "Second paragraph."], main=True),
        "hidden.html": lambda: samples.HIDDEN_HTML,
        "epub_chapters.epub": lambda: samples.epub_chapters([[text, "more"], ["two"]]),
        "notes.txt": lambda: text.encode(),
        "notes.md": lambda: f"# Harbor\n\n{text}\n".encode(),
        "berths.csv": lambda: b"berth,open\neast,yes\n",
        "berths.json": lambda: b'{"berth": "east", "open": true}',
        "utf16.txt": samples.utf16_lone_surrogate,
    }
    hostile: dict[str, Callable[[], bytes]] = {
        "pdf_deep_nesting.pdf": samples.pdf_deep_nesting,
        "pdf_flate_bomb.pdf": samples.pdf_flate_bomb,
        "pdf_xobject_loop.pdf": samples.pdf_xobject_loop,
        "pdf_encrypted.pdf": samples.pdf_encrypted,
        "docx_billion_laughs.docx": samples.docx_billion_laughs,
        "docx_deep_nesting.docx": samples.docx_deep_nesting,
        "png_ztxt_bomb.png": samples.png_ztxt_bomb,
        "apng_with_bad_frame.png": samples.apng_with_bad_frame,
        "html_nested.html": lambda: samples.html_nested(5000),
        "eml_nested_multipart.eml": lambda: samples.eml_nested_multipart(200),
    }
    for name, make in good.items():
        yield "samples", name, make()
    for name, make in hostile.items():
        yield "samples (hostile)", name, make()


# ------------------------------------------------------------------------------ tracing


def _attached(pid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("TracerPid:") and line.split()[1] != "0":
                    return True
        time.sleep(0.05)
    return False


def record(files: list[tuple[str, str, bytes]], trace_dir: Path) -> tuple[list[Window], int]:
    """Run every file through a traced pool; return the request windows and the zygote's pid."""
    strace = shutil.which("strace") or "/usr/bin/strace"
    pool = _RecordingPool(default_router(), workers=1, light_path=False, limits=LIMITS)
    try:
        zygote = int(pool.health["pid"])
        tracer = subprocess.Popen(
            [strace, "-f", "-ff", "-ttt", "-qq", "-s", "64", "--decode-pids=pidns",
             "-o", str(trace_dir / "trace"), "-p", str(zygote)],
            stdout=subprocess.DEVNULL)
        if not _attached(zygote):
            tracer.kill()
            raise SystemExit(f"strace could not attach to the zygote (pid {zygote})")
        pool.source = "warm-up"  # retires the spare forked before strace attached
        extract_attachment(Attachment(label="warm-up.html", payload=b"<p>warm</p>"), pool,
                           LIMITS)
        for number, (source, label, payload) in enumerate(files, 1):
            pool.source = source
            started = time.monotonic()
            try:
                result = extract_attachment(
                    Attachment(label=label.rsplit("/", 1)[-1], payload=payload,
                               media_type=media_type_for_name(label)), pool, LIMITS)
                outcome = f"{len(result.text)} chars"
            except (IngestionRejected, ExtractionFailed) as error:
                outcome = f"{type(error).__name__}: {str(error)[:90]}"
            print(f"[{number}/{len(files)}] {source}/{label}: {outcome} "
                  f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    finally:
        pool.close()
    try:
        tracer.wait(timeout=30)
    except subprocess.TimeoutExpired:
        tracer.terminate()
        tracer.wait()
    return pool.windows, zygote


# ------------------------------------------------------------------------------ parsing


def split_args(text: str) -> list[str]:
    """Top-level, comma-separated arguments of one strace line (after the opening bracket)."""
    args: list[str] = []
    depth = 0
    quoted = False
    current: list[str] = []
    escaped = False
    for char in text:
        if quoted:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif char == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    tail = "".join(current).strip()
    if tail:
        args.append(tail)
    return args


def read_trace(path: Path) -> Trace:
    """Every syscall of one trace file, and the pids it started."""
    trace = Trace(int(path.name.rsplit(".", 1)[1]))
    with open(path, errors="replace") as lines:
        for line in lines:
            match = _LINE.match(line.rstrip("\n"))
            if match is None:
                continue  # signals (---), exits (+++), resumed halves
            stamp, name, rest = match.groups()
            result = _RESULT.search(rest)
            call = Call(float(stamp), name, split_args(rest), result.group(1) if result else "?")
            trace.calls.append(call)
            if name in ("clone", "clone3", "fork", "vfork") and result:
                host = _HOST_PID.search(result.group(1))
                if host:
                    trace.children.append(int(host.group(2)))
                elif result.group(1).split()[0].isdigit():
                    trace.children.append(int(result.group(1).split()[0]))
            if name == "execve" and call.result.startswith("0") and call.args:
                trace.programs.append(os.path.basename(call.args[0].strip('"')))
            else:
                trace.programs.append("")
    return trace


_CONFINED_BY = (
    lambda c: c.name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in "".join(c.args[:1]),
    lambda c: c.name == "prctl" and c.args[:1] == ["PR_SET_SECCOMP"],
    lambda c: c.name == "landlock_restrict_self",
    lambda c: c.name == "prctl" and c.args[:1] == ["PR_SET_NO_NEW_PRIVS"],
)


def confined_from(trace: Trace) -> int:
    """Index of the first call a spare makes under its complete sandbox."""
    for test in _CONFINED_BY:
        found = [i for i, call in enumerate(trace.calls) if test(call)]
        if found:
            return found[-1] + 1
    return 0


def _errno(result: str) -> str:
    match = _ERRNO.match(result)
    return f" -> {match.group(1)}" if match else ""


def _pid_relation(arg: str, own: int, group: set[int], zero: str) -> str:
    host = _HOST_PID.search(arg)
    value = int(host.group(2)) if host else int(arg) if arg.lstrip("-").isdigit() else None
    if value == 0:
        return f"0 ({zero})"
    if value == own:
        return "own pid"
    if value is not None and value in group:
        return "a process of the same parse child"
    return "another pid" if value is not None else arg


def note(call: Call, trace: Trace, group: set[int]) -> str | None:
    """The argument pattern worth keeping for one call of a `NOTED` syscall, or None."""
    a = call.args + [""] * 6
    failed = _errno(call.result)
    if call.name in ("socket", "socketpair"):
        return f"{a[0]}, {a[1]}{failed}"
    if call.name == "prlimit64":
        return (f"pid {_pid_relation(a[0], trace.pid, group, 'itself')}, {a[1]}, "
                f"{'get' if a[2] == 'NULL' else 'set'}{failed}")
    if call.name in ("setpgid", "setpriority", "setsid", "memfd_create", "unshare",
                     "personality"):
        return f"({', '.join(call.args[:3])}){failed}"
    if call.name == "sendto":
        return f"flags {a[3]}, to {'NULL' if a[4] == 'NULL' else 'an address'}{failed}"
    if call.name == "sendmsg":
        return f"flags {a[2]}{failed}"
    if call.name in ("chmod", "fchmod"):
        return f"mode {a[1]}{failed}"
    if call.name in ("fchmodat", "fchmodat2"):
        return f"mode {a[2]}{failed}"
    if call.name in ("chown", "fchown", "lchown"):
        return f"uid {a[1]}, gid {a[2]}{failed}"
    if call.name == "fchownat":
        return f"uid {a[2]}, gid {a[3]}{failed}"
    if call.name == "utimensat":
        return f"path {'NULL' if a[1] == 'NULL' else 'given'}, times {a[2][:40]}, {a[3]}{failed}"
    if call.name.endswith("setxattr"):
        return f"name {a[1]}{failed}"
    if call.name.startswith("inotify_"):
        return f"({', '.join(call.args[:3])[:80]}){failed}"
    if call.name == "clone":
        flags = next((arg for arg in call.args if arg.startswith("flags=")), "flags=?")
        return f"{flags}{failed}"
    if call.name == "clone3":
        flags = re.search(r"flags=([A-Z_|0-9x]+)", a[0])
        return f"flags={flags.group(1) if flags else '?'}{failed}"
    if call.name in ("fork", "vfork"):
        return f"(){failed}"
    if call.name == "ioctl":
        return f"{a[1]}{failed}"
    if call.name in ("mmap", "mprotect", "pkey_mprotect"):
        prot = a[2]
        if "PROT_EXEC" not in prot:
            return None
        if call.name == "mmap":
            anonymous = "MAP_ANONYMOUS" in a[3]
            return f"{prot}, {a[3]}, {'anonymous' if anonymous else 'file-backed'}{failed}"
        return f"{prot}{failed}"
    if call.name in ("kill", "tgkill", "tkill"):
        target = a[1] if call.name == "tgkill" else a[0]
        sig = a[2] if call.name == "tgkill" else a[1]
        return f"{_pid_relation(target, trace.pid, group, 'own group')}, {sig}{failed}"
    if call.name == "execve":
        return f"{os.path.basename(a[0].strip(chr(34)))}{failed}"
    return None


@dataclass
class Findings:
    """What the traces say, ready to be written out."""

    recorded: set[str] = field(default_factory=set)
    confining: set[str] = field(default_factory=set)
    by_kind: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    notes: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    files_by_kind: collections.Counter[str] = field(default_factory=collections.Counter)
    failed: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    refused: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    """Calls the filter refused (``ENOSYS`` off the list, ``EPERM`` on `REFUSED`) every time
    they were made, by kind: the parsers survived without them, so they stay refused."""
    programs: set[str] = field(default_factory=set)
    children: int = 0
    processes: int = 0


def analyse(trace_dir: Path, windows: list[Window], zygote: int) -> Findings:
    """Attribute every trace to its parse child and file; gather names and argument notes."""
    traces = {trace.pid: trace for trace in map(read_trace, trace_dir.glob("trace.*"))}
    findings = Findings()
    counted = [w for w in windows if w.source != "warm-up"]
    for window in counted:
        findings.files_by_kind[window.kind] += 1
    spares = [pid for pid in traces.get(zygote, Trace(zygote)).children if pid in traces]
    for spare in spares:
        group: list[int] = [spare]
        for pid in group:  # breadth first: every process and thread below the spare
            group.extend(child for child in traces[pid].children if child in traces)
        members = set(group)
        last = max((call.time for call in traces[spare].calls), default=0.0)
        window = next((w for w in windows if w.start <= last <= w.end), None)
        if window is not None and window.source == "warm-up":
            continue
        kind = window.kind if window is not None else "(idle spare)"
        findings.children += window is not None
        start = confined_from(traces[spare])
        findings.confining.update(call.name for call in traces[spare].calls[:start])
        inherited = {spare: "python"}
        for pid in group:
            trace = traces[pid]
            program = inherited.get(pid, "python")
            findings.processes += 1
            for index, call in enumerate(trace.calls):
                program = trace.programs[index] or program
                findings.programs.add(program)
                if call.name in ("clone", "clone3", "fork", "vfork"):
                    host = _HOST_PID.search(call.result)
                    if host:
                        inherited[int(host.group(2))] = program
                confining = pid == spare and index < start
                if not confining and _filter_refused(call, kind):
                    findings.refused[call.name].add(kind)
                elif not confining:
                    findings.recorded.add(call.name)
                    findings.by_kind[kind].add(call.name)
                    if _errno(call.result):
                        findings.failed[call.name].add(_errno(call.result)[len(" -> "):])
                if call.name in NOTED:
                    pattern = note(call, trace, members)
                    if pattern is not None:
                        where = " (confining)" if confining else ""
                        findings.notes[call.name].add(f"{program}{where}: {pattern}")
    for name in findings.recorded:  # made and answered at least once: not refused-only
        findings.refused.pop(name, None)
    return findings


def _filter_refused(call: Call, kind: str) -> bool:
    """Whether the child's own seccomp filter answered this call (it never reached the kernel).

    A call off the allow-list gets ``ENOSYS``, a call on `seccomp.REFUSED` ``EPERM``;
    LibreOffice's children (`seccomp.UNIX_LISTEN_KINDS`) run the filter that also
    lets them listen on a Unix socket.
    """
    code = _errno(call.result)[len(" -> "):]
    allowed = seccomp.allowed(unix_listen=kind in seccomp.UNIX_LISTEN_KINDS)
    if code == "ENOSYS":
        return call.name not in allowed
    return code == "EPERM" and call.name in seccomp.REFUSED and call.name not in allowed


# ------------------------------------------------------------------------------ output


def _frozenset_source(names: Iterable[str], indent: str) -> list[str]:
    items = sorted(names)
    if not items:
        return [f"{indent}frozenset()"]
    lines = [f"{indent}frozenset({{"]
    line = indent + "   "
    for name in items:
        item = f' "{name}",'
        if len(line) + len(item) > 99:
            lines.append(line)
            line = indent + "   "
        line += item
    lines.append(line)
    lines.append(f"{indent}}})")
    return lines


def render(findings: Findings, files: list[tuple[str, str, bytes]], seconds: float) -> str:
    """The generated module's source."""
    sets = collections.Counter(source for source, _, _ in files)
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(findings.files_by_kind.items()))
    today = datetime.date.today().isoformat()
    summary = textwrap.fill(
        f"Generated by ``scripts/record_syscalls.py`` on {today} from {len(files)} files ("
        + "; ".join(f"{source}: {count}" for source, count in sorted(sets.items()))
        + f"), each through its own parse child: {findings.children} requests to a child "
        f"in all (by kind: {kinds}). {findings.processes} processes and threads traced, "
        f"running {', '.join(sorted(findings.programs))}; recording took {seconds:.0f} s.",
        width=88, break_on_hyphens=False)
    header = [
        '"""The syscalls real parsers made in the parse child: generated, do not edit.',
        "",
        *summary.splitlines(),
        "",
        "Method: strace attached as root to the pool's zygote, following every process",
        "it forks; a spare's calls count from the end of its own confinement, and",
        "those of everything below it (tesseract, pandoc, threads) count whole.",
        "`RECORDED` is the union of the calls the filter let through (a call it refused",
        "every time is in `REFUSED_SURVIVED` instead), `BY_KIND` the same per kind,",
        "`CONFINING` the calls a",
        "spare made only while confining itself (before its filter), and",
        "`ARGUMENT_NOTES` the distinct argument patterns of the calls an allow-list",
        "may want to narrow, each prefixed with the program that made it.",
        "`ALWAYS_NEEDED` is not recorded: calls on rare paths (exit, signals,",
        "errors) an allow-list must keep even if no recorded file took them.",
        "Names are x86-64's; AArch64 lacks some (``open``, ``stat``, ``poll``,",
        "``dup2``...), which its libc replaces with the ``*at`` and ``p*`` forms.",
        "",
        "Regenerate (as root, strace installed)::",
        "",
        "    .venv/bin/python scripts/record_syscalls.py",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        '__all__ = ["ALWAYS_NEEDED", "ARGUMENT_NOTES", "BY_KIND", "CONFINING", "FAILED",',
        '           "RECORDED", "REFUSED_SURVIVED"]',
        "",
    ]
    body = ["RECORDED: frozenset[str] = " + _frozenset_source(findings.recorded, "")[0].lstrip()]
    body += _frozenset_source(findings.recorded, "")[1:]
    body.append('"""Every syscall a parse child or its subprocesses made, once confined."""')
    body.append("")
    body.append("BY_KIND: dict[str, frozenset[str]] = {")
    for kind in sorted(findings.by_kind):
        source = _frozenset_source(findings.by_kind[kind], "    ")
        body.append(f'    "{kind}": {source[0].lstrip()}')
        body += source[1:-1]
        body.append(source[-1] + ",")
    body.append("}")
    body.append('"""The same, per kind the router was asked for."""')
    body.append("")
    confining = _frozenset_source(findings.confining - findings.recorded, "")
    body.append("CONFINING: frozenset[str] = " + confining[0].lstrip())
    body += confining[1:]
    body.append('"""Calls made only between the fork and the end of confinement, never after."""')
    body.append("")
    body.append("ARGUMENT_NOTES: dict[str, tuple[str, ...]] = {")
    for name in sorted(findings.notes):
        body.append(f'    "{name}": (')
        for pattern in sorted(findings.notes[name]):
            body += _quoted(pattern, "        ")
        body.append("    ),")
    body.append("}")
    body.append('"""Distinct argument patterns, ``program: pattern [-> errno]``."""')
    body.append("")
    body.append("FAILED: dict[str, tuple[str, ...]] = {")
    for name in sorted(findings.failed):
        errors = ", ".join(f'"{code}"' for code in sorted(findings.failed[name]))
        body.append(f'    "{name}": ({errors},),')
    body.append("}")
    body.append('"""Errors recorded calls got back once confined, which the parsers survived."""')
    body.append("")
    body.append("REFUSED_SURVIVED: dict[str, tuple[str, ...]] = {")
    for name in sorted(findings.refused):
        kinds = ", ".join(f'"{kind}"' for kind in sorted(findings.refused[name]))
        body.append(f'    "{name}": ({kinds},),')
    body.append("}")
    body.append('"""Calls the filter refused every time a parser made them, by kind: the parsers')
    body.append('survived without them (LibreOffice\'s ``chmod``, glibc\'s connect to ``nscd``),')
    body.append('so they are not in `RECORDED` and stay refused."""')
    body.append("")
    body.append("ALWAYS_NEEDED: tuple[str, ...] = (")
    width = max(len(name) for name, _ in ALWAYS_NEEDED) + 4
    for name, reason in ALWAYS_NEEDED:
        item = f'    "{name}",'
        body.append(f"{item.ljust(width + 6)}# {reason}")
    body.append(")")
    body.append('"""Allowed whatever a recording shows: rare but legitimate paths."""')
    return "\n".join(header + body) + "\n"


def _quoted(text: str, indent: str) -> list[str]:
    """`text` as a string literal ending in a comma, split over lines where it is long."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    width = 96 - len(indent)
    if len(escaped) <= width:
        return [f'{indent}"{escaped}",']
    pieces: list[str] = []
    while len(escaped) > width - 1:
        cut = max(escaped.rfind("|", 0, width - 1), escaped.rfind(" ", 0, width - 1))
        cut = cut + 1 if cut > 0 else width - 1
        pieces.append(escaped[:cut])
        escaped = escaped[cut:]
    pieces.append(escaped)
    lines = [f'{indent}("{pieces[0]}"'] + [f'{indent} "{piece}"' for piece in pieces[1:]]
    lines[-1] += "),"
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--keep-traces", type=Path, default=None,
                        help="write the strace files here and keep them")
    parser.add_argument("--max-files", type=int, default=None,
                        help="trace only the first N files (a quick check of the script)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("run as root: strace attaches to the pool's zygote", file=sys.stderr)
        return 2
    files = [*real_files(FILE_SETS), *generated_files()][:args.max_files]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if args.keep_traces is not None:
            trace_dir = args.keep_traces
            trace_dir.mkdir(parents=True, exist_ok=True)
            for old in trace_dir.glob("trace.*"):
                old.unlink()
        else:
            trace_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        windows, zygote = record(files, trace_dir)
        findings = analyse(trace_dir, windows, zygote)
    seconds = time.monotonic() - started
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(findings, files, seconds))
    print(f"wrote {args.output}: {len(findings.recorded)} syscalls from {findings.children} "
          f"children in {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
