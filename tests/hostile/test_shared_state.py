"""What a file can touch that it shares with the host, other tenants and the next file.

A sealed child has its own processes, memory, mounts and scratch
(`test_sealed_box`), yet the kernel keeps some state where many processes meet.
The red team's round 16 found five places where a parser taken over by a crafted
file still reached it, and each test here pins the promise that closes one:

- the **open file descriptions** behind fds 1 and 2: a child that inherits its
  zygote's shares them, so a lock or a flag it sets there outlives the file, for
  the host to trip over and the next file to read;
- **leases and directory watches** (``fcntl`` ``F_SETLEASE``, ``F_NOTIFY``): a
  lease on a read-root file the child's uid owns makes every other process's
  ``open`` of it wait;
- the **page cache** every tenant shares: evicting a file from it
  (``posix_fadvise(DONTNEED)``) and asking what it holds (``preadv2`` with
  ``RWF_NOWAIT``) tell which files another tenant read;
- **core dumps**: a ``core_pattern`` that pipes to a collector ignores a core
  limit of 0, so a crashing parser's memory, the document, would stay on the host;
- the **application's CPU**, which a reply sent one byte per wake-up spends.

The attacks run in the parse child (`hostile._box_attacks`: ``plant_on_standard_fds``,
``read_standard_fds``, ``lease``, ``page_cache``, ``reply_trickle``, and
``inheritance`` for the limits). Run as root and as ``nobody`` like the other
sandbox suites::

    python scripts/as_unprivileged.py -- pytest -q -p no:cacheprovider \\
        tests/hostile/test_shared_state.py
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from capsa.guard import ExtractionLimits, IsolatedExtractor

from .test_sealed_box import MiB, attack, attempt, require, started_pool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    """Shared by the attacks that leave nothing behind once refused."""
    with started_pool() as started:
        yield started


@pytest.fixture
def fresh_pool() -> Iterator[IsolatedExtractor]:
    """For an attack that may leave something behind or break its worker."""
    with started_pool() as started:
        yield started


# --------------------------------------------- 1. the descriptions behind fds 1 and 2


_OWNER_SIGNAL = 42
_NOTHING_LEFT = {"flock": "ok", "ofd_lock": "free", "owner_signal": [0, 0],
                 "status_flags": [0, 0]}
"""What `read_standard_fds` finds on descriptions no earlier file touched."""


def _lockable(value: int) -> dict[str, bool]:
    """Whether this process can take, from a description of its own and without waiting,
    an exclusive ``flock`` of /dev/null and a POSIX write lock on its byte `value` (which
    an OFD lock there refuses)."""
    fd = os.open(os.devnull, os.O_WRONLY)
    found = {"flock": True, "ofd_lock": True}
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found["flock"] = False
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, value)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            found["ofd_lock"] = False
        else:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, value)
    finally:
        os.close(fd)
    return found


def _lockable_within(value: int, seconds: float) -> dict[str, bool]:
    """`_lockable`, asked until both locks are free or `seconds` pass (a file's child may
    still be exiting when its answer arrives)."""
    end = time.monotonic() + seconds
    found = _lockable(value)
    while not all(found.values()) and time.monotonic() < end:
        time.sleep(0.1)
        found = _lockable(value)
    return found


@dataclass(frozen=True)
class StandardFdsRun:
    planted: dict[str, Any]
    """What the first file set on its fds 1 and 2."""
    host: dict[str, bool]
    """Whether the host could take each lock once that file had ended."""
    seen: dict[str, Any]
    """What the next file on the same worker found (`_NOTHING_LEFT` when nothing)."""


@pytest.fixture(scope="module")
def standard_fds_run() -> StandardFdsRun:
    """File 1 locks and flags its fds 1 and 2; the host, then file 2, look for it."""
    value = secrets.randbelow(1 << 40) + 1
    if not all(_lockable_within(value, 5).values()):
        pytest.skip("another process on this machine holds a lock on /dev/null")
    with started_pool() as pool:
        planted = attack(pool, "plant_on_standard_fds", value=value, sig=_OWNER_SIGNAL)
        host = _lockable_within(value, 5)
        seen = attack(pool, "read_standard_fds", value=value)
    return StandardFdsRun(planted, host, seen)


@pytest.mark.parametrize("lock", ["flock", "ofd_lock"])
def test_a_lock_on_a_standard_descriptor_is_released_when_its_file_ends(
        standard_fds_run: StandardFdsRun, lock: str) -> None:
    # flock and OFD locks belong to the open file description: on one the zygote still
    # holds (its own /dev/null, inherited as fds 1 and 2), the lock outlives the file.
    # The host's /dev/null stays locked, and any process that locks it (a logging
    # daemon, another tenant) waits on a file that ended.
    assert standard_fds_run.host[lock], (
        f"the host cannot take the {lock} after the file ended: {standard_fds_run.planted}")


@pytest.mark.parametrize("state", ["flock", "ofd_lock", "owner_signal", "status_flags"])
def test_the_next_file_finds_nothing_an_earlier_one_left_on_its_standard_descriptors(
        standard_fds_run: StandardFdsRun, state: str) -> None:
    # A lock's byte range, an owner signal and status flags each carry a number the
    # first file chose: a channel to every later file of the worker.
    assert standard_fds_run.seen[state] == _NOTHING_LEFT[state], (
        f"planted {standard_fds_run.planted[state]}; the next file found "
        f"{standard_fds_run.seen[state]}")


# ------------------------------------------------ 2. leases and directory watches


@pytest.fixture(scope="module")
def lease_report(pool: IsolatedExtractor) -> dict[str, Any]:
    """Leases on a read-root file (the standard library's, which no parse child owns) and a
    directory watch on its directory."""
    target = os.path.realpath(os.__file__)
    return attack(pool, "lease", path=target, directory=os.path.dirname(target))


@pytest.mark.parametrize("call", ["write_lease", "read_lease", "dnotify"])
def test_a_child_is_refused_leases_and_directory_watches(
        pool: IsolatedExtractor, lease_report: dict[str, Any], call: str) -> None:
    # Options of fcntl, which every parser calls, refused by value. On a file the child's
    # uid does not own the kernel refuses a lease itself (EACCES); EPERM is the filter's
    # answer, which holds where the kernel would grant one too: on the files of the
    # application's uid (its virtualenv, its Tesseract models), which is the uid a pool
    # that is not root runs its children as.
    require(pool, "seccomp")
    assert lease_report[call] == "errno=EPERM", lease_report


@pytest.fixture
def owned_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Tesseract model in a directory of the application's own, named by
    ``TESSDATA_PREFIX`` (so every worker started meanwhile reads it as a read root)."""
    base = Path(tempfile.mkdtemp(prefix="capsa-shared-state-"))
    base.chmod(0o755)
    models = base / "tessdata"
    models.mkdir(mode=0o755)
    model = models / "eng.traineddata"
    model.write_bytes(b"\0" * 65536)
    model.chmod(0o644)
    monkeypatch.setenv("TESSDATA_PREFIX", str(base))
    try:
        yield model
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _why_no_lease(path: Path) -> str | None:
    """Why this machine would grant no write lease on `path` at all, or None."""
    with open("/proc/sys/fs/leases-enable") as enabled:
        if enabled.read().strip() != "1":
            return "leases are disabled (/proc/sys/fs/leases-enable)"
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as exc:
        return f"its filesystem grants no lease on {path} ({exc.strerror})"
    else:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    finally:
        os.close(fd)
    return None


def _leased(path: Path) -> bool:
    """Whether ``/proc/locks`` lists a lease on `path`'s inode."""
    key = f":{path.stat().st_ino} "
    with open("/proc/locks") as locks:
        return any(" LEASE " in line and key in line for line in locks)


def test_a_childs_lease_cannot_make_the_hosts_open_wait(owned_models: Path) -> None:
    # The lease is possible only on a file the child's uid owns: a pool that is not root
    # runs its children as the application's uid, which owns the application's own read
    # roots; as root the model is handed to the worker's uid to stand for that case.
    why = _why_no_lease(owned_models)
    if why is not None:
        pytest.skip(why)
    held_s = 5.0
    took: dict[str, float] = {}

    def open_the_model() -> None:
        end = time.monotonic() + held_s - 2  # the lease, if the child got one, is held
        while not _leased(owned_models) and time.monotonic() < end:
            time.sleep(0.05)
        start = time.monotonic()
        with open(owned_models, "rb") as model:
            model.read(1)
        took["open_s"] = time.monotonic() - start

    with started_pool() as pool:
        uid = attack(pool, "lease")["uid"]
        if os.geteuid() == 0:
            os.chown(owned_models, uid, uid)
        elif uid != os.geteuid():
            pytest.skip(f"the pool's children run as uid {uid}, not as the model's owner")
        opener = threading.Thread(target=open_the_model)
        opener.start()
        try:
            report = attack(pool, "lease", path=str(owned_models), seconds=held_s)
        finally:
            opener.join()
    assert took["open_s"] < 1.0, (
        f"the host's open() waited {took['open_s']:.1f} s on a parse child's lease: {report}")


# ------------------------------------------------------------------ 3. the page cache


def _cached_pages(path: str) -> int:
    """How many of `path`'s pages are in the page cache: each read with ``RWF_NOWAIT``,
    which fails rather than wait for the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        hits = 0
        for offset in range(0, os.fstat(fd).st_size, 4096):
            with contextlib.suppress(BlockingIOError):  # not cached
                hits += os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT) > 0
        return hits
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CacheRun:
    report: dict[str, Any]
    before: int
    """The target's pages the host had cached before the attack."""
    after: int
    seccomp: bool


@pytest.fixture(scope="module")
def cache_run(pool: IsolatedExtractor) -> CacheRun:
    """A child probes, then tries to evict, a read-root file the host has just read (the
    standard library's, in every pool's read roots)."""
    target = os.path.realpath(os.__file__)
    with open(target, "rb") as source:
        source.read()
    try:
        before = _cached_pages(target)
    except OSError as exc:  # a filesystem that does not answer RWF_NOWAIT
        pytest.skip(f"this machine cannot tell what is cached ({exc.strerror})")
    if before == 0:
        pytest.skip(f"{target} is not in the page cache just after a read")
    report = attack(pool, "page_cache", path=target)
    return CacheRun(report, before, _cached_pages(target),
                    pool.health.sandbox.is_active("seccomp"))


def test_a_child_cannot_evict_a_shared_file_from_the_page_cache(cache_run: CacheRun) -> None:
    # Evicted, a library's pages come back only when someone loads it: a timed read then
    # tells which of LibreOffice's components another pool's file used.
    if not cache_run.seccomp:
        pytest.skip("this machine lacks seccomp (see `capsa doctor`)")
    assert cache_run.report["fadvise_dontneed"] == "errno=EPERM", cache_run.report


@pytest.mark.parametrize("call", ["preadv2", "pwritev2"])
def test_preadv2_and_pwritev2_are_not_there_for_a_child(cache_run: CacheRun,
                                                        call: str) -> None:
    # RWF_NOWAIT asks the cache without timing anything. ENOSYS, not EPERM: libc and
    # Python fall back to preadv and pwritev on it.
    if not cache_run.seccomp:
        pytest.skip("this machine lacks seccomp (see `capsa doctor`)")
    assert cache_run.report[call] == "errno=ENOSYS", cache_run.report


def test_a_file_the_host_cached_stays_cached_after_a_child_tried_to_evict_it(
        cache_run: CacheRun) -> None:
    if not cache_run.seccomp:
        pytest.skip("this machine lacks seccomp (see `capsa doctor`)")
    assert cache_run.after == cache_run.before, (
        f"{cache_run.before - cache_run.after} of {cache_run.before} cached pages evicted "
        f"by a parse child: {cache_run.report}")


def test_a_child_may_still_give_the_page_cache_other_hints(cache_run: CacheRun) -> None:
    # parsers call fadvise (recorded): only DONTNEED is refused
    assert cache_run.report["fadvise_sequential"] == "ok", cache_run.report


# -------------------------------------------------------------------- 4. core dumps


def test_a_childs_core_limit_is_one_byte(pool: IsolatedExtractor) -> None:
    # 1, not 0: a core_pattern that pipes to a collector (systemd-coredump, apport) ignores
    # the limit, except that the kernel aborts such a dump when the limit is 1; a core
    # file needs at least a page. Either way no crash leaves the document on the host.
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        pytest.skip("this process's hard RLIMIT_CORE is 0, which no pool can raise to 1")
    soft, hard = attack(pool, "inheritance")["rlimits"]["RLIMIT_CORE"]
    assert (soft, hard) == (1, 1)


# ------------------------------------------------------------ 5. the application's CPU


def test_a_reply_trickled_one_byte_at_a_time_takes_little_of_the_applications_cpu(
        fresh_pool: IsolatedExtractor) -> None:
    # A reply declared at its bounds and sent one byte per wake-up: read as it comes,
    # each byte costs the application a select() and a read() in Python, most of a core
    # for the file's whole wall clock; a few such files hold every core it has.
    limits = ExtractionLimits(timeout_s=6, cpu_s=20, memory_bytes=256 * MiB)
    before = resource.getrusage(resource.RUSAGE_SELF)
    outcome = attempt(fresh_pool, "reply_trickle", limits,
                      text_bytes=4 * limits.max_text_chars,
                      blob_bytes=limits.max_uncompressed_bytes, seconds=60)
    after = resource.getrusage(resource.RUSAGE_SELF)
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    assert used < 0.25 * limits.timeout_s, (
        f"the application spent {used:.1f} s of CPU on one reply ({outcome!r})")
