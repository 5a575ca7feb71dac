"""What each layer of the per-file sealed box costs, one layer at a time.

The zygote forks one child per file (issue 19). Each child is the init of a
fresh PID namespace, joins a cgroup of its own, unshares mount, IPC and
cgroup namespaces and mounts a ``/proc``, and when its file's limits arrive
mounts a tmpfs scratch, makes the root read-only, sets rlimits and confines
itself (uid, ``no_new_privs``, Landlock, seccomp). Timing whole extractions
would bury each of these under the parser's and the machine's noise, so this
script times the layers themselves, in a worker-shaped process: ``python -I``
with `default_router()` imported (a real zygote's heap), `layers.prepare`
run (the worker's namespaces and cgroup root exist) and the heap frozen
(`gc.freeze`, as the zygote does).

Six variants, each adding one layer to the one before, are timed
round-robin (a shuffled order every round, so a machine that gets busier
slows them all alike), from the first set-up call to the last clean-up call:

a. ``fork`` + ``_exit`` + reap;
b. + a fresh PID namespace for the child (`namespaces.new_pid_namespace`);
c. + the child's file namespaces (`namespaces.enter_file_namespaces`:
   mount, IPC and cgroup namespaces, a fresh ``/proc``);
d. + a per-file cgroup (`WorkerCgroups.file` before the fork, `join` in the
   child, `limit` in the parent, `remove` after the reap, retried every 2 ms
   while busy as the zygote does);
e. + the tmpfs scratch and the read-only root (`limit_ipc`, `mount_scratch`,
   `read_only_root`);
f. + the rlimits and `layers.confine` (uid, ``no_new_privs``, Landlock, seccomp).

Each sample is also split into phases: the parent's set-up and ``fork``
(until ``fork`` returns), the child's set-up (until it writes one byte on a
pipe), its exit and reap, and the cgroup's removal. Two more figures:

- **the spare's critical path**: the zygote keeps a child forked ahead, so a
  file pays only the hand-over (the limits and two descriptors with
  `protocol.send_control` over ``SOCK_SEQPACKET``), the child's sealing steps
  (e and f) and, after its reply, the teardown (kill, reap, cgroup removal);
  forking the next spare comes after, off the path of a lone file but on the
  path of back-to-back ones;
- **the control round trip**: one JSON control message with two pipe
  descriptors (``SCM_RIGHTS``) to a helper process and its JSON answer, against
  the same exchange without descriptors.

Run directly (``python benchmarks/sandbox_cost.py [--runs N]``) or through
``benchmarks/extraction.py``, which adds the summary to its report. Writes
``benchmarks/results/sandbox_cost.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "sandbox_cost.json"
STEPS = {
    "a_fork": "fork + _exit + reap",
    "b_pid_namespace": "+ fresh PID namespace (new_pid_namespace before fork)",
    "c_file_namespaces": "+ mount, IPC, cgroup namespaces and /proc (enter_file_namespaces)",
    "d_cgroup": "+ per-file cgroup (file, join, limit, remove)",
    "e_scratch_read_only": "+ tmpfs scratch and read-only root (limit_ipc, mount_scratch, "
                           "read_only_root)",
    "f_confine": "+ rlimits and layers.confine (uid, no_new_privs, Landlock, seccomp)",
}
"""Each variant adds one layer to the one before; the names sort in order."""
PHASES = ("parent_setup_and_fork_ms", "child_setup_ms", "exit_and_reap_ms", "cgroup_remove_ms")

_PROBE = r"""
import gc, json, os, random, resource, socket, sys, tempfile, time
from capsa.guard.extractors import default_router
from capsa.guard.sandbox import layers, namespaces, protocol
from capsa.guard.sandbox.layers import CHILD_PROCESSES

router = default_router()
router.self_test()  # as the zygote does: every parser imported and warmed before forking
lib = namespaces.libc()
policy = layers.prepare("best-effort", lib)  # the worker's namespaces; forks into a PID ns
runs, spare_runs = int(sys.argv[1]), int(sys.argv[2])
scratch = tempfile.mkdtemp(prefix="worker-")
os.chmod(scratch, 0o711)
os.environ["TMPDIR"] = scratch
root_ms = None
if sys.argv[3] == "1":  # the zygote's minimal root, entered once, as a worker does
    t = time.perf_counter()
    writable = [scratch] + (list(policy.cgroups.roots) if policy.cgroups is not None else [])
    policy.namespaces["minimal_root"] = namespaces.enter_minimal_root(
        lib, read=policy.read_roots, writable=writable)
    root_ms = round((time.perf_counter() - t) * 1000, 3)
gc.collect()
gc.freeze()
LIMITS = {"memory_bytes": 512 << 20, "max_file_write_bytes": 64 << 20, "max_scratch_files": 4096,
          "cpu_s": 30}
LEVELS = ["a_fork", "b_pid_namespace", "c_file_namespaces", "d_cgroup",
          "e_scratch_read_only", "f_confine"]
own_ns = policy.own_pid_namespace
uid = policy.child_uid if policy.as_root else os.geteuid()
counter = [0]


def reset_pid_ns():
    if own_ns >= 0:
        lib.setns(own_ns, namespaces.CLONE_NEWPID)


def seal(level):
    # what child._seal does once the limits are known, cut at `level`
    if level >= 4:
        namespaces.limit_ipc(memory_bytes=LIMITS["memory_bytes"])
        state = namespaces.mount_scratch(lib, scratch, size=LIMITS["max_file_write_bytes"],
                                         inodes=LIMITS["max_scratch_files"], uid=uid)
        if not state.startswith("active"):
            raise OSError(state)
        namespaces.read_only_root(lib, keep_writable=scratch)
    if level >= 5:
        for kind, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, 64),
                            (resource.RLIMIT_CPU, LIMITS["cpu_s"] + 1),
                            (resource.RLIMIT_FSIZE, LIMITS["max_file_write_bytes"])):
            resource.setrlimit(kind, (value, value))
        layers.confine(policy, lib, scratch)


def early(level, cgroup):
    # what a spare does before its file: join the cgroup, enter the file's namespaces
    if level >= 3:
        cgroup.join()
    if level >= 2:
        states = namespaces.enter_file_namespaces(lib)
        if not states.get("pid_namespace", "").startswith("active"):
            raise OSError(str(states))


def remove(cgroup):
    tries = 0
    while not cgroup.remove():
        tries += 1
        if tries >= 50:
            break
        time.sleep(0.002)
    return tries


def one(level):
    counter[0] += 1
    read_end, write_end = os.pipe()
    t0 = time.perf_counter()
    cgroup = policy.cgroups.file(counter[0]) if level >= 3 else None
    if level >= 1 and namespaces.new_pid_namespace(lib, own_ns) is not None:
        raise OSError("no PID namespace")
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_end)
            early(level, cgroup)
            seal(level)
            os.write(write_end, b"x")
        except BaseException:
            code = 70
        os._exit(code)
    t1 = time.perf_counter()
    os.close(write_end)
    if cgroup is not None:
        cgroup.limit(memory_bytes=LIMITS["memory_bytes"], processes=CHILD_PROCESSES)
    ok = os.read(read_end, 1) == b"x"
    t2 = time.perf_counter()
    _, status = os.waitpid(pid, 0)
    t3 = time.perf_counter()
    tries = remove(cgroup) if cgroup is not None else 0
    t4 = time.perf_counter()
    os.close(read_end)
    if level >= 1:
        reset_pid_ns()
    if not ok or status != 0:
        raise RuntimeError(f"level {level}: child failed (status {status})")
    return [t4 - t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3, tries]


def spare_path():
    # the zygote's model: a spare forked ahead (b-d done), then per file the hand-over,
    # the sealing (e, f), teardown, and the next spare's fork
    counter[0] += 1
    t0 = time.perf_counter()
    cgroup = policy.cgroups.file(counter[0])
    namespaces.new_pid_namespace(lib, own_ns)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            early(5, cgroup)
            message, fds = protocol.receive_control(theirs)
            seal(5)
            os.write(fds[1], b"x")
        except BaseException:
            code = 70
        os._exit(code)
    theirs.close()
    reset_pid_ns()
    t1 = time.perf_counter()
    time.sleep(0.03)  # the spare waits for its file; this is off the path
    request_read, request_write = os.pipe2(os.O_CLOEXEC)
    reply_read, reply_write = os.pipe2(os.O_CLOEXEC)
    t2 = time.perf_counter()
    cgroup.limit(memory_bytes=LIMITS["memory_bytes"], processes=CHILD_PROCESSES)
    protocol.send_control(ours, {"file": LIMITS}, [request_read, reply_write])
    os.close(request_read)
    os.close(reply_write)
    ours.close()
    ok = os.read(reply_read, 1) == b"x"
    t3 = time.perf_counter()
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    t4 = time.perf_counter()
    tries = remove(cgroup)
    t5 = time.perf_counter()
    for fd in (request_write, reply_read):
        os.close(fd)
    if not ok:
        raise RuntimeError("spare failed")
    return [t1 - t0, t3 - t2, t4 - t3, t5 - t4, tries]


def control_roundtrip(rounds):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        while True:
            message, fds = protocol.receive_control(theirs)
            if message is None:
                os._exit(0)
            for fd in fds:
                os.close(fd)
            protocol.send_control(theirs, {"done": {"cause": None, "exit": 0, "cpu_ms": 1,
                                                    "out_of_memory": False}})
    theirs.close()
    with_fds, without = [], []
    for index in range(2 * rounds):
        attach = index % 2 == 0
        start = time.perf_counter()
        if attach:
            a, b = os.pipe2(os.O_CLOEXEC)
            c, d = os.pipe2(os.O_CLOEXEC)
            protocol.send_control(ours, {"file": LIMITS}, [a, d])
            for fd in (a, d):
                os.close(fd)
        else:
            protocol.send_control(ours, {"file": LIMITS})
        protocol.receive_control(ours)
        (with_fds if attach else without).append(time.perf_counter() - start)
        if attach:
            os.close(b)
            os.close(c)
    ours.close()
    os.waitpid(pid, 0)
    return with_fds, without


samples = {name: [] for name in LEVELS}
rng = random.Random(19)
for level in range(len(LEVELS)):  # warm every path once, untimed
    one(level)
for _ in range(runs):
    order = list(range(len(LEVELS)))
    rng.shuffle(order)
    for level in order:
        samples[LEVELS[level]].append(one(level))
spare = [spare_path() for _ in range(spare_runs)]
with_fds, without = control_roundtrip(runs)
if policy.cgroups is not None:
    policy.cgroups.remove()
try:
    os.rmdir(scratch)
except OSError:  # a mount point in the minimal root: the caller removes it
    pass
with open("/proc/self/status") as status:
    rss_mb = [int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:")][0]
print(json.dumps({"rss_mb": round(rss_mb, 1), "samples": samples, "spare": spare,
                  "scratch": scratch, "minimal_root_ms": root_ms,
                  "control_with_fds": with_fds, "control_without_fds": without,
                  "namespaces": policy.namespaces,
                  "cgroup_state": policy.cgroup_state, "landlock_abi": policy.landlock_abi,
                  "seccomp_state": policy.seccomp_state, "as_root": policy.as_root}))
"""


def _stats(seconds: Sequence[float]) -> dict[str, float]:
    """Median and nearest-rank p95, in milliseconds."""
    ordered = sorted(seconds)
    p95 = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
    return {"median_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(p95 * 1000, 3)}


def measure(runs: int = 300, *, minimal_root: bool = False) -> dict[str, Any]:
    """Time every layer in a fresh worker-shaped process; medians, p95 and increments.

    With `minimal_root` the process first enters the worker's minimal root
    (`namespaces.enter_minimal_root`), so each file's mount namespace is a copy
    of it, as in a real worker; the time entering it took is reported once.
    """
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    spare_runs = max(10, runs // 5)
    done = subprocess.run([sys.executable, "-I", "-c", _PROBE, str(runs), str(spare_runs),
                           "1" if minimal_root else "0"],
                          env=env, capture_output=True, text=True, check=False, cwd="/")
    if done.returncode != 0:  # say why: a bare CalledProcessError hides the probe's traceback
        raise RuntimeError(f"the layer probe exited {done.returncode}: {done.stderr[-3000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    with contextlib.suppress(OSError):
        os.rmdir(raw["scratch"])
    steps: dict[str, Any] = {}
    previous: float | None = None
    for name, label in STEPS.items():
        rows = raw["samples"][name]
        total = _stats([r[0] for r in rows])
        step: dict[str, Any] = {"what": label, **total}
        step["increment_ms"] = None if previous is None else \
            round(total["median_ms"] - previous, 3)
        step["phases"] = {phase: _stats([r[i + 1] for r in rows])["median_ms"]
                          for i, phase in enumerate(PHASES)}
        step["cgroup_remove_retries"] = {"mean": round(statistics.mean(r[5] for r in rows), 2),
                                         "max": max(r[5] for r in rows)}
        steps[name] = step
        previous = total["median_ms"]
    spare = raw["spare"]
    spare_path = {
        "runs": len(spare),
        "fork_spare_ms": _stats([r[0] for r in spare]),
        "handover_and_seal_ms": _stats([r[1] for r in spare]),
        "kill_and_reap_ms": _stats([r[2] for r in spare]),
        "cgroup_remove_ms": _stats([r[3] for r in spare]),
        "cgroup_remove_retries": {"mean": round(statistics.mean(r[4] for r in spare), 2),
                                  "max": max(r[4] for r in spare)},
    }
    spare_path["per_file_critical_ms"] = round(
        spare_path["handover_and_seal_ms"]["median_ms"] + spare_path["kill_and_reap_ms"]
        ["median_ms"] + spare_path["cgroup_remove_ms"]["median_ms"], 3)
    control = {"with_two_fds": _stats(raw["control_with_fds"]),
               "without_fds": _stats(raw["control_without_fds"])}
    control["fds_add_ms"] = round(control["with_two_fds"]["median_ms"]
                                  - control["without_fds"]["median_ms"], 3)
    fork_ms = steps["a_fork"]["median_ms"]
    full_ms = steps["f_confine"]["median_ms"]
    return {
        "runs": runs,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "steps": steps,
        "spare_path": spare_path,
        "control_roundtrip": control,
        "fork_ms": fork_ms,
        "fork_and_sandbox_ms": full_ms,
        "added_ms": full_ms - fork_ms,
        "probe_rss_mb": raw["rss_mb"],
        "namespaces": raw["namespaces"],
        "cgroup_state": raw["cgroup_state"],
        "landlock_abi": raw["landlock_abi"],
        "seccomp_state": raw["seccomp_state"],
        "as_root": raw["as_root"],
        "minimal_root_ms": raw["minimal_root_ms"],
    }


def print_table(result: dict[str, Any]) -> None:
    """The per-layer table, the spare's path and the control round trip."""
    print(f"\nSandbox cost per file, by layer ({result['runs']} interleaved runs each; "
          f"load {result['loadavg_start'][0]:g})")
    header = (f"{'step':<22}{'median':>9}{'p95':>9}{'+step':>8}   "
              f"{'fork':>6}{'child':>7}{'reap':>7}{'rmdir':>7}")
    print(header)
    print("-" * len(header))
    for name, step in result["steps"].items():
        increment = step["increment_ms"]
        phases = step["phases"]
        print(f"{name:<22}{step['median_ms']:>9.2f}{step['p95_ms']:>9.2f}"
              f"{'' if increment is None else f'{increment:+.2f}':>8}   "
              f"{phases['parent_setup_and_fork_ms']:>6.2f}{phases['child_setup_ms']:>7.2f}"
              f"{phases['exit_and_reap_ms']:>7.2f}{phases['cgroup_remove_ms']:>7.2f}")
    print("(ms; phases are medians: parent set-up + fork, child set-up, exit + reap, "
          "cgroup rmdir)")
    added = result["added_ms"]
    print(f"all layers add {added:.2f} ms to a plain fork's {result['fork_ms']:.2f} ms")
    if result.get("minimal_root_ms") is not None:
        print(f"the worker's minimal root took {result['minimal_root_ms']:.2f} ms, once "
              f"({result['namespaces'].get('minimal_root')})")
    spare = result["spare_path"]
    print(f"\nSpare path ({spare['runs']} runs): fork a spare (b-d) "
          f"{spare['fork_spare_ms']['median_ms']:.2f} ms, then per file: hand-over + seal "
          f"(e, f) {spare['handover_and_seal_ms']['median_ms']:.2f} ms, kill + reap "
          f"{spare['kill_and_reap_ms']['median_ms']:.2f} ms, cgroup rmdir "
          f"{spare['cgroup_remove_ms']['median_ms']:.2f} ms "
          f"(retries: mean {spare['cgroup_remove_retries']['mean']:g})")
    control = result["control_roundtrip"]
    print(f"Control round trip over SOCK_SEQPACKET: "
          f"{control['with_two_fds']['median_ms']:.3f} ms with two fds, "
          f"{control['without_fds']['median_ms']:.3f} ms without "
          f"(fds add {control['fds_add_ms']:.3f} ms)")


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=300, help="timed runs per variant (300)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON path ({RESULTS})")
    parser.add_argument("--minimal-root", action="store_true",
                        help="enter the worker's minimal root first, as a real worker does")
    args = parser.parse_args(argv)
    result = measure(args.runs, minimal_root=args.minimal_root)
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)
    main()
