"""`IsolatedExtractor`: a pool of scrubbed zygote workers, one fresh rlimited child per file.

Misbehaviour comes from `capsa.guard.testing.MisbehavingExtractor`; a payload
starting with ``echo:`` is always echoed, so one pool can serve a hostile file
and then prove it still works. Limits are short (2 s wall clock) to keep the
module fast; nothing here asserts on elapsed time.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import ExtractionLimits, IsolatedExtractor
from capsa.guard.extractors import PlainTextExtractor, TesseractExtractor
from capsa.guard.sandbox.pool import _interpret
from capsa.guard.testing import Behaviour, MisbehavingExtractor

pytestmark = [
    pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the worker needs Linux"),
    pytest.mark.timeout(120),
]

MiB = 1024 * 1024
LIMITS = ExtractionLimits(timeout_s=2, cpu_s=10, memory_bytes=256 * MiB,
                          max_file_write_bytes=1 * MiB)
SCRUBBED_ENV = {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "OMP_NUM_THREADS",
                "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "UNSTRUCTURED_DISABLE_NOTICE",
                "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "PYTHONDONTWRITEBYTECODE",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TESSDATA_PREFIX"}


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def worker_pids() -> set[int]:
    """Live extraction workers that are children of this test process."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and state != "Z" and b"capsa.guard.sandbox.zygote" in command:
            found.add(int(entry))
    return found


def is_dead(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def wait_until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if condition():
            return
        time.sleep(0.025)
    raise AssertionError(f"gave up waiting until {what}")


@pytest.fixture(scope="module")
def pools() -> Iterator[Callable[[Behaviour], IsolatedExtractor]]:
    """One started single-worker pool per behaviour, shared by the module."""
    started: dict[str, IsolatedExtractor] = {}

    def get(behaviour: Behaviour) -> IsolatedExtractor:
        if behaviour not in started:
            started[behaviour] = IsolatedExtractor(MisbehavingExtractor(behaviour))
            started[behaviour].start()
        return started[behaviour]

    yield get
    for pool in started.values():
        pool.close()


def run(pool: IsolatedExtractor, payload: bytes = b"x",
        limits: ExtractionLimits = LIMITS) -> str:
    return pool.run("text", None, payload, limits, label="f.txt")


def failure(pool: IsolatedExtractor, limits: ExtractionLimits = LIMITS) -> ExtractionFailed:
    with pytest.raises(ExtractionFailed) as caught:
        run(pool, limits=limits)
    assert caught.value.label == "f.txt"
    assert run(pool, b"echo:next") == "echo:next", "the pool must carry on after a failure"
    return caught.value


# lifecycle


def test_isolated_extractor_starts_no_worker_when_built() -> None:
    before = worker_pids()

    pool = IsolatedExtractor(PlainTextExtractor(), workers=2)

    assert worker_pids() == before
    pool.close()


def test_isolated_extractor_start_launches_every_worker_and_close_stops_them() -> None:
    before = worker_pids()
    pool = IsolatedExtractor(PlainTextExtractor(), workers=2)

    pool.start()
    started = worker_pids() - before
    pool.close()

    assert len(started) == 2
    assert worker_pids() & started == set()


def test_isolated_extractor_reports_its_first_worker_in_health() -> None:
    before = worker_pids()
    with IsolatedExtractor(PlainTextExtractor()) as pool:
        health = pool.health
        started = worker_pids() - before
        parent = _parent_of(health["pid"])

    assert health["ready"] is True
    # the started process, or the init of its PID namespace that it forked
    assert health["pid"] in started or parent in started
    assert health["network"] in {"namespace+sockets-refused", "sockets-refused"}
    assert health["self_test"] == {"csv": "ok", "json": "ok", "markdown": "ok", "text": "ok"}


def test_isolated_extractor_as_context_manager_starts_and_stops_its_workers() -> None:
    before = worker_pids()

    with IsolatedExtractor(PlainTextExtractor()) as pool:
        inside = worker_pids() - before
        text = pool.extract("text", "text/plain", b"hello", max_pages=1)

    assert isinstance(pool, IsolatedExtractor)
    assert (len(inside), text) == (1, "hello")
    assert worker_pids() & inside == set()


def test_isolated_extractor_removes_its_scratch_directory_on_close() -> None:
    with IsolatedExtractor(MisbehavingExtractor("env")) as pool:
        env = dict(line.split("=", 1) for line in run(pool).splitlines())
        scratch = Path(env["TMPDIR"]).parent
        assert scratch.is_dir()

    assert not scratch.exists()


def test_each_file_gets_its_own_scratch_and_the_host_directory_stays_empty(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    pool = pools("env")

    first, second = (dict(line.split("=", 1) for line in run(pool).splitlines())
                     for _ in range(2))

    # Each child mounts a tmpfs of its own over the worker's directory, in its own
    # mount namespace: HOME and TMPDIR name it, and nothing lands on the host's.
    assert first["TMPDIR"] == second["TMPDIR"] == first["HOME"]
    if pool.health.sandbox.is_active("scratch_tmpfs"):
        assert list(Path(first["TMPDIR"]).iterdir()) == []


def test_isolated_extractor_refuses_work_after_close() -> None:
    pool = IsolatedExtractor(PlainTextExtractor())
    pool.start()
    pool.close()

    with pytest.raises(RuntimeError, match="closed"):
        pool.extract("text", None, b"hello", max_pages=1)


def test_isolated_extractor_refuses_fewer_than_one_worker() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        IsolatedExtractor(PlainTextExtractor(), workers=0)


def test_isolated_extractor_exposes_the_kinds_of_its_inner_extractor() -> None:
    pool = IsolatedExtractor(PlainTextExtractor())

    assert pool.kinds == PlainTextExtractor.kinds


def test_isolated_extractor_port_method_applies_the_pool_default_limits() -> None:
    limits = ExtractionLimits(max_text_chars=5)
    with IsolatedExtractor(PlainTextExtractor(), limits=limits) as pool, \
            pytest.raises(IngestionRejected) as caught:
        pool.extract("text", None, b"abcdef", max_pages=1)

    assert (caught.value.label, caught.value.reason) == ("<payload>", "text_too_long")


def test_isolated_extractor_refuses_a_kind_whose_parser_failed_its_self_test() -> None:
    with IsolatedExtractor(TesseractExtractor(lang="no-such-language")) as pool, \
            pytest.raises(ExtractionFailed) as caught:
        pool.run("png", None, b"\x89PNG\r\n\x1a\n", LIMITS, label="scan.png")

    assert caught.value.cause == "raised"
    assert "png parser failed its start-up self-test" in caught.value.detail


# concurrency


def test_two_workers_serve_other_threads_while_one_file_hangs() -> None:
    with IsolatedExtractor(MisbehavingExtractor("hang"), workers=2) as pool:
        hung_done = threading.Event()

        def hang() -> None:
            try:
                run(pool)
            except ExtractionFailed:
                hung_done.set()

        hanging = threading.Thread(target=hang)
        hanging.start()
        # The pool exposes no "busy" count; its idle queue is the only way to know
        # the hanging file really holds a worker before the other thread starts.
        wait_until(lambda: pool._idle.qsize() == 1, "the hanging file holds one worker")
        served = [run(pool, f"echo:{i}".encode()) for i in range(3)]
        still_hanging = not hung_done.is_set()
        hanging.join()

    assert served == ["echo:0", "echo:1", "echo:2"]
    assert still_hanging
    assert hung_done.is_set()


def test_concurrent_threads_each_get_their_own_text_back() -> None:
    payloads = [f"echo:thread-{t}-file-{f}".encode() for t in range(4) for f in range(5)]

    with IsolatedExtractor(MisbehavingExtractor("echo"), workers=2) as pool, \
            ThreadPoolExecutor(max_workers=4) as threads:
        texts = list(threads.map(lambda p: run(pool, p), payloads))

    assert texts == [p.decode() for p in payloads]


# a parser that loses: the call fails with a cause, the pool carries on


def test_hung_parser_times_out_and_the_same_worker_serves_the_next_file(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    pool = pools("hang")
    pid = pool.health["pid"]

    error = failure(pool)

    assert (error.cause, error.detail) == ("timeout",
                                           "ran past the wall-clock limit of 2 s (timeout_s)")
    assert pool.restarts == 0
    assert pool.health["pid"] == pid


def test_parser_sleeping_inside_c_times_out(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    assert failure(pools("sleep")).cause == "timeout"


def test_parser_over_its_cpu_seconds_is_stopped_by_rlimit_cpu(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("hang"), LIMITS.model_copy(update={"cpu_s": 1, "timeout_s": 60}))

    assert error.cause == "timeout"
    assert error.detail.startswith("ran past the CPU-time limit of 1 s (cpu_s)")


def test_parser_over_its_cpu_seconds_is_killed_before_the_wall_clock(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("hang"), LIMITS.model_copy(update={"cpu_s": 1, "timeout_s": 60}))

    assert "wall-clock" not in error.detail


def test_parser_over_its_memory_allowance_fails_as_memory_limit(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("allocate"))

    assert error.cause == "memory_limit"
    assert str(256 * MiB) in error.detail


def test_parser_that_exits_fails_as_crashed_with_its_status(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("exit"))

    assert error.cause == "crashed"
    assert "status 3" in error.detail


def test_parser_that_segfaults_fails_as_crashed_with_the_signal(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("segfault"))

    assert error.cause == "crashed"
    assert "SIGSEGV" in error.detail


@pytest.mark.parametrize(
    ("behaviour", "cause", "detail"),
    [
        ("raise", "raised", "KeyError: 'the parser tripped over its own feet'"),
        ("sys_exit", "raised", "SystemExit: 0"),
        ("garbage", "protocol", "extractor returned int, not str"),
    ],
)
def test_parser_errors_arrive_typed_with_a_cause(
    pools: Callable[[Behaviour], IsolatedExtractor], behaviour: Behaviour, cause: str,
    detail: str,
) -> None:
    error = failure(pools(behaviour))

    assert (error.cause, error.detail) == (cause, detail)


def test_parser_flooding_stdout_cannot_corrupt_the_protocol(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    assert run(pools("stdout_flood")) == "after the flood"


def test_parser_cannot_open_a_network_socket(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("socket"))

    assert error.cause == "raised"
    assert "network access is disabled" in error.detail


def test_parser_cannot_write_a_file_over_the_size_limit(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    error = failure(pools("big_write"))

    # Python ignores SIGXFSZ, so RLIMIT_FSIZE surfaces as EFBIG from write().
    assert (error.cause, error.detail) == ("raised", "OSError: [Errno 27] File too large")


def test_parser_sees_only_a_scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPSA_TEST_API_KEY", "sk-test-secret")

    with IsolatedExtractor(MisbehavingExtractor("env")) as pool:
        text = run(pool)

    names = {line.split("=", 1)[0] for line in text.splitlines()}
    assert "sk-test-secret" not in text
    assert names <= SCRUBBED_ENV


def test_parser_result_over_the_text_ceiling_is_dropped_whole(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    pool = pools("huge_result")

    with pytest.raises(IngestionRejected) as caught:
        run(pool)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "extracted 2000000 characters, over the limit of 50000" in caught.value.detail


def test_parser_lone_surrogate_arrives_as_a_replacement_character(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    assert run(pools("surrogate")) == "before \ufffd after"


def sleeping_grandchildren() -> set[int]:
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if command == b"sleep\x003600\x00" and state != "Z":
                found.add(int(entry))
    return found


def test_parser_grandchild_dies_with_the_timed_out_parser(
    pools: Callable[[Behaviour], IsolatedExtractor],
) -> None:
    before = sleeping_grandchildren()

    assert failure(pools("grandchild")).cause == "timeout"

    wait_until(lambda: sleeping_grandchildren() <= before, "the grandchild is gone")


# a worker that stops answering is replaced


def test_worker_that_died_while_idle_is_replaced_before_the_next_file() -> None:
    with IsolatedExtractor(MisbehavingExtractor("echo")) as pool:
        old = pool.health["pid"]
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: is_dead(old), "the worker is dead")

        text = run(pool, b"echo:fresh")
        new = pool.health["pid"]

    assert (text, pool.restarts) == ("echo:fresh", 1)
    assert new != old


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def comm(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().strip()
    except OSError:
        return b""


def kill_worker_mid_file(pool: IsolatedExtractor) -> ExtractionFailed:
    """Send a hanging file, SIGKILL its worker once the parser child runs; return the failure."""
    worker = pool.health["pid"]
    outcome: list[ExtractionFailed] = []

    def hang() -> None:
        try:
            # a wall clock far past the kill: a slow machine must not let the
            # file time out on its own first, which is a different outcome
            run(pool, limits=LIMITS.model_copy(update={"timeout_s": 60}))
        except ExtractionFailed as error:
            outcome.append(error)

    hanging = threading.Thread(target=hang)
    hanging.start()
    # The idle spare is a child before any file arrives; only once it has taken
    # this file does it rename itself, so the kill is truly mid-file.
    wait_until(lambda: any(comm(c) == b"capsa-parse" for c in children(worker)),
               "the parse child has taken the file")
    os.kill(worker, signal.SIGKILL)
    hanging.join()
    (error,) = outcome
    return error


def test_worker_killed_during_a_file_fails_that_file_and_is_replaced() -> None:
    with IsolatedExtractor(MisbehavingExtractor("hang")) as pool:
        old = pool.health["pid"]

        error = kill_worker_mid_file(pool)
        after = run(pool, b"echo:fresh")
        new = pool.health["pid"]

    assert error.cause in {"crashed", "timeout"}
    assert "replaced" in error.detail
    assert pool.restarts == 1
    assert (after, new != old) == ("echo:fresh", True)


def test_worker_killed_during_a_file_is_always_reported_as_crashed() -> None:
    with IsolatedExtractor(MisbehavingExtractor("hang")) as pool:
        causes = [kill_worker_mid_file(pool).cause for _ in range(5)]

    assert causes == ["crashed"] * 5


@pytest.mark.slow
def test_hung_worker_is_killed_after_the_grace_period_and_replaced() -> None:
    limits = LIMITS.model_copy(update={"timeout_s": 1})
    with IsolatedExtractor(MisbehavingExtractor("echo")) as pool:
        old = pool.health["pid"]
        os.kill(old, signal.SIGSTOP)

        with pytest.raises(ExtractionFailed) as caught:
            run(pool, b"echo:never", limits)
        after = run(pool, b"echo:fresh", limits)
        new = pool.health["pid"]

    assert (caught.value.cause, pool.restarts) == ("timeout", 1)
    assert "stopped answering" in caught.value.detail
    assert (after, new != old) == ("echo:fresh", True)
    assert old not in worker_pids()


# the parent re-validates whatever a (possibly compromised) child sent

from capsa.guard.port import Parsed  # noqa: E402 - kept with the only section that uses them
from capsa.guard.sandbox import protocol  # noqa: E402
from capsa.guard.sandbox.pool import _ended  # noqa: E402
from capsa.guard.sandbox.protocol import ReplyReader, encode_reply  # noqa: E402


def reader_of(frame: bytes, limits: ExtractionLimits = LIMITS) -> ReplyReader:
    """A reader that took `frame` under the bounds `run_parsed` gives a file with `limits`."""
    reader = ReplyReader(max_text_bytes=4 * limits.max_text_chars,
                         max_blob_bytes=limits.max_uncompressed_bytes)
    reader.feed(frame)
    return reader


def raw_frame(meta: bytes, text: bytes = b"", blobs: bytes = b"") -> bytes:
    """A reply frame carrying bytes no honest child writes (invalid UTF-8, broken JSON)."""
    head = protocol._HEADER.pack(protocol._MAGIC, len(meta), len(text), len(blobs))
    return head + meta + text + blobs


def interpreted(meta: dict[str, Any], text: str = "", blobs: tuple[bytes, ...] = (),
                limits: ExtractionLimits = LIMITS) -> Parsed:
    """What the parent makes of a whole reply the child built with `encode_reply`."""
    return _interpret(reader_of(encode_reply(meta, text, blobs), limits), "f.txt", limits)


def test_interpret_normalises_text_and_replaces_invalid_utf8_from_the_child() -> None:
    frame = raw_frame(b'{"ok": true}', "a\r\nb\u202e ".encode() + b"\xff  ")

    assert _interpret(reader_of(frame), "f.txt", LIMITS).text == "a\nb \ufffd"


def test_interpret_applies_the_text_ceiling_itself() -> None:
    with pytest.raises(IngestionRejected, match="extracted 11 characters, over the limit of 10"):
        interpreted({"ok": True}, "a" * 11, limits=ExtractionLimits(max_text_chars=10))


def test_interpret_counts_the_text_ceiling_in_characters_not_bytes() -> None:
    parsed = interpreted({"ok": True}, "𝄞" * 10, limits=ExtractionLimits(max_text_chars=10))

    assert parsed.text == "𝄞" * 10


def test_interpret_turns_an_unknown_failure_cause_into_protocol() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        interpreted({"failed": {"cause": "rm -rf", "detail": "trust me"}})

    assert caught.value.cause == "protocol"
    assert caught.value.detail == "unknown failure cause 'rm -rf'"


def test_interpret_keeps_a_known_failure_cause_and_caps_its_detail() -> None:
    with pytest.raises(ExtractionFailed) as caught:
        interpreted({"failed": {"cause": "incomplete", "detail": "x" * 5000}})

    assert (caught.value.cause, len(caught.value.detail)) == ("incomplete", 2000)


def test_interpret_rebuilds_a_refusal_with_the_callers_label() -> None:
    with pytest.raises(IngestionRejected) as caught:
        interpreted({"rejected": {"reason": "forbidden_xml", "stage": "preflight",
                                  "detail": "DOCTYPE"}})

    assert (caught.value.label, caught.value.reason) == ("f.txt", "forbidden_xml")


def test_interpret_turns_a_refusal_with_an_unknown_reason_into_corrupt() -> None:
    with pytest.raises(IngestionRejected) as caught:
        interpreted({"rejected": {"reason": "trust_me", "stage": "preflight", "detail": ""}})

    assert (caught.value.reason, caught.value.stage) == ("corrupt", "parser")


@pytest.mark.parametrize("answer", [
    {}, {"ok": 42}, {"ok": 1}, {"ok": "text in the meta"}, {"rejected": "x"},
    {"failed": ["raised"]},
])
def test_interpret_refuses_an_unrecognised_answer_as_protocol(answer: dict[str, Any]) -> None:
    with pytest.raises(ExtractionFailed) as caught:
        interpreted(answer)

    assert caught.value.cause == "protocol"


@pytest.mark.parametrize("meta", [
    b"not json", b"[1]", b'{"ok": true, "notes": ' + b"[" * 900 + b"]" * 900 + b"}",
])
def test_interpret_refuses_a_meta_that_breaks_the_protocol(meta: bytes) -> None:
    with pytest.raises(ExtractionFailed) as caught:
        _interpret(reader_of(raw_frame(meta)), "f.txt", LIMITS)

    assert caught.value.cause == "protocol"
    assert "broke the protocol" in caught.value.detail


# what a child may report besides text, re-validated by the parent


def test_interpret_returns_embedded_files_cut_from_the_raw_bytes_in_listing_order() -> None:
    parsed = interpreted({"ok": True, "embedded": [
        {"name": "a.txt", "media_type": "text/plain", "size": 2},
        {"name": "empty", "media_type": None, "size": 0},
        {"name": "b.bin", "media_type": "application/octet-stream", "size": 3},
    ]}, "body", (b"hi", b"", b"\x00\xff\x01"))

    assert parsed.text == "body"
    assert [(f.name, f.media_type, f.payload) for f in parsed.embedded] == [
        ("a.txt", "text/plain", b"hi"), ("empty", None, b""),
        ("b.bin", "application/octet-stream", b"\x00\xff\x01")]


@pytest.mark.parametrize(
    ("listing", "blobs"),
    [
        ([{"name": "a", "size": 3}], (b"hi",)),
        ([{"name": "a", "size": 1}], (b"hi",)),
        ([{"name": "a", "size": 1}, {"name": "b", "size": 2}], (b"hi",)),
        ([{"name": "a", "size": -1}], ()),
        ([{"name": "a", "size": "2"}], (b"hi",)),
        ([{"name": "a", "size": True}], (b"h",)),
        ([{"name": "a", "size": 1.0}], (b"h",)),
        ([{"name": "a"}], ()),
        (["not an object"], ()),
        ([["a", 1]], (b"a",)),
        ("a.txt", ()),
        ({"name": "a", "size": 2}, (b"hi",)),
        (None, (b"bytes with no listing",)),
    ],
    ids=["over", "left-over", "sum-over", "negative", "string", "bool", "float", "no-size",
         "string-item", "list-item", "string-listing", "object-listing", "no-listing"],
)
def test_interpret_refuses_embedded_files_whose_listing_does_not_add_up_as_protocol(
    listing: object, blobs: tuple[bytes, ...],
) -> None:
    meta: dict[str, Any] = {"ok": True}
    if listing is not None:
        meta["embedded"] = listing

    with pytest.raises(ExtractionFailed) as caught:
        interpreted(meta, "body", blobs)

    assert caught.value.cause == "protocol"


def test_interpret_caps_the_number_of_embedded_files_at_max_members() -> None:
    many = [{"name": "a", "media_type": None, "size": 0}] * 3

    with pytest.raises(IngestionRejected, match="3 embedded files, over the limit of 2"):
        interpreted({"ok": True, "embedded": many}, limits=ExtractionLimits(max_members=2))


@pytest.mark.parametrize(
    ("declared", "kept"),
    [
        ("text/plain", "text/plain"),
        ("Application/PDF", "application/pdf"),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("text/plain; charset=utf-8", None),
        ("text/html\n<script>", None),
        ("text/\x1b[31mred", None),
        ("noslash", None),
        ("a/b/c", None),
        ("", None),
        (42, None),
        (None, None),
    ],
)
def test_interpret_keeps_only_a_clean_media_type_for_an_embedded_file(
    declared: object, kept: str | None,
) -> None:
    parsed = interpreted({"ok": True, "embedded": [
        {"name": "a", "media_type": declared, "size": 1}]}, blobs=(b"x",))

    assert parsed.embedded[0].media_type == kept


def test_interpret_caps_an_embedded_files_name_and_blanks_one_that_is_not_text() -> None:
    parsed = interpreted({"ok": True, "embedded": [
        {"name": "n" * 5000, "media_type": None, "size": 1},
        {"name": ["a"], "media_type": None, "size": 1}]}, blobs=(b"x", b"y"))

    assert [f.name for f in parsed.embedded] == ["n" * 1024, ""]


def test_interpret_drops_an_encoding_or_confidence_of_the_wrong_shape() -> None:
    parsed = interpreted({"ok": True, "encoding": "x" * 500, "confidence": 7})

    assert (parsed.encoding, parsed.encoding_confidence) == (None, None)


def test_interpret_keeps_a_well_formed_encoding_and_the_text_notes() -> None:
    parsed = interpreted({"ok": True, "encoding": "cp1252", "confidence": 0.5,
                          "notes": ["n", 3]})

    assert (parsed.encoding, parsed.encoding_confidence, parsed.notes) == ("cp1252", 0.5, ("n",))


def test_interpret_caps_the_number_and_length_of_notes() -> None:
    parsed = interpreted({"ok": True, "notes": ["x" * 1000] * 40})

    assert (len(parsed.notes), {len(note) for note in parsed.notes}) == (16, {300})


# how a child that ended without a whole reply is classified


def ended_as(ended: dict[str, Any], received: bytes = b"") -> ExtractionFailed:
    """The failure for a child that ended as `ended` after sending `received` of its reply."""
    return _ended(ended, reader_of(received), "f.txt", LIMITS)


@pytest.mark.parametrize(
    ("ended", "cause", "detail"),
    [
        ({"cause": "timeout", "signal": 9}, "timeout",
         "ran past the wall-clock limit of 2 s (timeout_s)"),
        ({"cause": "cpu", "signal": 9}, "timeout", "ran past the CPU-time limit of 10 s"),
        ({"cause": None, "signal": int(signal.SIGXCPU)}, "timeout",
         "ran past the CPU-time limit of 10 s"),
        ({"cause": None, "signal": 9, "out_of_memory": True}, "memory_limit",
         f"ran out of its memory allowance of {256 * MiB} bytes"),
        ({"cause": None, "signal": int(signal.SIGXFSZ)}, "crashed",
         "file-size limit reached (SIGXFSZ)"),
        ({"cause": None, "signal": 9, "out_of_memory": False}, "crashed",
         "parser process died (signal SIGKILL)"),
        ({"cause": None, "signal": int(signal.SIGSEGV)}, "crashed",
         "parser process died (signal SIGSEGV)"),
        ({"cause": None, "signal": 200}, "crashed", "parser process died (signal 200)"),
        ({"cause": None, "exit": 3}, "crashed",
         "parser process exited with status 3 and no result"),
        ({"cause": "malformed"}, "protocol", "the worker refused the request as malformed"),
    ],
    ids=["timeout", "cpu", "sigxcpu", "out-of-memory", "sigxfsz", "sigkill", "sigsegv",
         "unknown-signal", "exit", "malformed"],
)
def test_ended_names_how_a_child_without_a_reply_ended(
    ended: dict[str, Any], cause: str, detail: str,
) -> None:
    error = ended_as(ended)

    assert (error.cause, error.label) == (cause, "f.txt")
    assert error.detail.startswith(detail)


def test_ended_reports_a_reply_cut_short_by_the_childs_exit_as_protocol() -> None:
    frame = encode_reply({"ok": True}, "a long text", ())

    error = ended_as({"cause": None, "exit": 0}, frame[:30])

    assert error.cause == "protocol"
    assert error.detail == "result ended after 30 bytes, before its declared length"


@pytest.mark.parametrize(("ended", "cause"), [
    ({"cause": "timeout", "signal": 9}, "timeout"),
    ({"cause": None, "signal": int(signal.SIGSEGV)}, "crashed"),
])
def test_ended_names_a_limit_or_a_signal_before_a_partial_reply(
    ended: dict[str, Any], cause: str,
) -> None:
    assert ended_as(ended, encode_reply({"ok": True}, "text", ())[:30]).cause == cause


# ------------------------------------------------------------------ the light path


def test_plain_text_takes_the_light_path_and_starts_no_worker() -> None:
    from capsa.guard.extractors import default_router

    before = worker_pids()
    pool = IsolatedExtractor(default_router())
    try:
        text = pool.run("markdown", None, b"# notes\n\nhello", LIMITS, label="a.md")
        started = worker_pids() - before
    finally:
        pool.close()

    assert text == "# notes\n\nhello"
    assert started == set()


def test_markdown_that_may_hold_html_is_parsed_in_a_worker() -> None:
    from capsa.guard.extractors import Router

    before = worker_pids()
    pool = IsolatedExtractor(Router([PlainTextExtractor()]))
    try:
        parsed = pool.run_parsed("markdown", None, b"# notes\n\nhello <!-- hidden -->",
                                 LIMITS, label="a.md")
        started = worker_pids() - before
    finally:
        pool.close()

    assert parsed.text == "# notes\n\nhello"
    assert parsed.notes == ("left out raw HTML a rendered page does not show: "
                            "1 HTML comment(s)",)
    assert started  # the Markdown parser ran under the worker's limits


def test_markdown_the_parser_cannot_finish_in_time_is_refused_naming_the_file() -> None:
    from capsa.guard.extractors import Router

    # ~0.3 MB that markdown-it parses in about 10 s (lazy lines under a deep quote)
    slow = ("<!-- x -->\n" + ">" * 100_000 + "\n" + "a\n" * 100_000).encode()
    long_text = LIMITS.model_copy(update={"max_text_chars": 1_000_000})  # else not parsed
    with IsolatedExtractor(Router([PlainTextExtractor()])) as pool, \
            pytest.raises(ExtractionFailed) as failed:
        pool.run("markdown", None, slow, long_text, label="slow.md")

    assert (failed.value.label, failed.value.cause) == ("slow.md", "timeout")


def test_light_path_keeps_every_limit_and_reason() -> None:
    from capsa.guard.extractors import default_router

    small = LIMITS.model_copy(update={"max_text_chars": 5})
    with IsolatedExtractor(default_router()) as pool:
        with pytest.raises(IngestionRejected) as too_long:
            pool.run("text", None, b"far too long", small, label="long.txt")
        text = pool.run("text", None, b"a\x07b\r\nc", LIMITS, label="bell.txt")

    assert (too_long.value.label, too_long.value.reason) == ("long.txt", "text_too_long")
    assert text == "ab\nc"  # normalised exactly as a worker's text is


def test_light_path_can_be_turned_off_and_a_single_extractor_never_takes_it() -> None:
    from capsa.guard.extractors import default_router

    before = worker_pids()
    with IsolatedExtractor(default_router(), light_path=False) as pool:
        assert pool.run("text", None, b"hi", LIMITS, label="a.txt") == "hi"
        assert worker_pids() - before
    # a pool around one extractor was asked for isolation by name
    assert IsolatedExtractor(PlainTextExtractor())._in_process_route("text") is None


def test_warm_up_starts_every_worker_and_returns_the_first_ones_health() -> None:
    before = worker_pids()
    with IsolatedExtractor(PlainTextExtractor(), workers=2) as pool:
        health = pool.warm_up()
        started = worker_pids() - before

    assert health["ready"] is True
    assert len(started) == 2


def test_a_pool_never_closed_removes_its_scratch_when_collected() -> None:
    import gc

    pool = IsolatedExtractor(MisbehavingExtractor("env"))
    env = dict(line.split("=", 1) for line in run(pool).splitlines())
    scratch = Path(env["TMPDIR"]).parent
    assert scratch.is_dir()
    del pool
    gc.collect()
    assert not scratch.exists()


def test_a_pool_left_open_at_exit_leaves_no_scratch_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    program = (
        "import os\n"
        "from capsa.guard import IsolatedExtractor\n"
        "from capsa.guard.extractors import PlainTextExtractor\n"
        "pool = IsolatedExtractor(PlainTextExtractor())\n"
        "pool.start()\n"
        "print(pool._scratch, os.path.isdir(pool._scratch), flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=True)
    scratch, existed = done.stdout.split()
    assert existed == "True"
    assert not Path(scratch).exists()


def test_a_forked_process_leaves_its_parents_pool_scratch_alone() -> None:
    with IsolatedExtractor(PlainTextExtractor()) as pool:
        pool.start()
        scratch = pool._scratch
        assert scratch is not None
        child = os.fork()
        if child == 0:  # what a forked server worker does when it ends normally
            import atexit

            atexit._run_exitfuncs()
            os._exit(0)
        os.waitpid(child, 0)
        assert os.path.isdir(scratch)
        assert pool.extract("text", "text/plain", b"still here", max_pages=1) == "still here"
