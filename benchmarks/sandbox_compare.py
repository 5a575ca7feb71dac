"""capsa's own sandbox layers against bubblewrap, measured on this machine (issue 19, item 6).

Three figures:

1. **Start cost per process.** ``bwrap`` with the namespaces and mounts a
   per-file box needs, running ``/bin/true``, ``python -I -c pass`` and
   ``python -I -c "import unstructured.partition.auto"`` (what a fresh
   per-file interpreter would import; capsa's warm zygote exists to avoid
   that), against the same commands without bwrap. The two sides alternate
   run by run, so both see the same machine.
2. **bwrap as the outer box of a worker.** `IsolatedExtractor` pools whose
   worker command gets a ``bwrap ...`` prefix (``subprocess.Popen`` is
   patched only while the pools start; nothing in ``src/`` changes), in
   several set-ups, against a plain pool: whether the worker starts, which
   sandbox layers it reports (nested namespaces may be refused), and the
   per-file latency of small files through each pool.
3. **Coverage.** Probes run inside a per-file box (and on the host, for
   contrast): System V shared memory, ``/proc``, mounts, the scratch tmpfs's
   byte and inode caps, cgroups, network, nested user namespaces, a
   survivor process, ``--seccomp`` with capsa's own filter. The table says,
   for each protection capsa wants, whether bwrap gives it as an outer box,
   as a per-file wrapper, or not at all.

Nothing here asserts on time. Needs ``bwrap`` on ``PATH`` (``apt-get install
bubblewrap``); without it the script records that and stops after the host
probe.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "sandbox_compare.json"
CORPUS = Path(__file__).resolve().parent.parent / "src" / "capsa" / "demo" / "corpus"
SMALL_FILES = ("handbook.html", "invoice.pdf", "remote-work.md", "policy-change.eml",
               "equipment-prices.xlsx")
"""Small corpus files (2-7 KB) for the per-file latency figure."""
SCRATCH_BYTES = 64 * 1024 * 1024
"""``--size`` of the per-file scratch tmpfs."""
PROBE_SCRATCH_BYTES = 8 * 1024 * 1024
"""A smaller scratch for the probe, so filling it is quick."""
SANDBOX_UID = 65534
"""The uid inside bwrap's user namespace (``--uid``): ``nobody``."""
SYSTEM_READ = (
    "/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/fonts", "/etc/mime.types", "/etc/magic", "/etc/ImageMagick-6", "/etc/passwd",
    "/etc/group", "/sys/devices/system/cpu",
)
"""System paths a parser reads (the same list capsa's Landlock rules allow)."""
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64")
"""Merged-/usr symlinks, recreated as symlinks inside the box (bound when real directories)."""
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
       "HOME": "/tmp", "TMPDIR": "/tmp", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
       "UNSTRUCTURED_DISABLE_NOTICE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""The environment both sides of the start-cost figure get."""
COMMANDS: dict[str, list[str]] = {
    "true": ["/bin/true"],
    "python_pass": [sys.executable, "-I", "-c", "pass"],
    "python_import_unstructured": [sys.executable, "-I", "-c",
                                   "import unstructured.partition.auto"],
    "python_parse_html": [sys.executable, "-I", "-c",
                          "import sys\nfrom capsa.guard.extractors import UnstructuredExtractor\n"
                          "UnstructuredExtractor().extract('html', 'text/html', "
                          "sys.stdin.buffer.read(), max_pages=10)"],
}
"""Figure 1's commands. The last is the whole per-file work in a fresh interpreter: the
2.8 KB ``handbook.html`` on stdin, parsed as capsa's worker would (compare figure 2b)."""
COMMAND_STDIN = {"python_parse_html": "handbook.html"}
OUTER_VARIANTS: dict[str, dict[str, Any]] = {
    "bwrap_userns_nobody": {
        "note": "--unshare-all, --uid 65534, --cap-drop ALL: the worker is unprivileged in "
                "bwrap's user namespace and builds its own namespaces inside it",
        "user_namespace": True, "uid": SANDBOX_UID, "cap_drop": True},
    "bwrap_userns_root": {
        "note": "--unshare-all, uid 0 in bwrap's user namespace (caps kept): the worker takes "
                "its root path and wants a uid of its own for the parse child",
        "user_namespace": True, "uid": None, "cap_drop": False},
    "bwrap_userns_nobody_disable_userns": {
        "note": "as bwrap_userns_nobody plus --disable-userns: no nested user namespace",
        "user_namespace": True, "uid": SANDBOX_UID, "cap_drop": True,
        "extra": ["--unshare-user", "--disable-userns"]},
    "bwrap_host_root": {
        "note": "no user namespace (real root, all capabilities): mount, PID, IPC, net, UTS "
                "and cgroup namespaces only; the worker keeps full root inside them",
        "user_namespace": False, "uid": None, "cap_drop": False},
}
"""Set-ups of bwrap as the outer box of a worker."""


# --------------------------------------------------------------------------- pure helpers


def bwrap_argv(*, ro_binds: Sequence[str], symlinks: Sequence[tuple[str, str]] = (),
               binds: Sequence[str] = (), scratch: str = "/tmp",
               scratch_bytes: int = SCRATCH_BYTES, user_namespace: bool = True,
               uid: int | None = SANDBOX_UID, cap_drop: bool = True,
               seccomp_fd: int | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The ``bwrap`` prefix for a box: namespaces, binds, a sized scratch, a read-only root.

    ``/`` is bwrap's own tmpfs; everything the box sees is bound into it,
    read-only unless listed in `binds`, and ``/`` itself is remounted
    read-only last (bwrap leaves it writable otherwise). Without
    `user_namespace` (bwrap run by root) the box keeps root's capabilities
    unless `cap_drop`.

    Examples:
        >>> argv = bwrap_argv(ro_binds=["/usr"], symlinks=[("usr/bin", "/bin")])
        >>> argv[:2], argv[-1]
        (['bwrap', '--unshare-all'], '--')
        >>> argv[argv.index("--size") + 1:argv.index("--size") + 4]
        ['67108864', '--tmpfs', '/tmp']
    """
    if uid is not None and not user_namespace:
        raise ValueError("--uid needs a user namespace")
    argv = ["bwrap"]
    if user_namespace:
        argv.append("--unshare-all")
    else:
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup"]
    argv += ["--die-with-parent", "--new-session"]
    if uid is not None:
        argv += ["--uid", str(uid), "--gid", str(uid)]
    made: set[str] = {"/"}
    for path in ro_binds:
        argv += [*_parents(path, made), "--ro-bind", path, path]
    for target, link in symlinks:
        argv += ["--symlink", target, link]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(scratch_bytes), "--tmpfs", scratch]
    made.add(scratch)
    for path in binds:
        argv += [*_parents(path, made), "--bind", path, path]
    if cap_drop:
        argv += ["--cap-drop", "ALL"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += [*extra, "--remount-ro", "/", "--chdir", "/", "--"]
    return argv


def _parents(path: str, made: set[str]) -> list[str]:
    """``--perms 0755 --dir`` for each ancestor of `path` not made yet.

    bwrap run by root without a user namespace creates missing parents as
    0700, which an unprivileged parse child cannot traverse.

    Examples:
        >>> _parents("/root/.pyenv/v", {"/"})
        ['--perms', '0755', '--dir', '/root', '--perms', '0755', '--dir', '/root/.pyenv']
    """
    argv: list[str] = []
    parts = path.strip("/").split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        parent = "/" + "/".join(parts[:depth])
        if parent not in made:
            made.add(parent)
            argv += ["--perms", "0755", "--dir", parent]
    return argv


def is_worker_command(argv: Sequence[str]) -> bool:
    """Whether `argv` starts a capsa guard worker (``python ... -m capsa.guard.<module>``).

    Matches wherever the worker module lives (``capsa.guard._worker`` today,
    ``capsa.guard.sandbox.zygote`` after the move).

    Examples:
        >>> is_worker_command(["/usr/bin/python3", "-I", "-m", "capsa.guard._worker"])
        True
        >>> is_worker_command(["python", "-m", "pip", "install", "capsa"])
        False
    """
    args = list(argv)
    return any(arg == "-m" and index + 1 < len(args) and
               (args[index + 1] == "capsa.guard" or args[index + 1].startswith("capsa.guard."))
               for index, arg in enumerate(args))


def last_error_line(stderr: str) -> str:
    r"""The line of a worker's stderr that says why it stopped (warnings skipped).

    Examples:
        >>> last_error_line("x.py:1: RuntimeWarning: w\nTraceback ...\nOSError: [Errno 22] no\n")
        'OSError: [Errno 22] no'
    """
    lines = [line.strip() for line in stderr.splitlines()
             if line.strip() and "Warning:" not in line]
    return lines[-1] if lines else ""


def summarise(samples_s: Sequence[float]) -> dict[str, float | int]:
    """Median, p95, min and count of timings in seconds, as milliseconds.

    Examples:
        >>> summarise([0.001, 0.002, 0.003])["median_ms"]
        2.0
    """
    ordered = sorted(samples_s)
    if not ordered:
        return {"runs": 0}
    rank = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return {"runs": len(ordered), "median_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(ordered[rank] * 1000, 3), "min_ms": round(ordered[0] * 1000, 3)}


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain, aligned text table; numbers right-aligned, floats to 1 decimal.

    Examples:
        >>> print(format_table(["what", "ms"], [["true", 1.25], ["python", 12.0]]))
        what     ms
        ------ ----
        true    1.2
        python 12.0
    """
    def cell(value: object) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.1f}"
        return str(value)

    cells = [[cell(v) for v in row] for row in rows]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows)
               for i in range(len(headers))]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return " ".join((v.rjust(w) if numeric[i] else v.ljust(w))
                        for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    return "\n".join([line(list(headers)), " ".join("-" * w for w in widths),
                      *(line(r) for r in cells)])


# --------------------------------------------------------------------------- the box


def interpreter_roots() -> list[str]:
    """Directories this interpreter, its base Python and its packages live in."""
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    roots.update(p for p in sysconfig.get_paths().values() if p)
    roots.update(p for p in sys.path if p and os.path.isdir(p))
    found = {p for p in roots if os.path.exists(p)} | {
        os.path.realpath(p) for p in roots if os.path.exists(p)}
    return _outermost(found)


def _outermost(paths: Sequence[str] | set[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def box_paths() -> tuple[list[str], list[tuple[str, str]]]:
    """Read-only binds and symlinks for a box that runs this interpreter and its parsers."""
    symlinks: list[tuple[str, str]] = []
    ro = [p for p in SYSTEM_READ if os.path.exists(p)]
    for top in TOP_LINKS:
        if os.path.islink(top):
            symlinks.append((os.readlink(top), top))
        elif os.path.isdir(top):
            ro.append(top)
    tessdata = os.environ.get("TESSDATA_PREFIX")
    if tessdata and os.path.exists(tessdata):
        ro.append(tessdata)
    return _outermost([*ro, *interpreter_roots()]), symlinks


def per_file_argv(**overrides: Any) -> list[str]:
    """The per-file box of figure 1: every namespace, uid 65534, no capabilities."""
    ro, links = box_paths()
    return bwrap_argv(ro_binds=ro, symlinks=links, **overrides)


def bwrap_version() -> str | None:
    """``bwrap --version``, or None where bwrap is not installed."""
    if shutil.which("bwrap") is None:
        return None
    done = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or done.stderr.strip()


# --------------------------------------------------------------------------- 1. start cost


def _run_timed(argv: list[str], payload: bytes = b"") -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=ENV, cwd="/", input=payload,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-3:]} exited {done.returncode}: {done.stderr[-400:]!r}")
    return elapsed, done.returncode


def start_cost(runs: dict[str, int]) -> list[dict[str, Any]]:
    """Each command with and without the per-file bwrap box, alternating, `runs[name]` times."""
    prefix = per_file_argv()
    rows = []
    for name, command in COMMANDS.items():
        samples: dict[str, list[float]] = {"direct": [], "bwrap": []}
        stdin = (CORPUS / COMMAND_STDIN[name]).read_bytes() if name in COMMAND_STDIN else b""
        _run_timed(command, stdin)  # warm the page cache for both sides
        _run_timed(prefix + command, stdin)
        for index in range(runs[name]):
            order = ("direct", "bwrap") if index % 2 == 0 else ("bwrap", "direct")
            for side in order:
                argv = command if side == "direct" else prefix + command
                samples[side].append(_run_timed(argv, stdin)[0])
        direct, boxed = summarise(samples["direct"]), summarise(samples["bwrap"])
        rows.append({"command": name, "argv": command, "direct": direct, "bwrap": boxed,
                     "added_median_ms": round(boxed["median_ms"] - direct["median_ms"], 3)})
    return rows


# --------------------------------------------------------------------------- 2. outer box


@contextlib.contextmanager
def wrapped_workers(prefix_for: Callable[[dict[str, str]], list[str]],
                    log: list[dict[str, Any]]) -> Iterator[None]:
    """Patch `subprocess.Popen` so capsa guard workers start inside ``prefix_for(env)``.

    Only commands `is_worker_command` recognises change; the worker's
    stderr (dropped by capsa) goes to a file whose tail `log` keeps, so a
    worker that fails inside the box says why. Restored on exit.
    """
    real = subprocess.Popen

    class _Popen(real):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            if isinstance(args, list | tuple) and is_worker_command(args):
                env = kwargs.get("env") or dict(os.environ)
                args = [*prefix_for(env), *args]
                fd, path = tempfile.mkstemp(prefix="capsa-bwrap-err-")
                log.append({"argv": args, "stderr_path": path})
                kwargs["stderr"] = fd
                try:
                    super().__init__(args, *rest, **kwargs)
                finally:
                    os.close(fd)
                return
            super().__init__(args, *rest, **kwargs)

    subprocess.Popen = _Popen  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = real  # type: ignore[misc]


def _stderr_tail(log: list[dict[str, Any]]) -> str:
    for entry in log:
        path = entry.pop("stderr_path", None)
        if path:
            with contextlib.suppress(OSError):
                entry["stderr_tail"] = Path(path).read_text("utf-8", "replace")[-1200:]
                os.unlink(path)
    return "\n".join(e.get("stderr_tail", "") for e in log).strip()


def _outer_prefix(variant: dict[str, Any]) -> Callable[[dict[str, str]], list[str]]:
    ro, links = box_paths()

    def prefix(env: dict[str, str]) -> list[str]:
        # The worker's scratch (its TMPDIR, made by the pool) is the one writable bind.
        scratch = env.get("TMPDIR", tempfile.gettempdir())
        return bwrap_argv(ro_binds=ro, symlinks=links, binds=[scratch],
                          user_namespace=variant["user_namespace"], uid=variant["uid"],
                          cap_drop=variant["cap_drop"], extra=variant.get("extra", ()))
    return prefix


def _start_pool(name: str, variant: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    from capsa.guard import IsolatedExtractor
    from capsa.guard.extractors import default_router

    pool = IsolatedExtractor(default_router(), workers=1, light_path=False)
    info: dict[str, Any] = {"variant": name,
                            "note": variant["note"] if variant else "capsa's own worker"}
    log: list[dict[str, Any]] = []
    start = time.perf_counter()
    try:
        if variant is None:
            pool.start()
        else:
            with wrapped_workers(_outer_prefix(variant), log):
                pool.start()
        health = pool.health
    except Exception as exc:  # a finding, not a crash: record why the worker did not start
        tail = _stderr_tail(log)
        info.update(started=False, error=f"{type(exc).__name__}: {exc}",
                    worker_stderr=tail, why=last_error_line(tail))
        with contextlib.suppress(Exception):
            pool.close()
        return None, info
    info["start_s"] = round(time.perf_counter() - start, 3)
    report = health.sandbox
    info.update(started=True, active=report.active(), missing=report.missing(),
                details={n: s.detail for n, s in report.layers.items()},
                worker_stderr=_stderr_tail(log))
    if log:
        info["worker_argv"] = log[0]["argv"]
    return pool, info


def outer_box(rounds: int) -> dict[str, Any]:
    """Start a plain pool and one per bwrap set-up; time small files through each that starts."""
    from capsa.guard import extract_attachment
    from capsa.guard.extract import Attachment

    pools: dict[str, Any] = {}
    setups = []
    for name, variant in [("direct", None), *OUTER_VARIANTS.items()]:
        pool, info = _start_pool(name, variant)
        setups.append(info)
        if pool is not None:
            pools[name] = pool
    files = {n: (CORPUS / n).read_bytes() for n in SMALL_FILES}
    samples: dict[str, dict[str, list[float]]] = {p: {f: [] for f in files} for p in pools}
    texts: dict[str, dict[str, str]] = {p: {} for p in pools}
    failures: list[dict[str, str]] = []
    try:
        for pool_name, pool in pools.items():  # one untimed pass: first-use costs
            for label, payload in files.items():
                try:
                    doc = extract_attachment(Attachment(label=label, payload=payload), pool)
                except Exception as exc:  # a finding: this box breaks that parser
                    failures.append({"variant": pool_name, "file": label,
                                     "error": f"{type(exc).__name__}: {exc}"[:400]})
                    continue
                texts[pool_name][label] = doc.text
        broken = {(f["variant"], f["file"]) for f in failures}
        names = list(pools)
        for index in range(rounds):
            random.Random(index).shuffle(names)
            for pool_name in names:
                for label, payload in files.items():
                    if (pool_name, label) in broken:
                        continue
                    start = time.perf_counter()
                    extract_attachment(Attachment(label=label, payload=payload), pools[pool_name])
                    samples[pool_name][label].append(time.perf_counter() - start)
    finally:
        for pool in pools.values():
            pool.close()
    latency = []
    for pool_name, per_file in samples.items():
        for label, values in per_file.items():
            if not values:
                continue
            latency.append({"variant": pool_name, "file": label, "bytes": len(files[label]),
                            **summarise(values),
                            "text_matches_direct": texts[pool_name].get(label)
                            == texts.get("direct", {}).get(label)})
    overall = {p: summarise([v for vs in per_file.values() for v in vs])
               for p, per_file in samples.items()}
    return {"setups": setups, "latency": latency, "overall": overall, "rounds": rounds,
            "failures": failures,
            "files": list(files)}


# --------------------------------------------------------------------------- 3. probes

_PROBE = r"""
import ctypes, errno, json, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
out = {}
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
out["uid"] = os.getuid()
out["uid_map"] = " ".join(open("/proc/self/uid_map").read().split())
for key in ("CapEff", "CapBnd", "NoNewPrivs", "Seccomp"):
    out[key] = status.get(key, "").strip()
pids = [p for p in os.listdir("/proc") if p.isdigit()]
out["proc_pids_visible"] = len(pids)
out["host_pid_visible"] = os.path.exists("/proc/%s" % sys.argv[1])
shm = open("/proc/sysvipc/shm").read().split("\n")[1:]
out["host_shm_key_visible"] = any(l.split() and int(l.split()[0]) == int(sys.argv[2]) for l in shm)
seg = libc.shmget(0, 4096, 0o1600)
out["shmget_inside"] = "ok" if seg >= 0 else os.strerror(ctypes.get_errno())
if seg >= 0:
    libc.shmctl(seg, 0, None)
def writable(path):
    try:
        with open(path, "w"):
            pass
        os.unlink(path)
        return "writable"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
out["write_root"] = writable("/capsa-probe")
out["write_usr"] = writable("/usr/capsa-probe")
out["write_dev_shm"] = writable("/dev/shm/capsa-probe")
out["outside_binds_visible"] = {p: os.path.exists(p) for p in sys.argv[4].split(",")}
mounts = {}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] in ("/", "/tmp", "/proc", "/dev", "/dev/shm"):
        mounts[f[4]] = f[5] + " " + f[f.index("-") + 1] + " " + f[-1]
out["mounts"] = mounts
limit = int(sys.argv[3])
scratch = sys.argv[6]
written = 0
try:
    with open(scratch + "/fill", "wb") as fill:
        chunk = b"\0" * (1 << 20)
        while written < 2 * limit:
            fill.write(chunk); fill.flush(); written += len(chunk)
    out["scratch_fill"] = "no cap below %d bytes" % written
except OSError as exc:
    out["scratch_fill"] = "%s after %d bytes" % (errno.errorcode.get(exc.errno), written)
os.unlink(scratch + "/fill")
os.mkdir(scratch + "/inodes")
made = 0
try:
    for made in range(20000):
        open(scratch + "/inodes/%d" % made, "w").close()
    made += 1
    out["scratch_inodes"] = "created %d files (no inode cap met)" % made
except OSError as exc:
    out["scratch_inodes"] = "%s after %d files" % (errno.errorcode.get(exc.errno), made)
vfs = os.statvfs(scratch)
out["scratch_statvfs"] = {"bytes": vfs.f_blocks * vfs.f_frsize, "inodes": vfs.f_files}
out["cgroup"] = open("/proc/self/cgroup").read().strip().splitlines()[-1]
out["sys_fs_cgroup_present"] = os.path.isdir("/sys/fs/cgroup")
fd = libc.memfd_create(b"probe", 0)
try:
    os.ftruncate(fd, 64 << 20)
    os.pwrite(fd, b"\1" * (1 << 20), 0)
    out["memfd_64mb"] = "ok"
except OSError as exc:
    out["memfd_64mb"] = errno.errorcode.get(exc.errno)
out["net_interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect(("192.0.2.1", 9))
        out["tcp_connect"] = "connected"
    except OSError as exc:
        out["tcp_connect"] = errno.errorcode.get(exc.errno, str(exc))
    s.close()
    out["socket_inet"] = "allowed"
except OSError as exc:
    out["socket_inet"] = errno.errorcode.get(exc.errno, str(exc))
pid = os.fork()
if pid == 0:
    rc = libc.unshare(0x10000000)
    os._exit(0 if rc == 0 else ctypes.get_errno())
rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["nested_user_namespace"] = "allowed" if rc == 0 else errno.errorcode.get(rc, str(rc))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(15, sys.argv[5].encode(), 0, 0, 0)
        time.sleep(30)
    os._exit(0)
time.sleep(0.2)
print(json.dumps(out))
"""


def _host_shm_segment(libc: ctypes.CDLL) -> tuple[int, int]:
    key = 0x6361700 + os.getpid() % 4096
    seg = libc.shmget(key, 4096, 0o1600)
    return key, seg


def _find_survivor(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    found.append(int(entry))
    return found


def run_probe(prefix: list[str]) -> dict[str, Any]:
    """The probe inside `prefix` (``[]``: on the host); the survivor check runs after it exits.

    Inside the box it fills the box's ``/tmp``; on the host, a directory of its own.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    scratch = "/tmp" if prefix else tempfile.mkdtemp(prefix="capsa-probe-")
    key, seg = _host_shm_segment(libc)
    sleeper = subprocess.Popen(["sleep", "30"])
    survivor = "capsa-" + secrets.token_hex(4)  # comm holds 15 characters
    outside = f"{Path(__file__).resolve()},/root/.bashrc,/etc/shadow,/home"
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-I", "-c", _PROBE, str(sleeper.pid), str(key),
             str(PROBE_SCRATCH_BYTES), outside, survivor, scratch],
            env=ENV, cwd="/", capture_output=True, text=True, check=False, timeout=60)
    finally:
        if not prefix:
            shutil.rmtree(scratch, ignore_errors=True)
        sleeper.kill()
        sleeper.wait()
        if seg >= 0:
            libc.shmctl(seg, 0, None)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr[-800:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    time.sleep(0.3)
    alive = _find_survivor(survivor)
    result["survivor_outlives_box"] = bool(alive)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    return result


def seccomp_probe() -> dict[str, Any]:
    """``bwrap --seccomp FD`` with the BPF program capsa already compiles for its workers.

    bwrap takes a compiled program and nothing else; capsa's filter builder
    (``capsa.guard._seccomp.build_filter`` today; it may move) is one
    source. Reports whether python starts under it and whether an INET
    socket is refused.
    """
    try:
        from capsa.guard import _seccomp
        program: bytes = _seccomp.build_filter()
    except (ImportError, AttributeError, OSError) as exc:
        return {"available": False, "why": f"{type(exc).__name__}: {exc}"}
    read_fd, write_fd = os.pipe()
    os.write(write_fd, program)
    os.close(write_fd)
    prefix = per_file_argv(seccomp_fd=read_fd)
    code = ("import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "    print('allowed')\nexcept OSError as e:\n    print('refused', e.errno)")
    try:
        done = subprocess.run([*prefix, sys.executable, "-I", "-c", code], env=ENV, cwd="/",
                              capture_output=True, text=True, check=False, timeout=60,
                              pass_fds=(read_fd,))
    finally:
        os.close(read_fd)
    return {"available": True, "program_bytes": len(program), "returncode": done.returncode,
            "socket_inet": done.stdout.strip(), "stderr": done.stderr[-400:]}


def coverage(probes: dict[str, Any], setups: list[dict[str, Any]],
             seccomp: dict[str, Any]) -> list[dict[str, str]]:
    """Each protection capsa wants: bwrap as outer box, bwrap per file, the evidence, what's left.

    The cells quote the probes (`probes["bwrap"]` inside a per-file box,
    `probes["host"]` outside) and the outer-box set-ups, so a different
    kernel or bwrap shows up here.
    """
    box = probes.get("bwrap", {})
    host = probes.get("host", {})
    nested = {s["variant"]: s for s in setups}
    userns_nobody = nested.get("bwrap_userns_nobody", {})
    pid_detail = userns_nobody.get("details", {}).get("pid_namespace", "not started")

    def q(key: str) -> str:
        return f"{box.get(key)!s} (host: {host.get(key)!s})"

    return [
        {"protection": "per-file PID namespace (survivors die with the file)",
         "outer_box": "per worker only: a survivor lives until the worker dies",
         "per_file": "yes: --unshare-pid + --die-with-parent, bwrap is init",
         "evidence": f"pids visible {q('proc_pids_visible')}; host pid visible "
                     f"{box.get('host_pid_visible')}; setsid'd survivor outlives box: "
                     f"{box.get('survivor_outlives_box')} (host "
                     f"{host.get('survivor_outlives_box')}); nested worker: {pid_detail}",
         "capsa": "fork-per-file PID namespace inside the worker (nested /proc mount is "
                  "refused under bwrap's userns because bwrap over-mounts /proc subdirs)"},
        {"protection": "per-file IPC namespace",
         "outer_box": "per worker only (files of one worker share SysV IPC)",
         "per_file": "yes: --unshare-ipc",
         "evidence": f"host SysV segment visible {q('host_shm_key_visible')}; shmget inside "
                     f"{box.get('shmget_inside')}",
         "capsa": "unshare(CLONE_NEWIPC) per file in the forked child"},
        {"protection": "per-file tmpfs scratch with byte/inode caps",
         "outer_box": "one tmpfs per worker",
         "per_file": "bytes yes (--size), inodes no (no nr_inodes option in bwrap "
                     f"{probes.get('bwrap_version')}); /dev/shm is an uncapped dir on /dev",
         "evidence": f"fill: {box.get('scratch_fill')}; inodes: {box.get('scratch_inodes')}; "
                     f"statvfs {box.get('scratch_statvfs')}; /dev/shm "
                     f"{box.get('write_dev_shm')}",
         "capsa": "mount tmpfs with size= and nr_inodes= per file (and /dev/shm)"},
        {"protection": "read-only root",
         "outer_box": "yes (binds + --remount-ro /)",
         "per_file": "yes",
         "evidence": f"write / {q('write_root')}; write /usr {q('write_usr')}; paths outside "
                     f"the binds visible {box.get('outside_binds_visible')}",
         "capsa": "nothing if the outer box is used; today Landlock plus a private mount "
                  "namespace do it"},
        {"protection": "per-file cgroup accounting (CPU, memory incl. memfd/shm, pids)",
         "outer_box": "no: bwrap creates no cgroup (--unshare-cgroup only hides the path)",
         "per_file": "no",
         "evidence": f"/proc/self/cgroup {q('cgroup')}; /sys/fs/cgroup present "
                     f"{box.get('sys_fs_cgroup_present')}; 64 MB memfd {box.get('memfd_64mb')}",
         "capsa": "create and delegate cgroups itself (or run under systemd-run --scope)"},
        {"protection": "seccomp allow-list",
         "outer_box": "only a program you compile (--seccomp FD); bwrap installs none",
         "per_file": "same",
         "evidence": f"Seccomp field {q('Seccomp')}; capsa's filter via --seccomp: "
                     f"{seccomp.get('socket_inet') or seccomp.get('why')}",
         "capsa": "build the BPF program (it already does; an allow-list is still to write)"},
        {"protection": "Landlock",
         "outer_box": "no (bwrap 0.8 has no Landlock); the mount view replaces its file part",
         "per_file": "no",
         "evidence": "paths outside the binds do not exist inside; TCP refused by the empty "
                     f"network namespace ({box.get('tcp_connect')})",
         "capsa": "keep Landlock for per-file write scoping and signal/abstract-socket scopes"},
        {"protection": "unprivileged uid",
         "outer_box": "partly: --uid maps one uid to the caller's (root here); a uid per "
                      "worker or per file cannot be mapped",
         "per_file": "same",
         "evidence": f"uid {box.get('uid')}, uid_map '{box.get('uid_map')}'; worker as uid 0 "
                     f"in userns: {_outcome(nested.get('bwrap_userns_root'))}",
         "capsa": "setresuid to a dedicated uid needs real root or a newuidmap range"},
        {"protection": "no_new_privs",
         "outer_box": "yes (always set)", "per_file": "yes",
         "evidence": f"NoNewPrivs {q('NoNewPrivs')}; CapEff {q('CapEff')}",
         "capsa": "nothing"},
        {"protection": "network namespace",
         "outer_box": "yes (--unshare-net)", "per_file": "yes",
         "evidence": f"interfaces {q('net_interfaces')}; connect {box.get('tcp_connect')}",
         "capsa": "nothing"},
        {"protection": "zygote never holds tenant data",
         "outer_box": "no (a protocol property of the worker)", "per_file": "n/a: no zygote",
         "evidence": "per-file bwrap has no zygote, at the cost of a fresh interpreter "
                     "(figure 1)",
         "capsa": "hand each file only to a spare child"},
        {"protection": "bounded reply reader",
         "outer_box": "no", "per_file": "no",
         "evidence": "bwrap relays no data; the pipe protocol is capsa's",
         "capsa": "the length-capped frame reader stays"},
        {"protection": "nested user namespaces refused",
         "outer_box": "yes (--disable-userns), but then the worker cannot build its own "
                      "namespaces",
         "per_file": "yes",
         "evidence": f"unshare(CLONE_NEWUSER) inside the box: {box.get('nested_user_namespace')}; "
                     "worker under --disable-userns: "
                     + _outcome(nested.get("bwrap_userns_nobody_disable_userns")),
         "capsa": "seccomp on clone/unshare flags (already)"},
    ]


def _outcome(setup: dict[str, Any] | None) -> str:
    if not setup:
        return "not run"
    if setup.get("started"):
        return "started, missing " + (", ".join(setup["missing"]) or "nothing")
    return "did not start: " + (setup.get("why") or setup.get("error", ""))


# --------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    """Kernel, Python, bwrap, load: what the numbers depend on."""
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"),
            "kernel": platform.release(), "platform": platform.platform(),
            "python": platform.python_version(), "executable": sys.executable,
            "cpu_count": os.cpu_count(), "euid": os.geteuid(),
            "bwrap_version": bwrap_version(),
            "landlock_abi": _landlock_abi()}


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return int(abi) if abi > 0 else 0


def print_report(report: dict[str, Any]) -> None:
    """Every figure as a plain table."""
    meta = report["meta"]
    print(f"\n{meta['bwrap_version']} | kernel {meta['kernel']} | Python {meta['python']} | "
          f"{meta['cpu_count']} CPUs | load {meta['loadavg_start']} -> {meta['loadavg_end']}")
    if report.get("start_cost"):
        print("\n1. Start cost per process (ms; direct and bwrap alternate)")
        print(format_table(
            ["command", "runs", "direct p50", "direct p95", "bwrap p50", "bwrap p95", "added p50"],
            [[r["command"], r["direct"]["runs"], r["direct"]["median_ms"], r["direct"]["p95_ms"],
              r["bwrap"]["median_ms"], r["bwrap"]["p95_ms"], r["added_median_ms"]]
             for r in report["start_cost"]]))
    outer = report.get("outer_box")
    if outer:
        print("\n2a. bwrap as the outer box of a worker: does it start, which layers")
        print(format_table(["set-up", "started", "start s", "missing layers / error"],
                           [[s["variant"], "yes" if s["started"] else "NO", s.get("start_s"),
                             ", ".join(s["missing"]) or "none" if s["started"]
                             else (s.get("why") or s["error"])[:90]]
                            for s in outer["setups"]]))
        print(f"\n2b. Per-file latency through a warm 1-worker pool, {outer['rounds']} rounds "
              "(ms)")
        rows = [[r["variant"], r["file"], r["bytes"], r["median_ms"], r["p95_ms"],
                 "yes" if r["text_matches_direct"] else "NO"] for r in outer["latency"]]
        rows += [[name, "(all)", None, s["median_ms"], s["p95_ms"], ""]
                 for name, s in outer["overall"].items()]
        print(format_table(["set-up", "file", "bytes", "p50", "p95", "same text"], rows))
        for failure in outer["failures"]:
            print(f"  FAILED {failure['variant']} {failure['file']}: {failure['error']}")
    print("\n3. Coverage: bwrap as outer box of a worker / as a per-file wrapper")
    print(format_table(["protection", "outer box", "per file", "left for capsa"],
                       [[c["protection"], c["outer_box"], c["per_file"], c["capsa"]]
                        for c in report["coverage"]]))
    print("\nEvidence (probes inside a per-file box; host in brackets):")
    for c in report["coverage"]:
        print(f"- {c['protection']}: {c['evidence']}")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runs = ({"true": 10, "python_pass": 10, "python_import_unstructured": 3,
             "python_parse_html": 3} if args.quick
            else {"true": 60, "python_pass": 40, "python_import_unstructured": 10,
                  "python_parse_html": 10})
    rounds = 3 if args.quick else 20
    started = time.perf_counter()
    meta = machine()
    meta["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    report: dict[str, Any] = {"meta": meta, "quick": args.quick}
    probes: dict[str, Any] = {"bwrap_version": meta["bwrap_version"],
                              "host": run_probe([])}
    seccomp: dict[str, Any] = {}
    setups: list[dict[str, Any]] = []
    if meta["bwrap_version"] is None:
        report["skipped"] = "bwrap is not installed (apt-get install bubblewrap)"
    else:
        probes["bwrap_argv"] = per_file_argv(scratch_bytes=PROBE_SCRATCH_BYTES)
        probes["bwrap"] = run_probe(probes["bwrap_argv"])
        seccomp = seccomp_probe()
        report["start_cost_argv"] = per_file_argv()
        report["start_cost"] = start_cost(runs)
        report["outer_box"] = outer_box(rounds)
        setups = report["outer_box"]["setups"]
    report["probes"] = probes
    report["seccomp_probe"] = seccomp
    report["coverage"] = coverage(probes, setups, seccomp)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    meta["duration_s"] = round(time.perf_counter() - started, 1)
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out} in {meta['duration_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
