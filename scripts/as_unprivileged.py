"""Run a command as ``nobody``, for the unprivileged half of the sandbox tests.

`make test` runs as root on CI, so the sandbox's root path (parse children
become ``nobody``) is what the main run proves. This script proves the other
path: it drops to uid 65534 and runs the given command, where the pool then
builds its namespaces through a user namespace, as it would for any user.

The interpreter may live under a directory ``nobody`` cannot enter (a pyenv
Python under ``/root``), so the script first enters a private mount
namespace and covers such directories with a tmpfs that holds only the
needed paths, the same way the sandbox does for its parse children. Nothing
changes outside this process tree.

Before dropping, it does what a host that delegates cgroups does for a
service's user (systemd's ``Delegate=yes``): it makes a cgroup of its own in
each controller capsa counts with, hands it to ``nobody`` and moves itself
in, so the pool's per-file cgroups are proven on the unprivileged path too.

Usage: python scripts/as_unprivileged.py -- COMMAND [ARGS...]  (exits with its status)
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile

from capsa.guard.sandbox.cgroups import WorkerCgroups, remove_empty
from capsa.guard.sandbox.layers import NOBODY
from capsa.guard.sandbox.namespaces import libc, make_reachable

_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 16384, 1 << 18


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1:] if "--" in argv else argv[1:]
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        os.execvp(command[0], command)  # already unprivileged: nothing to drop
    lib = libc()
    if lib is None or lib.unshare(_CLONE_NEWNS) != 0 or \
            lib.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        print("as_unprivileged: no private mount namespace here", file=sys.stderr)
        return 1
    needed = [sys.base_prefix, sys.prefix, os.path.realpath(sys.executable), os.getcwd(),
              *sysconfig.get_paths().values()]
    make_reachable(lib, needed)
    cgroups = delegate(f"capsa-nobody-{os.getpid()}")
    home = tempfile.mkdtemp(prefix="capsa-nobody-")
    os.chown(home, NOBODY, NOBODY)
    pid = os.fork()
    if pid == 0:  # the command, in the delegated cgroup, as nobody
        if cgroups is not None:
            for root in cgroups.roots:
                with open(os.path.join(root, "cgroup.procs"), "w") as procs:
                    procs.write("0")
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        env = {**os.environ, "HOME": home, "TMPDIR": home, "PYTHONDONTWRITEBYTECODE": "1"}
        os.execvpe(command[0], command, env)
    _, status = os.waitpid(pid, 0)
    if cgroups is not None:  # as a host would when the service stops
        for root in cgroups.roots:
            remove_empty(root)
    return os.waitstatus_to_exitcode(status)


def delegate(name: str) -> WorkerCgroups | None:
    """Make a cgroup ``nobody`` may manage, as a host delegating one would (best effort)."""
    cgroups, state = WorkerCgroups.create(name)
    if cgroups is None:
        print(f"as_unprivileged: no cgroup to delegate ({state})", file=sys.stderr)
        return None
    for root in cgroups.roots:
        os.chown(root, NOBODY, NOBODY)
        for entry in os.listdir(root):
            if entry.startswith("cgroup.") or entry == "tasks":
                os.chown(os.path.join(root, entry), NOBODY, NOBODY)
    return cgroups


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
