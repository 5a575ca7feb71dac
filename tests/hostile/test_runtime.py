"""R: runtime and environment (R1–R4), and the isolation properties behind them.

R1 a parser that fetches code at run time meets a worker without network;
R2 a parser that prints cannot corrupt the protocol; R3 capsa's zip checks do
not depend on the interpreter's patch level; R4 no parser state survives from
one file to the next. The probes (`hostile._probes`) observe each property
from inside the parse child.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    IsolatedExtractor,
    extract_all,
    extract_attachment,
)
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.samples import (
    MiB,
    zip_overlap_bomb,
)
from capsa.guard.testing import MisbehavingExtractor

from ._probes import LEFT_BEHIND, OrphanedAtForkExtractor, Probe, ProbeExtractor, probe_payload
from .conftest import (
    LIMITS,
    CatalogueGap,
    PoolFor,
    assert_omitted,
    good_echo,
    good_text,
    leftover_processes,
    probes_importable,
    run_among_good,
    sandbox_marker,
    sandbox_processes,
    worker_scratch,
)

GOOD = [good_echo("before.txt", "before"), good_echo("after.txt", "after")]


def _probe(name: Probe) -> Attachment:
    return Attachment(label=f"{name}.txt", media_type="text/plain", payload=probe_payload(name))


# ---------------------------------------------------------------- R1: no network, offline


@pytest.mark.slow
def test_r1_real_pool_reports_its_network_mode_and_parses_every_kind_offline(
        real_pool: IsolatedExtractor) -> None:
    health = real_pool.health
    assert health["network"] in {"namespace+sockets-refused", "sockets-refused"}
    # The self-test parsed one sample of every kind inside the network-less
    # worker: unstructured's run-time spaCy download was never needed.
    report = health["self_test"]
    assert {"pdf", "docx", "xlsx", "pptx", "html", "eml", "epub", "rtf", "text"} <= set(report)
    images = {"png", "jpeg", "tiff", "webp"}
    checked = set(report) if shutil.which("tesseract") else set(report) - images
    assert {kind: report[kind] for kind in checked if report[kind] != "ok"} == {}


def test_r1_parse_child_cannot_reach_localhost_even_below_python(
        probe_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(probe_pool, _probe("raw_connect"), good=GOOD)
    assert isinstance(outcome, Extracted)
    assert outcome.text != "connected"
    if probe_pool.health.sandbox.is_active("seccomp"):
        # seccomp's allow-list refuses a socket of any family before it exists
        assert outcome.text == "errno=EPERM"
    elif probe_pool.health["network"].startswith("namespace"):
        # In a fresh network namespace even loopback is down: the kernel, not
        # a Python patch, refuses the C-level socket.
        assert outcome.text == "errno=ENETUNREACH"


# ------------------------------------------------------------- R2: stdout kept away


def test_r2_worker_stdout_points_at_dev_null(plain_pool: IsolatedExtractor) -> None:
    zygote = plain_pool.health["pid"]
    assert os.readlink(f"/proc/{zygote}/fd/1") == "/dev/null"


def test_r2_worker_is_a_fresh_isolated_interpreter_not_a_fork(
        plain_pool: IsolatedExtractor) -> None:
    zygote = plain_pool.health["pid"]
    argv = Path(f"/proc/{zygote}/cmdline").read_bytes().split(b"\0")
    assert b"-I" in argv
    assert argv[argv.index(b"-m") + 1] == b"capsa.guard.sandbox.zygote"
    assert Path(f"/proc/{zygote}/cwd").resolve() == Path("/")


# ------------------------------------------------------ R3: own checks, any patch level


def test_r3_overlap_bomb_is_refused_without_zipfile(plain_pool: IsolatedExtractor,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def unusable(*args: object, **kwargs: object) -> None:
        raise AssertionError("the archive guard must not depend on zipfile")

    monkeypatch.setattr(zipfile, "ZipFile", unusable)
    bomb = Attachment(label="overlap.zip", payload=zip_overlap_bomb(250, 1024))
    outcome = run_among_good(plain_pool, bomb)
    assert_omitted(outcome, stage="archive", reason="overlapping_members")


# -------------------------------------------------------------- R4: nothing carries over


def test_r4_every_file_gets_a_fresh_process_with_fresh_state(
        probe_pool: IsolatedExtractor) -> None:
    first = extract_attachment(_probe("fresh_state"), probe_pool, LIMITS).text
    second = extract_attachment(_probe("fresh_state"), probe_pool, LIMITS).text
    assert first.endswith("calls=1")
    assert second.endswith("calls=1")
    if probe_pool.health.sandbox.is_active("pid_namespace"):
        # each the init of a PID namespace of its own
        assert first.split()[0] == second.split()[0] == "pid=1"
    else:
        assert first.split()[0] != second.split()[0]  # different pids


def test_r4_file_left_in_scratch_is_gone_before_the_next_file(
        probe_pool: IsolatedExtractor) -> None:
    require_layer(probe_pool, "scratch_tmpfs")
    wrote = run_among_good(probe_pool, _probe("write_scratch"), good=GOOD)
    assert isinstance(wrote, Extracted)
    written = Path(wrote.text.removeprefix("wrote a file into "))
    # the file's scratch is a tmpfs mounted over the worker's directory in the
    # child's own mount namespace: the host's directory never held the file
    assert written == worker_scratch(probe_pool)
    assert list(written.iterdir()) == []
    listing = extract_attachment(_probe("list_scratch"), probe_pool, LIMITS).text
    scratch = Path(listing.removeprefix("scratch ").removesuffix(" holds:"))
    assert listing == f"scratch {scratch} holds:"  # the next file's scratch starts empty
    home = extract_attachment(_probe("list_home"), probe_pool, LIMITS).text
    assert home == "home holds:"  # and nothing is left anywhere under the pool's scratch


def test_r4_file_writes_stop_at_the_limit_inside_the_files_own_scratch(
        probe_pool: IsolatedExtractor) -> None:
    require_layer(probe_pool, "scratch_tmpfs")
    limits = LIMITS.model_copy(update={"max_file_write_bytes": 4 * MiB})
    outcome = run_among_good(probe_pool, _probe("write_until_refused"), limits, good=GOOD)
    assert isinstance(outcome, Extracted)
    written, where, refusal = re.fullmatch(r"wrote (\d+) bytes into (\S+), then (\S+)",
                                           outcome.text).groups()  # type: ignore[union-attr]
    # RLIMIT_FSIZE stops one file at the limit (EFBIG; CPython ignores SIGXFSZ);
    # the scratch tmpfs, of the same size, stops them all together (ENOSPC).
    assert refusal in ("EFBIG", "ENOSPC")
    assert int(written) <= 4 * MiB
    assert Path(where) == worker_scratch(probe_pool)
    assert list(Path(where).iterdir()) == []


def test_r4_file_left_by_a_worker_that_died_mid_file_is_gone_before_the_next_file() -> None:
    # Without the sandbox: with it, the child can neither kill its zygote nor
    # list the worker's directory, so this checks the clean-up on its own.
    with probes_importable(), IsolatedExtractor(ProbeExtractor(), workers=1,
                                                sandbox="off") as pool:
        with pytest.raises(ExtractionFailed) as failed:
            extract_attachment(_probe("write_then_kill_worker"), pool, LIMITS)
        assert failed.value.cause == "crashed"
        assert pool.restarts == 1
        home = extract_attachment(_probe("list_home"), pool, LIMITS).text
        if LEFT_BEHIND in home:
            raise CatalogueGap(f"the next file's parser can read the dead worker's file: {home}")
        assert home == "home holds:"


# ------------------------------------------------------------ the pool survives anything


def test_parse_child_that_cannot_describe_its_error_still_fails_typed(
        probe_pool: IsolatedExtractor) -> None:
    # str() of the exception raises; the child still reports, naming its type.
    outcome = run_among_good(probe_pool, _probe("broken_str"), good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert omission.detail == "_Unprintable"


def test_parser_error_with_a_lone_surrogate_leaves_a_valid_utf8_detail(
        probe_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(probe_pool, _probe("raise_surrogate"), good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    # The child encodes its report with errors="replace", so the surrogate
    # arrives as "?"; in process, clean_detail makes it U+FFFD. Either is valid.
    assert omission.detail in {f"ValueError: header byte {mark} could not be decoded"
                               for mark in ("?", "\ufffd")}


def test_parser_error_with_terminal_escapes_leaves_a_clean_detail(
        probe_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(probe_pool, _probe("raise_escape"), good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert not [ch for ch in omission.detail if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0]
    assert omission.detail.endswith("click here]8;;")  # the printable tail is kept


def test_parser_error_quoting_megabytes_of_input_stays_a_raised_failure(
        probe_pool: IsolatedExtractor) -> None:
    # 24 MB of error message, far past the reply frame: capped in the child, so
    # the file is "raised", never "protocol", and the detail stays short.
    outcome = run_among_good(probe_pool, _probe("raise_huge"), good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert omission.detail.startswith("ValueError: cannot parse \ufdfa")
    assert len(omission.detail) <= 2000


def test_parser_error_naming_a_scratch_path_does_not_leak_it(
        probe_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(probe_pool, _probe("raise_scratch_path"), good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert omission.detail.startswith("FileNotFoundError:")
    assert "<scratch>/missing/part.xml" in omission.detail
    assert "capsa-worker-" not in omission.detail
    assert str(worker_scratch(probe_pool)) not in omission.detail


@pytest.mark.parametrize("probe", ["setsid_daemon", "setsid_daemon_chain"])
def test_daemon_spawned_by_a_parser_does_not_outlive_its_file(probe: Probe) -> None:
    # The daemons leave the child's process group (out of reach of its kill)
    # and inherit the result pipe; the file still ends as soon as the child
    # does, and the zygote, their subreaper, kills every one of them.
    with probes_importable(), IsolatedExtractor(ProbeExtractor(), workers=1) as pool:
        seccomp = pool.health.sandbox.is_active("seccomp")
        try:
            started = extract_attachment(_probe(probe), pool, LIMITS).text
            survivors = leftover_processes(pool)
            outcome = run_among_good(pool, _probe(probe), good=GOOD)
        finally:
            for pid in leftover_processes(pool):  # processes this test caused; end them by id
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    expected = 2 if probe.endswith("chain") else 1
    # seccomp refuses setsid outright; without it the daemons really leave the group
    ran = 0 if seccomp else expected
    assert started.startswith(f"{ran} of {expected} daemons")
    assert survivors == []  # gone right after their own file, not just after the next
    assert isinstance(outcome, Extracted)  # no timeout: the pipe they hold was not waited on
    assert outcome.text.startswith(f"{ran} of {expected} daemons")


def test_child_orphaned_before_it_arms_its_death_signal_does_not_run_on() -> None:
    # Without the sandbox: inside it the zygote is its PID namespace's init,
    # which no process in the namespace can kill, so the race cannot be staged.
    with probes_importable(), IsolatedExtractor(OrphanedAtForkExtractor(), workers=1,
                                                sandbox="off") as pool:
        marker = sandbox_marker(pool)
        try:
            with pytest.raises(ExtractionFailed) as failed:
                extract_attachment(Attachment(label="orphan.txt", payload=b"x"), pool, LIMITS)
            deadline = time.monotonic() + 3
            while leftover_processes(pool, marker=marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            survivors = leftover_processes(pool, marker=marker)
        finally:
            for pid in leftover_processes(pool, marker=marker):  # this test's orphans, by id
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert failed.value.cause == "crashed"
    if survivors:
        raise CatalogueGap(f"the orphaned parse child {survivors} still runs")


def test_worker_killed_between_files_is_replaced_before_the_next_file() -> None:
    with IsolatedExtractor(PlainTextExtractor(), workers=1) as pool:
        zygote = pool.health["pid"]
        os.kill(zygote, signal.SIGKILL)  # the worker this test's own pool started
        _wait_gone(zygote)
        assert extract_attachment(good_text().attachment, pool, LIMITS).text == good_text().phrase
        assert pool.restarts == 1
        assert pool.health["pid"] != zygote


def test_worker_killed_mid_file_fails_that_file_as_crashed_and_takes_its_child() -> None:
    with IsolatedExtractor(MisbehavingExtractor("hang"), workers=1) as pool:
        failed = _kill_worker_mid_file(pool)
        assert (failed.stage, failed.cause) == ("parser", "crashed")
        assert "died" in failed.detail
        assert leftover_processes(pool) == []
        next_file = good_echo().attachment
        assert extract_attachment(next_file, pool, LIMITS).text == good_echo().phrase
        assert pool.restarts == 1


def test_worker_killed_mid_file_is_reported_as_crashed_every_time() -> None:
    # The pipe reaches end-of-file a moment before the killed worker can be
    # reaped; the pool must read that as a death, not as a stall, every time.
    with IsolatedExtractor(MisbehavingExtractor("hang"), workers=1) as pool:
        causes = [_kill_worker_mid_file(pool).cause for _ in range(12)]
    assert causes == ["crashed"] * 12


def _kill_worker_mid_file(pool: IsolatedExtractor) -> ExtractionFailed:
    """Start a hanging file, SIGKILL the zygote serving it, return the file's failure.

    The zygote is a process this test's own pool started; it is ended by pid.
    The parse child must die with it (PR_SET_PDEATHSIG).
    """
    zygote = pool.health["pid"]
    marker = sandbox_marker(pool)
    with ThreadPoolExecutor(max_workers=1) as runner:
        pending = runner.submit(extract_attachment, Attachment(label="h.txt", payload=b"x"),
                                pool, LIMITS)
        # Wait until the child has set its file's rlimits (a spare has no CPU
        # limit until its file arrives), long after arming PR_SET_PDEATHSIG: a
        # zygote killed before that is a separate finding
        # (test_child_orphaned_before_it_arms_its_death_signal_...).
        child = _wait_for(lambda: [p for p in leftover_processes(pool, marker=marker)
                                   if _parent(p) == zygote and _cpu_limit(p) is not None])
        os.kill(zygote, signal.SIGKILL)
        with pytest.raises(ExtractionFailed) as failed:
            pending.result()
    _wait_gone(child[0])
    return failed.value


def _wait_for(probe: Callable[[], list[int]], timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError("the awaited process never appeared")


def _wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _parent(pid) == -1 or _state(pid) == "Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still alive")


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cpu_limit(pid: int) -> int | None:
    """The soft ``RLIMIT_CPU`` of `pid` in seconds, or None (unlimited, or gone)."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
    except OSError:
        return None
    line = next((line for line in limits if line.startswith("Max cpu time")), "")
    soft = line.removeprefix("Max cpu time").split()[:1]
    return int(soft[0]) if soft and soft[0].isdigit() else None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def test_extract_all_raises_the_first_typed_error_when_asked(
        misbehaving_pool: PoolFor) -> None:
    pool = misbehaving_pool("segfault")
    files = [good_echo().attachment, Attachment(label="crash.txt", payload=b"boom"),
             Attachment(label="empty.txt", payload=b"")]
    with pytest.raises(ExtractionFailed) as failed:
        extract_all(files, pool, LIMITS, on_rejection="raise")
    assert (failed.value.label, failed.value.cause, failed.value.stage) == (
        "crash.txt", "crashed", "parser")
    with pytest.raises(IngestionRejected) as rejected:
        extract_all(files[2:], pool, LIMITS, on_rejection="raise")
    assert (rejected.value.stage, rejected.value.reason) == ("size", "empty")


def require_layer(pool: IsolatedExtractor, name: str) -> None:
    if not pool.health.sandbox.is_active(name):
        pytest.skip(f"this machine lacks {name} (see `capsa doctor`)")


def _spares(pool: IsolatedExtractor) -> list[int]:
    zygote = pool.health["pid"]
    return [pid for pid in sandbox_processes(pool) if _parent(pid) == zygote
            and Path(f"/proc/{pid}/comm").read_bytes().strip() == b"capsa-spare"]


def test_an_idle_worker_holds_one_confined_spare_and_each_file_gets_a_new_one() -> None:
    with IsolatedExtractor(PlainTextExtractor(), workers=1, light_path=False) as pool:
        pool.warm_up()
        (first,) = _wait_for(lambda: _spares(pool))
        assert _cpu_limit(first) is None  # no file yet, so none of a file's limits
        if pool.health.sandbox.is_active("pid_namespace"):
            # it waits already in namespaces of its own, not the zygote's
            zygote = pool.health["pid"]
            assert _wait_for(lambda: [first] if os.readlink(f"/proc/{first}/ns/ipc")
                             != os.readlink(f"/proc/{zygote}/ns/ipc") else [])
            assert os.readlink(f"/proc/{first}/ns/pid") != os.readlink(f"/proc/{zygote}/ns/pid")
        assert extract_attachment(good_text().attachment, pool, LIMITS).text
        _wait_gone(first)  # the spare that took the file ended with it
        (second,) = _wait_for(lambda: _spares(pool))
        assert second != first


def test_a_spare_killed_while_idle_costs_the_next_file_nothing() -> None:
    with IsolatedExtractor(PlainTextExtractor(), workers=1, light_path=False) as pool:
        pool.warm_up()
        for _ in range(3):
            (spare,) = _wait_for(lambda: _spares(pool))
            os.kill(spare, signal.SIGKILL)  # a process this test's pool started
            _wait_gone(spare)
            assert extract_attachment(good_text().attachment, pool, LIMITS).text
        assert pool.restarts == 0


def test_the_zygote_freezes_what_it_loaded_so_children_never_collect_it() -> None:
    with probes_importable(), IsolatedExtractor(ProbeExtractor(), workers=1,
                                                light_path=False) as pool:
        reply = extract_attachment(_probe("gc_frozen"), pool, LIMITS).text
    frozen = int(reply.split()[0])
    assert frozen > 10_000  # the interpreter, capsa and the parsers' modules


@pytest.mark.parametrize("light_path", [True, False], ids=["light-path", "spare"])
def test_a_parse_child_holds_only_its_own_result_pipe(light_path: bool) -> None:
    # A parser a crafted file has taken over can use any descriptor it
    # inherited: the zygote's control channel would let it read other files or
    # answer for them. The kernel's table must show /dev/null and one pipe: its
    # request pipe is closed once read, before the parser runs.
    with probes_importable(), IsolatedExtractor(ProbeExtractor(), workers=1,
                                                light_path=light_path) as pool:
        tables = [extract_attachment(_probe("open_fds"), pool, LIMITS).text for _ in range(2)]
    pipes = []
    for table in tables:
        targets = [line.split(" ", 1)[1] for line in table.splitlines()]
        assert targets[:3] == ["/dev/null"] * 3
        others = [t for t in targets if t != "/dev/null"]
        assert len(others) == 1 and others[0].startswith("pipe:"), table
        pipes.append(others[0])
    assert pipes[0] != pipes[1]  # each file writes to a pipe of its own
