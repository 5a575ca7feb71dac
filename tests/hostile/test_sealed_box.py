"""One file, one sealed box: nothing of a file's parse survives it, reaches another tenant,
or outlives its limits (issue 19).

`hostile._box_attacks.BoxAttackExtractor` plays a parser that a crafted file
has taken over; each payload names one attack, run with raw syscalls in the
parse child. The tests assert from outside wherever they can: the memory of
the zygote and of the next spare, the host's IPC tables, its process tree,
its disk, the application's socket and files, and whether the same pool
still extracts the next file without a restart.

`make test` runs this module as root and again as ``nobody``
(``scripts/as_unprivileged.py``), so both paths are proven. A layer the pool
reports as inactive (the machine lacks it: no cgroup delegation, say) skips
the tests that need it, naming the layer. A layer the pool does not report at
all is one capsa does not build yet: those tests run, and fail, because that
is the gap they exist to show.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import capsa.guard
from capsa.errors import ExtractionFailed
from capsa.guard import Attachment, ExtractionLimits, IsolatedExtractor, extract_attachment

from ._box_attacks import BoxAttackExtractor, memory_matches, text_marker
from .conftest import probes_importable

pytestmark = pytest.mark.timeout(120)

MiB = 1024 * 1024
LIMITS = ExtractionLimits(timeout_s=20, cpu_s=10, memory_bytes=256 * MiB)
"""Generous enough that only an attack, never a slow machine, hits them."""
NEXT = Attachment(label="next.txt", payload=b"the next file")

Outcome = dict[str, Any] | ExtractionFailed


# ----------------------------------------------------------------------------- pools


@contextlib.contextmanager
def started_pool() -> Iterator[IsolatedExtractor]:
    """A one-worker pool of `BoxAttackExtractor`, importable by its worker while it runs."""
    with probes_importable(), IsolatedExtractor(BoxAttackExtractor(), workers=1) as pool:
        yield pool


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    """Shared by the attacks that leave nothing behind even today (they are refused)."""
    with started_pool() as started:
        yield started


@pytest.fixture
def fresh_pool() -> Iterator[IsolatedExtractor]:
    """For an attack that may leave something behind or break its worker."""
    with started_pool() as started:
        yield started


def attack(pool: IsolatedExtractor, which: str, limits: ExtractionLimits = LIMITS, /,
           **args: Any) -> dict[str, Any]:
    """Run attack `which` in a parse child of `pool`; its JSON report."""
    payload = json.dumps({"attack": which, **args}).encode()
    text = extract_attachment(Attachment(label=f"{which}.json", payload=payload), pool,
                              limits).text
    report: dict[str, Any] = json.loads(text)
    return report


def attempt(pool: IsolatedExtractor, which: str, limits: ExtractionLimits = LIMITS, /,
            **args: Any) -> Outcome:
    """Like `attack`, for an attack whose file may fail: the report, or the typed failure."""
    try:
        return attack(pool, which, limits, **args)
    except ExtractionFailed as exc:
        return exc


def assert_next_file_extracts(pool: IsolatedExtractor,
                              limits: ExtractionLimits = LIMITS) -> None:
    assert extract_attachment(NEXT, pool, limits).text == "the next file"


def require(pool: IsolatedExtractor, *layers: str) -> None:
    """Skip, naming the layer, where the pool reports a needed layer inactive."""
    report = pool.health.sandbox
    lacking = [f"{name} ({report.layers[name].detail})" for name in layers
               if name in report.layers and not report.is_active(name)]
    if lacking:
        pytest.skip(f"this machine lacks {'; '.join(lacking)} (see `capsa doctor`)")


def require_any(pool: IsolatedExtractor, *layers: str) -> None:
    """Skip only where every one of `layers` is reported, and none is active."""
    report = pool.health.sandbox
    if all(name in report.layers and not report.is_active(name) for name in layers):
        pytest.skip(f"this machine lacks all of {', '.join(layers)} (see `capsa doctor`)")


def token() -> str:
    return secrets.token_hex(6)


# ------------------------------------------------------------------ the host's view


def zygote(pool: IsolatedExtractor) -> int:
    """The host pid of the pool's (only) zygote."""
    return int(pool.health["pid"])


def _process_table() -> dict[int, tuple[int, str, str]]:
    """Every process, zombies too (they link a re-forked child to the tree): pid -> (parent
    pid, state, name)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), fields[0], name)
    return table


def _descendants(root: int, table: dict[int, tuple[int, str, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, frontier = set(), [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def spares(pool: IsolatedExtractor) -> tuple[set[int], dict[int, str]]:
    """The zygote's waiting spares, and every other process descended from it (pid: name).

    A spare's ancestors up to the zygote count as the spare's, not as extras.
    """
    root = zygote(pool)
    table = _process_table()
    below = _descendants(root, table)
    found = {pid for pid in below if table[pid][2] == "capsa-spare"}
    chain = set()
    for pid in found:
        parent = table[pid][0]
        while parent in below and parent not in chain:
            chain.add(parent)
            parent = table[parent][0]
    return found, {pid: table[pid][2] for pid in below - found - chain
                   if table[pid][1] not in ("Z", "X")}


def the_spare(pool: IsolatedExtractor) -> int:
    """The spare waiting for the next file (waits for the zygote to fork it)."""
    for _ in range(100):
        found, _ = spares(pool)
        if found:
            return min(found)
        time.sleep(0.1)
    raise AssertionError(f"no process named capsa-spare descends from zygote {zygote(pool)}")


def lingering(pool: IsolatedExtractor) -> dict[int, str]:
    """Processes below the zygote other than its spare, once the last file has settled:
    empty only when five looks in a row, 0.1 s apart, found none (a process that keeps
    re-forking is briefly hard to link to its tree)."""
    extra: dict[int, str] = {}
    clean = 0
    for _ in range(60):
        _, extra = spares(pool)
        clean = 0 if extra else clean + 1
        if clean == 5:
            return {}
        time.sleep(0.1)
    return extra


def sysv_rows(kind: str, keys: set[int]) -> list[tuple[int, int]]:
    """The host's SysV objects with one of `keys`: (key, bytes)."""
    rows = []
    for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
        fields = line.split()
        if fields and int(fields[0]) in keys:
            rows.append((int(fields[0]), int(fields[3])))
    return rows


def shmem_bytes() -> int:
    """The host's shared memory in use (SysV, POSIX, tmpfs, memfd), from /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


def worker_dirs() -> list[str]:
    """Every pool's scratch directory under the application's temporary directory."""
    return sorted(glob.glob(os.path.join(tempfile.gettempdir(), "capsa-worker-*")))


def left_on_disk(prefix: str, reported_tmpdir: str | None = None) -> list[str]:
    """Entries named `prefix`... under any pool's scratch directory, or in the TMPDIR the
    child reported where that path exists on the host."""
    found, stack = [], list(worker_dirs())
    while stack:
        directory = stack.pop()
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    found.append(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    if reported_tmpdir and os.path.isdir(reported_tmpdir):
        with contextlib.suppress(OSError):
            found += [os.path.join(reported_tmpdir, name)
                      for name in os.listdir(reported_tmpdir) if name.startswith(prefix)]
    return sorted(set(found))


def refused(result: str) -> bool:
    """An attempt that did not work: an errno, a kill, or nothing to aim at."""
    return not result.startswith("ok")


# ------------------------------------------------------------ 1. tenant data in memory


@dataclass(frozen=True)
class MarkedFiles:
    prefix: str
    markers: frozenset[str]
    """Every payload marker and every text marker of the files run."""


@pytest.fixture
def marked_files(fresh_pool: IsolatedExtractor) -> MarkedFiles:
    """Three files whose payloads and whose texts each carry their own unique marker."""
    prefix = f"box{secrets.token_hex(4)}q"
    markers = set()
    for _ in range(3):
        marker = prefix + secrets.token_hex(16)
        report = attack(fresh_pool, "echo_marker", marker=marker, prefix=prefix,
                        padding=[marker] * 200)
        assert report["text_marker"] == text_marker(marker, prefix)
        markers |= {marker, report["text_marker"]}
    return MarkedFiles(prefix, frozenset(markers))


def _scan_or_fail(pid: int, prefix: str, what: str) -> tuple[set[str], int]:
    try:
        found, scanned, _ = memory_matches(pid, prefix)
    except OSError as exc:
        pytest.fail(f"the test cannot read the {what}'s memory (pid {pid}) as uid "
                    f"{os.getuid()}: {exc}")
    assert scanned > MiB, f"only {scanned} bytes of the {what} were readable"
    return found, scanned


def test_zygote_memory_holds_no_tenant_marker(fresh_pool: IsolatedExtractor,
                                              marked_files: MarkedFiles) -> None:
    found, _ = _scan_or_fail(zygote(fresh_pool), marked_files.prefix, "zygote")
    leaked = found & marked_files.markers
    assert not leaked, f"{len(leaked)} of {len(marked_files.markers)} tenant markers in the zygote"


def test_next_spare_memory_holds_no_tenant_marker(fresh_pool: IsolatedExtractor,
                                                  marked_files: MarkedFiles) -> None:
    found, _ = _scan_or_fail(the_spare(fresh_pool), marked_files.prefix, "spare")
    leaked = found & marked_files.markers
    assert not leaked, f"{len(leaked)} of {len(marked_files.markers)} tenant markers in the spare"


def test_child_finds_no_earlier_tenant_in_its_own_memory(fresh_pool: IsolatedExtractor,
                                                         marked_files: MarkedFiles) -> None:
    prefix = marked_files.prefix
    report = attack(fresh_pool, "scan_self", prefix_parts=[prefix[:4], prefix[4:]])
    assert report["scanned"] > MiB, report
    leaked = set(report["found"]) & marked_files.markers
    assert not leaked, f"the child read {len(leaked)} earlier markers via {report['how']}"


# -------------------------------------------------------------------- 2. IPC persistence


@dataclass(frozen=True)
class IpcRun:
    plant: dict[str, Any]
    find: dict[str, Any]
    host_before: dict[str, list[tuple[int, int]]]
    host_after: dict[str, list[tuple[int, int]]]
    dev_shm_left: bool


@pytest.fixture(scope="module")
def ipc_run() -> Iterator[IpcRun]:
    """File 1 plants IPC objects holding a marker; file 2 of the same pool looks for them."""
    key = secrets.randbelow(1 << 30) + (1 << 30)
    name = f"capsa-box-{token()}"
    with started_pool() as pool:
        before = {kind: sysv_rows(kind, {key}) for kind in ("shm", "msg")}
        plant = attack(pool, "ipc_plant", key=key, name=name, marker=f"ipc-{token()}",
                       shm_size=4096 + 123)
        find = attack(pool, "ipc_find", key=key, name=name)
        after = {kind: sysv_rows(kind, {key}) for kind in ("shm", "msg")}
        left = os.path.exists(f"/dev/shm/{name}")
    yield IpcRun(plant, find, before, after, left)
    with contextlib.suppress(OSError):
        os.unlink(f"/dev/shm/{name}")
    for flag, kind in (("-M", "shm"), ("-Q", "msg")):
        if sysv_rows(kind, {key}) and shutil.which("ipcrm"):
            subprocess.run(["ipcrm", flag, str(key)], check=False)


@pytest.mark.parametrize("mechanism", ["sysv_shm", "sysv_msg", "posix_mqueue", "posix_shm"])
def test_ipc_object_a_file_leaves_is_not_found_by_the_next(ipc_run: IpcRun,
                                                           mechanism: str) -> None:
    assert refused(ipc_run.find[mechanism]), (
        f"planted: {ipc_run.plant[mechanism]}; the next file found: {ipc_run.find[mechanism]}")


def test_ipc_objects_of_a_file_never_reach_the_host(ipc_run: IpcRun) -> None:
    assert ipc_run.host_after == ipc_run.host_before
    assert not ipc_run.dev_shm_left


def test_shared_memory_a_file_touched_is_freed_when_it_ends(
        fresh_pool: IsolatedExtractor) -> None:
    limits = LIMITS.model_copy(update={"memory_bytes": 64 * MiB})
    key_base = secrets.randbelow(1 << 29) + (1 << 29)
    keys = [key_base + index for index in range(8)]
    host_before = sysv_rows("shm", set(keys))
    shmem_before = shmem_bytes()
    hog = attempt(fresh_pool, "shm_hog", limits, key_base=key_base, segments=8,
                  segment_bytes=16 * MiB)
    census = attack(fresh_pool, "ipc_find", key=key_base, name=f"capsa-box-{token()}",
                    keys=keys)
    grown = shmem_bytes() - shmem_before
    seen = census["sysvipc_shm_keys"]
    assert refused(census["sysv_shm"]), f"after {hog}, the next file found {census['sysv_shm']}"
    assert not (isinstance(seen, list) and seen), f"still allocated, seen by the next file: {seen}"
    assert sysv_rows("shm", set(keys)) == host_before
    assert grown < 32 * MiB, f"the host's shared memory grew by {grown // MiB} MiB after {hog}"


# --------------------------------------------------------------------------- 3. survivors


@dataclass(frozen=True)
class SurvivorRun:
    outcome: Outcome
    restarts_after: int
    lingering: dict[int, str]
    probe: Outcome
    good: Outcome
    restarts_end: int


@pytest.fixture(scope="module")
def survivor_run() -> SurvivorRun:
    """A file leaves a re-forking process (which hunts the next tenant's process and
    lowers its memory limit) and two sleepers in new sessions and groups; then a file
    probes every pid in sight; then a good file needs 64 MiB of its 128 MiB."""
    with started_pool() as pool:
        outcome = attempt(pool, "survivors", seconds=30, hunt=True)
        restarts = pool.restarts
        left = lingering(pool)
        probe = attempt(pool, "probe_pids", upto=400)
        good = attempt(pool, "allocate", LIMITS.model_copy(update={"memory_bytes": 128 * MiB}),
                       mib=64)
        return SurvivorRun(outcome, restarts, left, probe, good, pool.restarts)


def test_file_that_leaves_processes_behind_still_answers_promptly(
        survivor_run: SurvivorRun) -> None:
    assert isinstance(survivor_run.outcome, dict), survivor_run.outcome
    assert survivor_run.restarts_after == 0


def test_no_process_outlives_the_file_that_started_it(survivor_run: SurvivorRun) -> None:
    assert survivor_run.lingering == {}, f"still running below the zygote: {survivor_run.lingering}"


@pytest.mark.parametrize("how", ["visible", "prlimit"])
def test_later_file_can_name_no_other_process(survivor_run: SurvivorRun, how: str) -> None:
    probe = survivor_run.probe
    assert isinstance(probe, dict), f"the probing file failed: {probe}"
    assert probe[how] == [], f"pids other than its own (getpgid / prlimit64): {probe}"


def test_next_good_file_succeeds_under_its_limits(survivor_run: SurvivorRun) -> None:
    assert survivor_run.good == {"allocated_mib": 64}
    assert survivor_run.restarts_end == 0


# ---------------------------------------------------------------------- 4. limits per file


def test_cpu_limit_counts_every_process_of_the_file(fresh_pool: IsolatedExtractor) -> None:
    require(fresh_pool, "cgroup")
    limits = ExtractionLimits(cpu_s=1, timeout_s=30)
    outcome = attempt(fresh_pool, "cpu_burn", limits, processes=10, per_process_cpu_s=0.5)
    assert isinstance(outcome, ExtractionFailed), f"the file answered under cpu_s=1: {outcome}"
    assert outcome.cause == "timeout", outcome
    assert "cpu_s" in outcome.detail and "timeout_s" not in outcome.detail, outcome.detail
    assert_next_file_extracts(fresh_pool)


@pytest.mark.parametrize("how", ["memfd", "sysv_shm"])
def test_memory_limit_counts_memory_no_process_maps(fresh_pool: IsolatedExtractor,
                                                    how: str) -> None:
    require(fresh_pool, "cgroup")
    limits = LIMITS.model_copy(update={"memory_bytes": 64 * MiB})
    if how == "memfd":
        outcome = attempt(fresh_pool, "memfd_hog", limits, bytes=256 * MiB)
        held = "written"
    else:
        outcome = attempt(fresh_pool, "shm_hog", limits, segments=16, segment_bytes=16 * MiB,
                          key_base=secrets.randbelow(1 << 29) + (1 << 29))
        held = "touched"
    if isinstance(outcome, ExtractionFailed):
        assert outcome.cause == "memory_limit", outcome
    else:
        assert outcome[held] <= 80 * MiB, (
            f"held {outcome[held] // MiB} MiB under memory_bytes=64 MiB: {outcome}")
    assert_next_file_extracts(fresh_pool)


def test_scratch_holds_at_most_the_write_limit_in_total(fresh_pool: IsolatedExtractor) -> None:
    require(fresh_pool, "scratch_tmpfs")
    limits = LIMITS.model_copy(update={"max_file_write_bytes": MiB})
    prefix = f"box-fill-{token()}-"
    report = attack(fresh_pool, "scratch_fill", limits, files=24, size=MiB, prefix=prefix)
    assert report["written"] <= MiB + 128 * 1024, f"{report['written'] // 1024} KiB: {report}"
    assert any("ENOSPC" in stop or "EFBIG" in stop for stop in report["stops"]), report
    assert_next_file_extracts(fresh_pool)
    assert left_on_disk(prefix, report["tmpdir"]) == []


def test_scratch_runs_out_of_inodes_well_before_100000_files(
        fresh_pool: IsolatedExtractor) -> None:
    require(fresh_pool, "scratch_tmpfs")
    prefix = f"box-inode-{token()}-"
    report = attack(fresh_pool, "inode_fill", count=100_000, prefix=prefix, seconds=4)
    assert report["made"] < 50_000 and report["stopped"].startswith("errno="), report
    assert_next_file_extracts(fresh_pool)
    assert left_on_disk(prefix, report["tmpdir"]) == []


def test_fork_bomb_stops_and_the_next_file_works(fresh_pool: IsolatedExtractor) -> None:
    require_any(fresh_pool, "cgroup", "process_limit")
    report = attack(fresh_pool, "fork_bomb", attempts=5000)
    assert report["stopped"] == "errno=EAGAIN" and report["made"] < 5000, report
    assert_next_file_extracts(fresh_pool)
    assert fresh_pool.restarts == 0
    assert lingering(fresh_pool) == {}


# ---------------------------------------------------------------------------- 5. deep trees


def test_deep_tree_in_scratch_neither_stops_the_pool_nor_stays_on_disk() -> None:
    name = f"box-deep-{token()}"
    before = set(worker_dirs())
    with probes_importable():
        pool = IsolatedExtractor(BoxAttackExtractor(), workers=1)
        try:
            report = attempt(pool, "deep_tree", depth=3000, name=name)
            assert isinstance(report, ExtractionFailed) or report["made"] > 0, report
            assert_next_file_extracts(pool)
            pool.close()
            assert left_on_disk(name) == []
            assert set(worker_dirs()) - before == set()
        finally:
            with contextlib.suppress(Exception):
                pool.close()
            for leftover in set(worker_dirs()) - before:
                subprocess.run(["rm", "-rf", "--", leftover], check=False)


# ------------------------------------------------------------------ 6. reachable from inside


@pytest.fixture(scope="module")
def app_dir() -> Iterator[Path]:
    """A directory of the application's (0755, under its temporary directory)."""
    directory = Path(tempfile.mkdtemp(prefix="capsa-box-app-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def datagrams(pool: IsolatedExtractor, app_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """What the child tried against a datagram socket the application listens on, and
    what arrived there."""
    path = app_dir / "service.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        receiver.bind(str(path))
        path.chmod(0o777)
        receiver.setblocking(False)
        tag = f"box-{token()}"
        report = attack(pool, "unix_send", path=str(path), tag=tag)
        arrived = []
        while True:
            try:
                data, ancillary, _, _ = receiver.recvmsg(4096, socket.CMSG_SPACE(64))
            except BlockingIOError:
                break
            for level, kind, fds in ancillary:
                if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                    for fd in memoryview(fds).cast("i"):
                        os.close(fd)
            arrived.append(data.decode("utf-8", "replace"))
    finally:
        receiver.close()
    return report, arrived


@pytest.mark.parametrize("how", ["sendto", "sendmsg"])
def test_datagram_to_a_unix_socket_on_disk_never_arrives(
        datagrams: tuple[dict[str, Any], list[str]], how: str) -> None:
    report, arrived = datagrams
    mine = [data for data in arrived if f":{how}:" in data]
    assert mine == [], f"delivered to the application's socket: {mine}; attempts: {report}"


@pytest.fixture(scope="module")
def socket_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return attack(pool, "sockets")


@pytest.mark.parametrize("family", ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET",
                                    "AF_BLUETOOTH", "AF_ALG", "AF_VSOCK", "AF_XDP"])
@pytest.mark.parametrize("kind", ["stream", "dgram", "raw"])
def test_child_cannot_create_a_socket_of_any_family(socket_report: dict[str, Any],
                                                    family: str, kind: str) -> None:
    assert refused(socket_report[f"{family}_{kind}"])


def test_child_cannot_create_a_socket_pair(socket_report: dict[str, Any]) -> None:
    assert refused(socket_report["socketpair"])


@pytest.fixture(scope="module")
def inotify_run(pool: IsolatedExtractor, app_dir: Path) -> tuple[dict[str, Any], str]:
    """The child watches the application's directory while the application creates files."""
    tag = f"tenant-{token()}"
    stop = threading.Event()

    def create_files() -> None:
        index = 0
        while not stop.is_set():
            (app_dir / f"{tag}-{index}.txt").write_text("another tenant's upload")
            index += 1
            stop.wait(0.05)

    creator = threading.Thread(target=create_files, daemon=True)
    creator.start()
    try:
        report = attack(pool, "inotify", directory=str(app_dir), seconds=1.5)
    finally:
        stop.set()
        creator.join()
    return report, tag


def test_inotify_reveals_no_name_in_the_applications_directory(
        inotify_run: tuple[dict[str, Any], str]) -> None:
    report, tag = inotify_run
    assert not [name for name in report["names"] if tag in name], report


def test_inotify_on_the_applications_directory_is_refused(
        inotify_run: tuple[dict[str, Any], str]) -> None:
    report, _ = inotify_run
    assert refused(report["inotify_init"]) or refused(report["inotify_add_watch"]), report


def test_fanotify_is_refused(inotify_run: tuple[dict[str, Any], str]) -> None:
    assert refused(inotify_run[0]["fanotify_init"])


@pytest.fixture(scope="module")
def prlimit_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return attack(pool, "prlimit_others", zygote_pid=zygote(pool))


@pytest.mark.parametrize("who", ["parent", "pid1", "zygote_host_pid"])
def test_child_cannot_touch_the_limits_of_the_zygote_or_pid_1(
        prlimit_report: dict[str, Any], who: str) -> None:
    assert refused(prlimit_report[who]), prlimit_report


@dataclass(frozen=True)
class Metadata:
    mode: int
    mtime_ns: int
    xattrs: tuple[str, ...]


def _metadata(path: Path) -> Metadata:
    try:
        xattrs = tuple(sorted(os.listxattr(path)))
    except OSError:
        xattrs = ()
    status = path.stat()
    return Metadata(status.st_mode, status.st_mtime_ns, xattrs)


@pytest.fixture(scope="module")
def metadata_run(pool: IsolatedExtractor,
                 app_dir: Path) -> tuple[dict[str, Any], Metadata, Metadata]:
    """The child changes the metadata of the application's file (same uid under nobody)."""
    path = app_dir / "settings.toml"
    path.write_text("model = 'x'\n")
    path.chmod(0o644)
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = _metadata(path)
    report = attack(pool, "metadata", path=str(path))
    return report, before, _metadata(path)


@pytest.mark.parametrize(("change", "field"), [("chmod", "mode"), ("utimensat", "mtime_ns"),
                                               ("setxattr", "xattrs")])
def test_child_cannot_change_metadata_of_the_applications_file(
        metadata_run: tuple[dict[str, Any], Metadata, Metadata], change: str,
        field: str) -> None:
    report, before, after = metadata_run
    assert getattr(after, field) == getattr(before, field), report
    assert refused(report[change]), report


# ----------------------------------------------------------------------- 7. more attacks


MISC_ATTEMPTS = [
    "write_dev_shm", "write_dev_mqueue", "oom_score_adj_self_lowered",
    "oom_score_adj_of_others", "setpriority_of_others", "setpriority_of_the_users_processes",
    "sched_setaffinity_of_others", "ioprio_set_of_others", "ioprio_set_of_the_users_processes",
    "keyctl_add_key", "keyctl_join_session_keyring", "userfaultfd", "userfaultfd_user_mode_only",
    "io_uring_setup", "perf_event_open", "ptrace_own_child", "ptrace_capsa_processes",
    "pidfd_getfd_of_others", "mount_tmpfs", "umount_scratch", "mknod_char_device",
    "mknod_block_device", "open_proc_sys_core_pattern", "open_proc_sys_drop_caches",
    "open_proc_sysrq_trigger", "cgroup_escape", "personality", "raise_own_hard_limits",
    "setns_into_others_ipc", "unshare_ipc", "unshare_pid",
]


@dataclass(frozen=True)
class MiscRun:
    report: dict[str, Any]
    nice_before: int
    nice_after: int
    dev_shm_left: bool
    next_file: Outcome
    restarts: int


@pytest.fixture(scope="module")
def misc_run() -> Iterator[MiscRun]:
    """One file tries every attempt of `MISC_ATTEMPTS`, each in its own helper process."""
    name = f"capsa-box-{token()}"
    with started_pool() as pool:
        nice_before = os.getpriority(os.PRIO_PROCESS, 0)
        report = attack(pool, "misc", name=name)
        nice_after = os.getpriority(os.PRIO_PROCESS, 0)
        left = os.path.exists(f"/dev/shm/{name}")
        try:
            next_file: Outcome = {"text": extract_attachment(NEXT, pool, LIMITS).text}
        except ExtractionFailed as exc:
            next_file = exc
        yield MiscRun(report, nice_before, nice_after, left, next_file, pool.restarts)
    with contextlib.suppress(OSError):
        os.unlink(f"/dev/shm/{name}")


@pytest.mark.parametrize("name", MISC_ATTEMPTS)
def test_child_attempt_is_refused(misc_run: MiscRun, name: str) -> None:
    assert refused(misc_run.report[name]), misc_run.report[name]


def test_writing_to_dev_shm_leaves_nothing_on_the_host(misc_run: MiscRun) -> None:
    assert not misc_run.dev_shm_left


def test_renicing_the_users_processes_leaves_the_application_alone(misc_run: MiscRun) -> None:
    assert misc_run.nice_after == misc_run.nice_before


def test_next_file_extracts_after_the_refused_attempts(misc_run: MiscRun) -> None:
    assert misc_run.next_file == {"text": "the next file"}
    assert misc_run.restarts == 0


def test_lock_a_file_takes_is_released_when_it_ends(fresh_pool: IsolatedExtractor) -> None:
    path = str(capsa.guard.__file__)
    report = attack(fresh_pool, "flock_hold", path=path, seconds=30)
    acquired = False
    with open(path, "rb") as shared:
        for _ in range(50):
            try:
                fcntl.flock(shared, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.1)
                continue
            fcntl.flock(shared, fcntl.LOCK_UN)
            acquired = True
            break
    assert acquired, f"the file's lock outlived it: {report}; holders: {lingering(fresh_pool)}"
    assert_next_file_extracts(fresh_pool)


def test_filling_the_reply_channel_fails_only_that_file(fresh_pool: IsolatedExtractor) -> None:
    outcome = attempt(fresh_pool, "reply_fill", LIMITS.model_copy(update={"timeout_s": 3}))
    assert isinstance(outcome, ExtractionFailed), outcome
    assert outcome.cause in ("protocol", "timeout"), outcome
    assert fresh_pool.restarts == 0
    assert_next_file_extracts(fresh_pool)
    assert lingering(fresh_pool) == {}


@pytest.mark.parametrize("partial", [False, True], ids=["no_answer", "half_an_answer"])
def test_holding_the_reply_channel_after_dying_fails_only_that_file(
        fresh_pool: IsolatedExtractor, partial: bool) -> None:
    outcome = attempt(fresh_pool, "reply_hold", partial=partial, seconds=30)
    assert isinstance(outcome, ExtractionFailed), outcome
    assert outcome.cause in ("crashed", "protocol"), outcome
    assert fresh_pool.restarts == 0
    assert lingering(fresh_pool) == {}
    assert_next_file_extracts(fresh_pool)


def test_killing_every_process_in_sight_harms_only_the_file(
        fresh_pool: IsolatedExtractor) -> None:
    worker = zygote(fresh_pool)
    attempt(fresh_pool, "kill_all")
    assert_next_file_extracts(fresh_pool)
    assert (zygote(fresh_pool), fresh_pool.restarts) == (worker, 0)
