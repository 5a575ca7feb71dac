"""`capsa.guard.sandbox.cgroups`: a file's limits and usage, read and written as the kernel's files.

The real per-file cgroups are exercised by the attack suites (the CPU of ten
processes, memfd and shared memory under one limit, as root and as nobody on
this host's cgroup v1). These tests pin the file-level behaviour of both
versions on a directory laid out like each, so the v2 path, which this host
does not have, is checked too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capsa.guard.sandbox.cgroups import FileCgroup, WorkerCgroups


def v1(tmp_path: Path) -> FileCgroup:
    dirs = []
    for controller in ("memory", "pids", "cpuacct"):
        directory = tmp_path / controller / "file-1"
        directory.mkdir(parents=True)
        dirs.append(str(directory))
    memory, pids, cpuacct = (Path(d) for d in dirs)
    (memory / "memory.usage_in_bytes").write_text("1000\n")
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    (pids / "pids.max").write_text("max\n")
    (cpuacct / "cpuacct.usage").write_text("2500000000\n")
    return FileCgroup(tuple(dirs), 1)


def v2(tmp_path: Path) -> FileCgroup:
    directory = tmp_path / "file-1"
    directory.mkdir()
    (directory / "memory.current").write_text("4096\n")
    (directory / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    (directory / "cpu.stat").write_text("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
    return FileCgroup((str(directory),), 2)


def test_v1_limit_allows_the_files_memory_on_top_of_what_the_child_holds(
        tmp_path: Path) -> None:
    cgroup = v1(tmp_path)
    cgroup.limit(memory_bytes=64, processes=128)
    assert (tmp_path / "memory/file-1/memory.limit_in_bytes").read_text() == "1064"
    assert (tmp_path / "pids/file-1/pids.max").read_text() == "128"
    assert cgroup.cpu_ns() == 2_500_000_000


def test_v2_limit_writes_memory_max_and_reads_cpu_from_cpu_stat(tmp_path: Path) -> None:
    cgroup = v2(tmp_path)
    cgroup.limit(memory_bytes=100, processes=7)
    assert (tmp_path / "file-1/memory.max").read_text() == "4196"
    assert (tmp_path / "file-1/memory.swap.max").read_text() == "0"
    assert (tmp_path / "file-1/pids.max").read_text() == "7"
    assert cgroup.cpu_ns() == 1_500_000


@pytest.mark.parametrize("version", [1, 2])
def test_out_of_memory_is_the_kernels_oom_kill_count_not_reclaim(
        tmp_path: Path, version: int) -> None:
    cgroup = v1(tmp_path) if version == 1 else v2(tmp_path)
    assert not cgroup.out_of_memory()  # v2 above: "max 3" (reclaim) but no kill
    events = Path(cgroup.dirs[0]) / ("memory.oom_control" if version == 1 else "memory.events")
    events.write_text(events.read_text().replace("oom_kill 0", "oom_kill 1"))
    assert cgroup.out_of_memory()


def test_remove_reports_a_cgroup_that_is_still_busy(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "left").write_text("")  # rmdir fails, as it does on a cgroup with a process
    assert FileCgroup((str(busy),), 2).remove() is False
    empty = tmp_path / "empty"
    empty.mkdir()
    assert FileCgroup((str(empty), str(tmp_path / "gone")), 2).remove() is True
    assert not empty.exists()


def test_the_worker_cgroups_this_host_gives_are_named_in_their_state() -> None:
    cgroups, state = WorkerCgroups.create(f"capsa-test-{id(object())}")
    try:
        assert state.startswith(("active: cgroup v", "unavailable: "))
        assert (cgroups is None) == state.startswith("unavailable")
    finally:
        if cgroups is not None:
            cgroups.remove()
            assert not any(Path(root).exists() for root in cgroups.roots)


def test_a_closed_pool_leaves_no_cgroup_behind() -> None:
    from capsa.guard import IsolatedExtractor
    from capsa.guard.extractors import PlainTextExtractor

    with IsolatedExtractor(PlainTextExtractor(), workers=2, light_path=False) as pool:
        pool.start()
        assert pool.extract("text", "text/plain", b"hello", max_pages=1) == "hello"
        roots = [root for worker in pool._all for root in worker.cgroups]
        if not pool.health.sandbox.is_active("cgroup"):
            pytest.skip("this host delegates no cgroup to the pool (see `capsa doctor`)")
        assert roots and all(Path(root).is_dir() for root in roots)
    assert [root for root in roots if Path(root).exists()] == []


def test_sweep_removes_only_dead_workers_cgroups_and_only_empty_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from capsa.guard.sandbox import cgroups

    live = {4242}
    monkeypatch.setattr(cgroups, "_is_worker", lambda pid: pid in live)
    for name in ("capsa-worker-4242", "capsa-worker-999", "capsa-worker-998", "other-1"):
        (tmp_path / name / "file-1").mkdir(parents=True)
    (tmp_path / "capsa-worker-998" / "file-1" / "busy").write_text("")  # rmdir is refused

    assert cgroups.sweep_stale({str(tmp_path)}) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "capsa-worker-4242", "capsa-worker-998", "other-1"]


def test_a_dead_workers_cgroup_of_the_same_name_is_replaced() -> None:
    # pids are reused: a worker killed before cleaning up leaves its name to a later pid
    name = f"capsa-test-{id(object())}"
    first, state = WorkerCgroups.create(name)
    if first is None:
        pytest.skip(f"this host delegates no cgroup ({state})")
    for root in first.roots:
        os.mkdir(os.path.join(root, "file-7"))  # its last file's cgroup, left too
    second, state = WorkerCgroups.create(name)
    try:
        assert second is not None and state.startswith("active"), state
        assert second.roots == first.roots
        assert not any(Path(root, "file-7").exists() for root in second.roots)
    finally:
        if second is not None:
            second.remove()
        first.remove()
