"""benchmarks/sandbox_compare.py: the pure helpers build the box and the tables it reports.

Nothing here needs bwrap or runs a process: the bwrap argv, the worker
detection used to wrap a pool's worker, the statistics and the table
formatter are checked on inputs built inline. No test asserts on time.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def bench(bench_scripts: Any) -> Any:
    return bench_scripts.load("sandbox_compare")


def test_argv_unshares_everything_and_ends_with_a_read_only_root(bench) -> None:
    argv = bench.bwrap_argv(ro_binds=["/usr", "/root/.pyenv/versions/3.11.7"],
                            symlinks=[("usr/bin", "/bin")], scratch_bytes=1024)
    assert argv[:2] == ["bwrap", "--unshare-all"]
    assert argv[-5:] == ["--remount-ro", "/", "--chdir", "/", "--"]
    assert argv[argv.index("--size") + 1:argv.index("--size") + 4] == ["1024", "--tmpfs", "/tmp"]
    assert argv[argv.index("--uid") + 1] == "65534"
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--symlink"):][:3] == ["--symlink", "usr/bin", "/bin"]
    assert "--seccomp" not in argv


def test_argv_makes_each_parent_traversable_once_before_its_bind(bench) -> None:
    argv = bench.bwrap_argv(ro_binds=["/root/.pyenv/a", "/root/.pyenv/b"],
                            binds=["/tmp/pool/worker"])
    dirs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--dir"]
    assert dirs == ["/root", "/root/.pyenv", "/tmp/pool"]
    assert argv.index("/tmp/pool") < argv.index("--bind")
    assert argv[argv.index("--bind"):][:3] == ["--bind", "/tmp/pool/worker", "/tmp/pool/worker"]


def test_argv_without_a_user_namespace_lists_the_other_namespaces(bench) -> None:
    argv = bench.bwrap_argv(ro_binds=[], user_namespace=False, uid=None, cap_drop=False,
                            seccomp_fd=7)
    assert "--unshare-all" not in argv and "--uid" not in argv and "--cap-drop" not in argv
    assert {"--unshare-pid", "--unshare-ipc", "--unshare-net"} <= set(argv)
    assert argv[argv.index("--seccomp") + 1] == "7"
    with pytest.raises(ValueError, match="user namespace"):
        bench.bwrap_argv(ro_binds=[], user_namespace=False)


@pytest.mark.parametrize(("argv", "worker"), [
    (["/v/bin/python", "-I", "-m", "capsa.guard._worker"], True),
    (["python3", "-I", "-m", "capsa.guard.sandbox.zygote"], True),
    (["python", "-m", "capsa.guardian"], False),
    (["python", "-m", "pip", "install", "capsa.guard"], False),
    (["python", "-c", "import capsa.guard._worker"], False),
    (["python", "-m"], False),
])
def test_worker_command_is_recognised_wherever_the_module_moves(bench, argv, worker) -> None:
    assert bench.is_worker_command(argv) is worker


def test_summarise_reports_milliseconds_and_a_p95_within_the_samples(bench) -> None:
    stats = bench.summarise([i / 1000 for i in range(1, 21)])
    assert stats["runs"] == 20
    assert stats["median_ms"] == pytest.approx(10.5)
    assert stats["min_ms"] <= stats["median_ms"] <= stats["p95_ms"] <= 20.0
    assert bench.summarise([]) == {"runs": 0}


def test_table_aligns_numbers_right_and_text_left(bench) -> None:
    table = bench.format_table(["set-up", "p50"], [["direct", 96.64], ["bwrap", None]])
    lines = table.splitlines()
    assert lines[0] == "set-up  p50"
    assert lines[2] == "direct 96.6"
    assert lines[3] == "bwrap     -"
    assert len({len(line) for line in lines[:3]}) == 1


def test_last_error_line_skips_warnings(bench) -> None:
    tail = "runpy:128: RuntimeWarning: found in sys.modules\nbwrap: --x requires --y\n"
    assert bench.last_error_line(tail) == "bwrap: --x requires --y"
    assert bench.last_error_line("") == ""
