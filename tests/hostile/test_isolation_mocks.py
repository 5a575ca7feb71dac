"""SECURITY-BAR §5.5: every mock-parser misbehaviour, run through `IsolatedExtractor`.

Each test puts one misbehaving file between two good ones in a single
`extract_all` set on a real pool of zygote workers, then asserts the typed
outcome and stage, that the good neighbours came out whole, and that the next
file on the same pool succeeds (all through `run_among_good`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from capsa.guard import Attachment, Extracted, IsolatedExtractor
from capsa.guard.samples import MiB
from capsa.guard.testing import Behaviour, MisbehavingExtractor

from .conftest import (
    LIMITS,
    PoolFor,
    assert_omitted,
    good_echo,
    leftover_processes,
    run_among_good,
    sandbox_marker,
    scratch_files,
    worker_scratch,
)

GOOD = [good_echo("before.txt", "before"), good_echo("after.txt", "after")]
HOSTILE = Attachment(label="hostile.txt", media_type="text/plain", payload=b"misbehave")


@pytest.mark.parametrize(
    ("behaviour", "stage", "reason", "said"),
    [
        # a busy loop reaches the CPU-time and the wall-clock limit (both 2 s) together:
        # which one the pool sees first depends on the machine's load, either is right
        ("hang", "parser", "timeout", "limit of 2 s"),
        ("sleep", "parser", "timeout", "wall-clock limit of"),
        ("allocate", "parser", "memory_limit", "allowance"),
        ("exit", "parser", "crashed", "status 3"),
        ("segfault", "parser", "crashed", "SIGSEGV"),
        ("sys_exit", "parser", "raised", "SystemExit"),
        ("raise", "parser", "raised", "KeyError"),
        ("garbage", "parser", "protocol", "not str"),
        ("nested_reply", "parser", "protocol", "nested deeper than"),
        ("huge_result", "text", "text_too_long", "2000000 characters, over the limit"),
    ],
)
def test_misbehaving_parser_fails_typed_and_the_pool_carries_on(
        misbehaving_pool: PoolFor, behaviour: Behaviour, stage: str, reason: str,
        said: str) -> None:
    pool = misbehaving_pool(behaviour)
    restarts = pool.restarts
    outcome = run_among_good(pool, HOSTILE, good=GOOD)
    omission = assert_omitted(outcome, stage=stage, reason=reason)
    assert said in omission.detail
    assert pool.restarts == restarts  # the zygote lost only its child; it was never replaced


def test_huge_result_is_dropped_whole_never_truncated(misbehaving_pool: PoolFor) -> None:
    limits = LIMITS.model_copy(update={"max_text_chars": 1_999_999, "max_total_chars": 10**7})
    outcome = run_among_good(misbehaving_pool("huge_result"), HOSTILE, limits, good=GOOD)
    omission = assert_omitted(outcome, stage="text", reason="text_too_long")
    assert "extracted 2000000 characters" in omission.detail  # one over: dropped, not cut


def test_stdout_flood_leaves_the_protocol_intact(misbehaving_pool: PoolFor) -> None:
    outcome = run_among_good(misbehaving_pool("stdout_flood"), HOSTILE, good=GOOD)
    assert isinstance(outcome, Extracted)
    assert outcome.text == "after the flood"


def test_lone_surrogate_from_a_parser_becomes_replacement_character(
        misbehaving_pool: PoolFor) -> None:
    outcome = run_among_good(misbehaving_pool("surrogate"), HOSTILE, good=GOOD)
    assert isinstance(outcome, Extracted)
    assert outcome.text == "before \ufffd after"
    outcome.text.encode("utf-8")


def test_socket_to_localhost_is_refused_inside_the_worker(misbehaving_pool: PoolFor) -> None:
    pool = misbehaving_pool("socket")
    outcome = run_among_good(pool, HOSTILE, good=GOOD)
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert "network access is disabled" in omission.detail
    assert pool.health["network"] in {"namespace+sockets-refused", "sockets-refused"}


def test_big_file_write_stops_at_the_file_size_limit(misbehaving_pool: PoolFor) -> None:
    pool = misbehaving_pool("big_write")
    limits = LIMITS.model_copy(update={"max_file_write_bytes": 4 * MiB})
    outcome = run_among_good(pool, HOSTILE, limits, good=GOOD)
    # CPython ignores SIGXFSZ, so RLIMIT_FSIZE surfaces as EFBIG from write().
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert "File too large" in omission.detail
    # The file went into the child's own scratch directory, removed with it;
    # test_r4_file_writes_stop_at_the_limit_... measures what reached the disk.
    assert scratch_files(pool) == []
    assert not list(worker_scratch(pool).rglob("capsa-big-write"))


def test_grandchild_is_killed_with_its_parent(misbehaving_pool: PoolFor) -> None:
    pool = misbehaving_pool("grandchild")
    marker = sandbox_marker(pool)
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(pid for pid in leftover_processes(pool, marker=marker)
                        if _is_sleep(pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        outcome = run_among_good(pool, HOSTILE, good=GOOD)
    finally:
        done.set()
        watcher.join()
    assert_omitted(outcome, stage="parser", reason="timeout")
    assert seen, "the grandchild never started, so this test proved nothing"
    assert not [pid for pid in seen if Path(f"/proc/{pid}").exists() and not _is_zombie(pid)]
    assert leftover_processes(pool) == []


def test_environment_of_the_worker_holds_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-capsa-hostile-test-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + secret)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    with IsolatedExtractor(MisbehavingExtractor("env"), workers=1) as pool:
        outcome = run_among_good(pool, HOSTILE, good=GOOD)
        zygote_env = Path(f"/proc/{pool.health['pid']}/environ").read_bytes()
    assert isinstance(outcome, Extracted)
    assert "PATH=" in outcome.text  # the child really dumped its environment
    for name in ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "HTTPS_PROXY"):
        assert name not in outcome.text
        assert name.encode() not in zygote_env
    assert secret not in outcome.text
    assert secret.encode() not in zygote_env


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
    except OSError:
        return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
