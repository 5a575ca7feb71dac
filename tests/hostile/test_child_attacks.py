"""From inside the parse child: attacks the sealed-box suites do not try yet.

`ChildAttackExtractor` extends `hostile._box_attacks.BoxAttackExtractor` with a few
more attacks, each run in the parse child a crafted file has taken over
(payload ``{"audit": NAME, ...}``); anything else goes to the box attacks as
before. Each test asserts the safe behaviour, so it fails while the hole exists.

Classes covered here and not in `test_sealed_box`, `test_redteam` or `test_sandbox`:

- **foreign system-call ABIs, end to end**: an i386 ``int 0x80`` call and an x32
  call from a real child (the unit tests only run the BPF program in an emulator);
- **the new mount API and the classic container escapes**: ``fsopen``,
  ``open_tree``, ``mount_setattr`` (clearing the read-only flag of ``/``),
  ``name_to_handle_at``/``open_by_handle_at``, ``chroot``, ``pivot_root``, ``syslog``
  (the host's kernel log), ``bpf``, ``modify_ldt``, ``iopl``/``ioperm``, ``mlockall``,
  the legacy AIO ``io_setup``;
- **prctl calls that need a privilege** (``prctl`` itself is on the allow-list);
- **the file's own cgroup**: raising its own memory or process limit, or making a
  cgroup below it, through the cgroup directories the minimal root binds in;
- **CPU after the reply**: a child that answers at once and then keeps burning CPU
  (itself and a grandchild in a session of its own) must be ended as soon as its
  answer is whole, leaving nothing running, and the next file must be served;
- **a lying reply whose refusal names no string**: a reply ``{"rejected":
  {"reason": [...]}}`` must fail that file typed, and never abort the set.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import mmap
import os
import platform
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    Omission,
    extract_all,
    extract_attachment,
)
from capsa.guard.sandbox.protocol import encode_reply, reply_frame

from . import _box_attacks as box
from ._reply_probes import ReplyProbeExtractor
from .conftest import probes_importable

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20
LIMITS = ExtractionLimits(timeout_s=20, cpu_s=10, memory_bytes=256 * MiB)
NEXT = Attachment(label="next.txt", payload=b"the next file")
_X86_64 = platform.machine() == "x86_64"


# ------------------------------------------------------------------- in the child


def _numbers() -> dict[str, int]:
    from capsa.guard.sandbox import _syscall_numbers

    return {"x86_64": _syscall_numbers.X86_64,
            "aarch64": _syscall_numbers.AARCH64}.get(platform.machine(), {})


def _raw(name: str, *args: Any) -> str:
    """The raw syscall `name` by its number on this machine: ``ok:<result>`` or the errno."""
    number = _numbers().get(name)
    if number is None:
        return "absent: no such call on this architecture"
    ctypes.set_errno(0)
    result = int(box._libc.syscall(ctypes.c_long(number), *(box._arg(a) for a in args)))
    return f"ok:{result}" if result >= 0 else box._err()


def _machine_code(code: bytes) -> Callable[[], int]:
    """`code` (x86-64) made callable: mapped writable, copied, then made executable."""
    libc = box._libc
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if page in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    ctypes.memmove(page, code, len(code))
    if libc.mprotect(ctypes.c_void_p(page), 4096, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    return ctypes.CFUNCTYPE(ctypes.c_int)(page)


def _i386_socket() -> str:
    """``socket(AF_INET, SOCK_STREAM, 0)`` through the i386 ABI (``int 0x80``, call 359)."""
    code = bytes.fromhex(
        "53"              # push rbx
        "b867010000"      # mov eax, 359 (i386 socket)
        "bb02000000"      # mov ebx, AF_INET
        "b901000000"      # mov ecx, SOCK_STREAM
        "31d2"            # xor edx, edx
        "cd80"            # int 0x80
        "5b"              # pop rbx
        "c3")             # ret
    result = _machine_code(code)()
    return f"ok:fd {result}" if result >= 0 else \
        f"errno={errno.errorcode.get(-result, -result)}"


def _i386_getpid() -> str:
    """The control: an i386 call the filter would allow on x86-64 (``getpid``, 20)."""
    code = bytes.fromhex("b814000000" "cd80" "c3")  # mov eax, 20; int 0x80; ret
    result = _machine_code(code)()
    return f"ok:{result}" if result >= 0 else f"errno={errno.errorcode.get(-result, -result)}"


def _x32_socket() -> str:
    """``socket`` with the x32 bit set in its number (``__X32_SYSCALL_BIT | 41``)."""
    ctypes.set_errno(0)
    result = int(box._libc.syscall(ctypes.c_long(0x40000000 | 41), ctypes.c_long(2),
                                   ctypes.c_long(1), ctypes.c_long(0)))
    return f"ok:fd {result}" if result >= 0 else box._err()


def _abis(args: dict[str, Any]) -> dict[str, Any]:
    if not _X86_64:
        return {"i386_socket": "absent: not x86-64", "x32_socket": "absent: not x86-64"}
    return {"i386_socket": box._contained(_i386_socket),
            "i386_getpid": box._contained(_i386_getpid),
            "x32_socket": box._contained(_x32_socket)}


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _handle_escape() -> str:
    """The classic ``open_by_handle_at`` escape: a handle for ``/``, then opened."""
    handle = ctypes.create_string_buffer(8 + 128)
    ctypes.memmove(handle, (128).to_bytes(4, "little"), 4)
    mount_id = ctypes.c_int()
    named = _raw("name_to_handle_at", -100, b"/", handle, ctypes.byref(mount_id), 0)
    if not named.startswith("ok"):
        return f"name_to_handle_at {named}"
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        return "open_by_handle_at " + _raw("open_by_handle_at", root, handle, os.O_RDONLY)
    finally:
        os.close(root)


def _kernel_log() -> str:
    buffer = ctypes.create_string_buffer(4096)
    result = _raw("syslog", 3, buffer, 4096)  # SYSLOG_ACTION_READ_ALL
    return result if not result.startswith("ok") else \
        "ok:" + buffer.raw[:120].decode("utf-8", "replace")


def _bpf_map() -> str:
    attr = ctypes.create_string_buffer(128)
    ctypes.memmove(attr, (2).to_bytes(4, "little") + (4).to_bytes(4, "little")
                   + (4).to_bytes(4, "little") + (1).to_bytes(4, "little"), 16)
    return _raw("bpf", 0, attr, 128)  # BPF_MAP_CREATE, an array of one int


def _syscalls(args: dict[str, Any]) -> dict[str, Any]:
    scratch = os.environ.get("TMPDIR") or "/tmp"
    clear_read_only = _MountAttr(0, 0x1, 0, 0)  # attr_clr = MOUNT_ATTR_RDONLY
    attempts: dict[str, Callable[[], str]] = {
        "fsopen_tmpfs": lambda: _raw("fsopen", b"tmpfs", 0),
        "open_tree_clone_root": lambda: _raw("open_tree", -100, b"/", 1),  # OPEN_TREE_CLONE
        "mount_setattr_root_writable": lambda: _raw(
            "mount_setattr", -100, b"/", 0x8000, ctypes.byref(clear_read_only),
            ctypes.sizeof(clear_read_only)),
        "open_by_handle_at": _handle_escape,
        "chroot_scratch": lambda: _raw("chroot", scratch.encode()),
        "pivot_root": lambda: _raw("pivot_root", b".", b"."),
        "syslog_read_kernel_log": _kernel_log,
        "bpf_map_create": _bpf_map,
        "mlockall": lambda: _raw("mlockall", 3),  # MCL_CURRENT | MCL_FUTURE
        "io_setup": lambda: _raw("io_setup", 8, ctypes.byref(ctypes.c_ulong(0))),
    }
    if _X86_64:
        attempts.update({
            "modify_ldt_write": lambda: _raw("modify_ldt", 1, ctypes.create_string_buffer(16),
                                             16),
            "iopl": lambda: _raw("iopl", 3),
            "ioperm": lambda: _raw("ioperm", 0x80, 1, 1),
        })
    return {name: box._contained(attempt) for name, attempt in attempts.items()}


def _prctls(args: dict[str, Any]) -> dict[str, Any]:
    """``prctl`` and ``madvise`` options: those a privilege guards, the opt-in to same-page
    merging that the filter refuses, and an ordinary ``madvise`` that must still pass."""
    libc = box._libc

    def call(*values: int) -> Callable[[], str]:
        def attempt() -> str:
            ctypes.set_errno(0)
            return box._ok(int(libc.prctl(*(ctypes.c_ulong(v) for v in values))))
        return attempt

    def advise(advice: int) -> Callable[[], str]:
        def attempt() -> str:
            region = mmap.mmap(-1, 4 * mmap.PAGESIZE)
            region.write(b"x" * len(region))
            address = ctypes.addressof(ctypes.c_char.from_buffer(region))
            ctypes.set_errno(0)
            return box._ok(int(libc.madvise(ctypes.c_void_p(address),
                                            ctypes.c_size_t(len(region)), advice)))
        return attempt

    attempts = {
        "memory_merge": call(67, 1, 0, 0, 0),          # PR_SET_MEMORY_MERGE (KSM)
        "madvise_mergeable": advise(12),               # MADV_MERGEABLE (KSM)
        "madvise_dontneed": advise(4),                 # MADV_DONTNEED: allocators need it
        "io_flusher": call(57, 1, 0, 0, 0),            # PR_SET_IO_FLUSHER
        "securebits": call(28, 0x2F, 0, 0, 0),         # PR_SET_SECUREBITS
        "ambient_raise_sys_admin": call(47, 2, 21, 0, 0),
        "keepcaps_then_setuid_0": lambda: (
            box._ok(int(libc.prctl(8, 1, 0, 0, 0))) + ";setuid " + _raw("setuid", 0)),
    }
    return {name: box._contained(attempt) for name, attempt in attempts.items()}


def _own_cgroup(args: dict[str, Any]) -> dict[str, Any]:
    """Raise this file's own memory and process limits, or make a cgroup below it.

    The worker's cgroup directories are bound into the minimal root, and each file's
    is ``<root>/file-<n>``; the child need not list them (``stat`` finds them).
    """
    report: dict[str, Any] = {"found": 0}
    names = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max",
             "pids.max", "memory.swap.max", "cgroup.procs", "cgroup.subtree_control")
    for root in args["roots"]:
        for number in range(1, 200):
            directory = f"{root}/file-{number}"
            if not os.path.isdir(directory):
                continue
            report["found"] += 1
            for name in names:
                path = f"{directory}/{name}"
                if not os.path.exists(path):
                    continue
                value = b"0" if name == "cgroup.procs" else \
                    b"+memory" if name == "cgroup.subtree_control" else b"max"
                result = box._write_existing(path, value)
                report[f"{os.path.basename(root)}:{name}"] = result
            ctypes.set_errno(0)
            made = box._libc.mkdir(f"{directory}/escape".encode(), 0o755)
            report[f"{os.path.basename(root)}:mkdir"] = box._ok(int(made))
    return report


def _reply_then_burn(args: dict[str, Any]) -> dict[str, Any]:
    """Answer at once on every channel back, then burn CPU here and in a detached
    grandchild, and never return."""
    text = str(args["text"])
    for fd in box._writable_channels():
        box._write(fd, encode_reply({"ok": True}, text, []))
        os.close(fd)
    if os.fork() == 0:
        box._sys("setsid")
        box._name(b"box-burner")
        while True:
            pass
    box._name(b"box-burner")
    while True:
        pass


_AUDITS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "abis": _abis,
    "syscalls": _syscalls,
    "prctls": _prctls,
    "own_cgroup": _own_cgroup,
    "reply_then_burn": _reply_then_burn,
}


class ChildAttackExtractor(box.BoxAttackExtractor):
    """`BoxAttackExtractor`, plus the attacks of this file (``{"audit": NAME}``)."""

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Audit, attack, or echo."""
        if payload.startswith(b'{"audit"'):
            args = json.loads(payload)
            return json.dumps(_AUDITS[args["audit"]](args))
        return super().extract(kind, media_type, payload, max_pages=max_pages)


# ------------------------------------------------------------------------- the host


@contextlib.contextmanager
def _started(extractor: Any) -> Iterator[IsolatedExtractor]:
    with probes_importable(), IsolatedExtractor(extractor, workers=1) as pool:
        yield pool


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    with _started(ChildAttackExtractor()) as started:
        yield started


@pytest.fixture
def fresh_pool() -> Iterator[IsolatedExtractor]:
    with _started(ChildAttackExtractor()) as started:
        yield started


def audit(pool: IsolatedExtractor, which: str, limits: ExtractionLimits = LIMITS,
          **args: Any) -> dict[str, Any]:
    payload = json.dumps({"audit": which, **args}).encode()
    text = extract_attachment(Attachment(label=f"{which}.json", payload=payload), pool,
                              limits).text
    report: dict[str, Any] = json.loads(text)
    return report


def refused(result: str) -> bool:
    return not result.startswith("ok")


def require(pool: IsolatedExtractor, *layers: str) -> None:
    report = pool.health.sandbox
    lacking = [f"{name} ({report.layers[name].detail})" for name in layers
               if not report.is_active(name)]
    if lacking:
        pytest.skip(f"this machine lacks {'; '.join(lacking)} (see `capsa doctor`)")


def assert_next_file_extracts(pool: IsolatedExtractor) -> None:
    assert extract_attachment(NEXT, pool, LIMITS).text == "the next file"


# ------------------------------------------------ 1. foreign ABIs from a real child


@pytest.fixture(scope="module")
def abi_report(pool: IsolatedExtractor) -> dict[str, Any]:
    if not _X86_64:
        pytest.skip("the i386 and x32 ABIs exist only on x86-64")
    return audit(pool, "abis")


@pytest.mark.parametrize("call", ["i386_socket", "i386_getpid", "x32_socket"])
def test_a_call_through_a_foreign_abi_never_runs(pool: IsolatedExtractor,
                                                 abi_report: dict[str, Any], call: str) -> None:
    # The filter's numbers are x86-64's: an i386 or x32 number means something else,
    # so any call through those ABIs must kill the caller (SIGSYS), whatever it is.
    require(pool, "seccomp")
    assert refused(abi_report[call]), abi_report
    if call != "x32_socket":  # an x32 call on a kernel without x32 may also be ENOSYS
        assert abi_report[call] == "killed:SIGSYS", abi_report


# --------------------------------- 2. the new mount API and classic container escapes


SYSCALL_ATTEMPTS = ["fsopen_tmpfs", "open_tree_clone_root", "mount_setattr_root_writable",
                    "open_by_handle_at", "chroot_scratch", "pivot_root",
                    "syslog_read_kernel_log", "bpf_map_create", "mlockall", "io_setup"]
X86_ONLY = ["modify_ldt_write", "iopl", "ioperm"]


@pytest.fixture(scope="module")
def syscall_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return audit(pool, "syscalls")


@pytest.mark.parametrize("name", SYSCALL_ATTEMPTS + X86_ONLY)
def test_kernel_surface_a_parser_never_needs_is_refused(syscall_report: dict[str, Any],
                                                        name: str) -> None:
    if name in X86_ONLY and not _X86_64:
        pytest.skip("x86-64 only")
    assert refused(syscall_report[name]), syscall_report


# ------------------------------------------------------------ 3. privileged prctl


@pytest.fixture(scope="module")
def prctl_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return audit(pool, "prctls")


@pytest.mark.parametrize("name", ["io_flusher", "securebits",
                                  "ambient_raise_sys_admin", "keepcaps_then_setuid_0"])
def test_prctl_gives_no_privilege(prctl_report: dict[str, Any], name: str) -> None:
    result = prctl_report[name]
    if name == "keepcaps_then_setuid_0":  # keepcaps alone is harmless; setuid is not
        result = result.split(";setuid ", 1)[1]
    assert refused(result), prctl_report


@pytest.mark.parametrize("name", ["memory_merge", "madvise_mergeable"])
def test_a_child_cannot_opt_into_same_page_merging(prctl_report: dict[str, Any],
                                                   name: str) -> None:
    # Merged pages answer a write more slowly: a timing channel between tenants.
    assert prctl_report[name] == "errno=EPERM", prctl_report


def test_other_memory_advice_still_passes(prctl_report: dict[str, Any]) -> None:
    assert prctl_report["madvise_dontneed"] == "ok", prctl_report


# ------------------------------------------------------------ 4. the file's own cgroup


def test_a_file_cannot_raise_its_own_cgroup_limits_or_nest_below_them(
        fresh_pool: IsolatedExtractor) -> None:
    require(fresh_pool, "cgroup")
    roots = fresh_pool.health["cgroups"]
    assert roots, fresh_pool.health
    report = audit(fresh_pool, "own_cgroup", roots=roots)
    written = {key: value for key, value in report.items()
               if key != "found" and not refused(value)}
    assert written == {}, report
    assert_next_file_extracts(fresh_pool)


# ---------------------------------------------------------- 5. CPU after the reply


def test_a_child_that_answers_then_burns_cpu_delays_no_one_and_leaves_nothing(
        fresh_pool: IsolatedExtractor) -> None:
    from .test_sealed_box import lingering

    limits = LIMITS.model_copy(update={"timeout_s": 30, "cpu_s": 30})
    payload = json.dumps({"audit": "reply_then_burn", "text": "an early answer"}).encode()
    text = extract_attachment(Attachment(label="burn.json", payload=payload), fresh_pool,
                              limits).text
    assert text == "an early answer"
    # The burner and its grandchild are ended when the answer is whole: nothing is left
    # below the zygote now, long before the 30 s limits would have ended them.
    assert lingering(fresh_pool) == {}
    assert extract_attachment(NEXT, fresh_pool, limits).text == "the next file"
    assert fresh_pool.restarts == 0


# ------------------------------------------------------ 6. a lying refusal, typed


@pytest.fixture(scope="module")
def reply_pool() -> Iterator[IsolatedExtractor]:
    with _started(ReplyProbeExtractor()) as started:
        yield started


def _raw_reply(meta: dict[str, Any]) -> Attachment:
    frame = reply_frame(json.dumps(meta).encode(), b"", b"")
    payload = json.dumps({"probe": "raw", "frame": frame.hex()}).encode()
    return Attachment(label="liar.json", payload=payload)


LYING_REFUSALS: dict[str, dict[str, Any]] = {
    "reason_list": {"rejected": {"reason": ["corrupt"], "stage": "parser", "detail": "x"}},
    "reason_object": {"rejected": {"reason": {"a": 1}, "stage": "parser", "detail": "x"}},
    "stage_list": {"rejected": {"reason": "corrupt", "stage": [], "detail": "x"}},
}


@pytest.mark.parametrize("shape", sorted(LYING_REFUSALS))
def test_a_refusal_whose_reason_is_not_a_string_fails_only_that_file_typed(
        reply_pool: IsolatedExtractor, shape: str) -> None:
    liar = _raw_reply(LYING_REFUSALS[shape])
    with pytest.raises((ExtractionFailed, IngestionRejected)):
        extract_attachment(liar, reply_pool, LIMITS)
    good = [Attachment(label=f"good-{n}.txt", payload=f"good file {n}".encode())
            for n in range(2)]
    result = extract_all([good[0], liar, good[1]], reply_pool, LIMITS)
    assert [e.text for e in result.extracted if isinstance(e, Extracted)] == \
        ["good file 0", "good file 1"]
    (omitted,) = result.omitted
    assert isinstance(omitted, Omission) and omitted.label == "liar.json"
    assert reply_pool.restarts == 0
    assert extract_attachment(NEXT, reply_pool, LIMITS).text == "the next file"

