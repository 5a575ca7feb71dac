"""A pool's scratch directory, held by a lock for as long as its pool lives.

Every pool makes one ``capsa-worker-pool-*`` directory under the temporary
directory, and its workers make theirs inside it. The pool removes it when
it is closed, collected, or still open at exit; a process that ends by
``os._exit`` or a signal (a process-pool worker, an OOM kill) runs none of
that, and its directory stays.

So a pool holds an exclusive ``flock`` on its directory from the moment it
makes it, and when a pool starts it removes the directories whose lock is
free: their owner is gone, whatever pid namespace it ran in, because the
kernel drops a lock with the last descriptor that held it. A directory
younger than `STALE_AFTER_S` is left alone, so one made a moment ago and not
yet locked is never taken; so is one owned by another user, or where the
filesystem cannot lock (``flock`` on some network filesystems).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time

from capsa.guard.sandbox.zygote import remove_tree

__all__ = ["PREFIX", "STALE_AFTER_S", "claim_scratch", "release_scratch", "sweep_stale_scratch"]

PREFIX = "capsa-worker-pool-"
"""Directories named so hold their lock; older capsa named its unlocked ones ``capsa-worker-*``
without ``pool-``, and a sweep never takes those, since a live pool of an older version may
own one."""
STALE_AFTER_S = 60.0
"""How old an unlocked scratch directory must be before another pool removes it."""

_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def claim_scratch() -> tuple[str, int | None]:
    """Make a scratch directory and lock it; the path and the descriptor that holds the lock.

    The descriptor is ``None`` where the filesystem cannot lock; such a
    directory is never swept, here or by anyone else.
    """
    path = tempfile.mkdtemp(prefix=PREFIX)
    os.chmod(path, 0o711)  # a parser running as its own uid reaches its worker's directory
    fd = os.open(path, _FLAGS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return path, None
    return path, fd


def release_scratch(path: str, fd: int | None) -> None:
    """Remove a claimed directory, then let go of its lock; never raises."""
    remove_tree(path)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def sweep_stale_scratch(parent: str | None = None, *, now: float | None = None) -> list[str]:
    """Remove the scratch directories under `parent` that no living pool holds; the paths removed.

    Only this user's, only those at least `STALE_AFTER_S` old, and only once
    this process holds their lock, so two pools sweeping at once cannot
    remove a directory that a third has just claimed.
    """
    parent = parent or tempfile.gettempdir()
    now = time.time() if now is None else now
    try:
        with os.scandir(parent) as entries:
            candidates = [entry for entry in entries if entry.name.startswith(PREFIX)
                          and entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    removed = []
    for entry in candidates:
        try:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != os.geteuid() or now - info.st_mtime < STALE_AFTER_S:
                continue
            fd = os.open(entry.path, _FLAGS)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a living pool, or a filesystem that cannot lock
            os.close(fd)
            continue
        release_scratch(entry.path, fd)
        removed.append(entry.path)
    return removed
