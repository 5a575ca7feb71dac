"""A pool's scratch directory outlives no pool: what `os._exit` leaves, the next pool sweeps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capsa.guard import IsolatedExtractor
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.sandbox.scratch import (
    PREFIX,
    STALE_AFTER_S,
    claim_scratch,
    release_scratch,
    sweep_stale_scratch,
)

LONG_AGO = time.time() - 10 * STALE_AFTER_S


def aged(path: str | Path) -> None:
    os.utime(path, (LONG_AGO, LONG_AGO))


def test_a_claimed_directory_is_locked_and_released_with_its_contents() -> None:
    path, lock = claim_scratch()
    assert lock is not None
    Path(path, "worker-1").mkdir()
    Path(path, "worker-1", "left").write_text("x")
    aged(path)

    assert path not in sweep_stale_scratch()  # its pool is alive

    release_scratch(path, lock)
    assert not os.path.exists(path)


def test_sweep_removes_only_old_unlocked_directories_of_this_user(tmp_path: Path) -> None:
    stale = tmp_path / f"{PREFIX}stale"
    (stale / "worker-a" / "file-b").mkdir(parents=True)
    (stale / "worker-a" / "file-b" / "data").write_bytes(b"left by a parse")
    fresh = tmp_path / f"{PREFIX}fresh"  # made a moment ago, perhaps not yet locked
    fresh.mkdir()
    other = tmp_path / "not-capsa"
    other.mkdir()
    linked = tmp_path / f"{PREFIX}link"
    linked.symlink_to(other, target_is_directory=True)
    for path in (stale / "worker-a" / "file-b", stale / "worker-a", stale, other):
        aged(path)

    removed = sweep_stale_scratch(str(tmp_path))

    assert removed == [str(stale)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [fresh.name, other.name, linked.name])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_sweep_leaves_another_users_directory(tmp_path: Path) -> None:
    theirs = tmp_path / f"{PREFIX}theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    aged(theirs)

    assert sweep_stale_scratch(str(tmp_path)) == []
    assert theirs.is_dir()


def test_sweep_leaves_a_directory_a_living_process_holds(tmp_path: Path) -> None:
    held = tmp_path / f"{PREFIX}held"
    held.mkdir()
    aged(held)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys\n"
         f"fd = os.open({str(held)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert sweep_stale_scratch(str(tmp_path)) == []
        assert held.is_dir()
    finally:
        holder.communicate("", timeout=30)

    assert sweep_stale_scratch(str(tmp_path)) == [str(held)]  # its holder has ended


def test_a_pool_in_a_process_that_ends_by_os_exit_is_swept_by_the_next_pool() -> None:
    program = (
        "import os\n"
        "from capsa.guard import IsolatedExtractor\n"
        "from capsa.guard.extractors import PlainTextExtractor\n"
        "pool = IsolatedExtractor(PlainTextExtractor())\n"
        "pool.extract('text', 'text/plain', b'a file', max_pages=1)\n"
        "print(pool._scratch, flush=True)\n"
        "os._exit(0)  # as a process-pool worker ends: no finalizer, no atexit\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=True)
    left = done.stdout.strip()
    assert os.path.isdir(left)  # what the library alone cannot prevent
    for root, dirs, _ in os.walk(left, topdown=False):
        for name in dirs:
            aged(os.path.join(root, name))
    aged(left)

    with IsolatedExtractor(PlainTextExtractor()) as pool:
        assert pool.extract("text", "text/plain", b"next", max_pages=1) == "next"
        assert not os.path.exists(left)
        mine = pool._scratch
        assert mine is not None

    assert not os.path.exists(mine)
