"""The sandbox's pieces: syscall tables, the BPF program, the report, `capsa doctor`.

The attacks themselves are in `tests/hostile/test_sandbox.py`.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import re
import resource
import struct
from pathlib import Path
from typing import Any

import pytest

from capsa.errors import SandboxUnavailable
from capsa.guard.sandbox import LAYERS, LayerStatus, SandboxReport, doctor, seccomp
from capsa.guard.sandbox._recorded_syscalls import RECORDED
from capsa.guard.sandbox.layers import _outermost, summarise

HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}
ALLOW = 0x7FFF0000
KILL = 0x80000000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
FORBIDDEN = {"socket", "socketpair", "sendto", "sendmsg", "inotify_init", "inotify_init1",
             "fanotify_init", "setpgid", "setsid", "ptrace", "unshare", "setns", "mount", "bpf",
             "io_uring_setup", "userfaultfd"} | ({"memfd_create"} - RECORDED)
"""Calls the issue names: none may be allowed (memfd_create only if a parser was seen using it)."""


def header_numbers(arch: str) -> dict[str, int]:
    header = HEADERS[arch]
    if not header.exists():
        pytest.skip(f"{header} is not installed")
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}


# ------------------------------------------------------------------- syscall tables


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_seccomp_syscall_numbers_match_the_kernel_headers(arch: str) -> None:
    numbers = header_numbers(arch)
    table = seccomp._ARCHES[arch][1]
    checked = {name: number for name, number in table.items() if name in numbers}
    assert checked == {name: numbers[name] for name in checked}
    assert len(checked) >= len(table) - 3  # a few are spelled differently in the generic header


def test_every_listed_syscall_is_a_real_syscall_name() -> None:
    known = set().union(*(table for _, table in seccomp._ARCHES.values()))

    assert (seccomp.allowed() | seccomp.REFUSED) - known == set()


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_every_listed_syscall_that_exists_on_an_arch_has_a_number_in_its_table(
    arch: str,
) -> None:
    defined = set(header_numbers(arch))
    table = seccomp._ARCHES[arch][1]

    assert ((seccomp.allowed() | seccomp.REFUSED) & defined) - set(table) == set()


def test_allowed_and_refused_syscalls_are_disjoint() -> None:
    assert seccomp.allowed() & seccomp.REFUSED == set()


def test_allowed_contains_none_of_the_forbidden_syscalls() -> None:
    assert seccomp.allowed() & FORBIDDEN == set()


def test_every_forbidden_syscall_is_refused_with_eperm() -> None:
    unlisted = FORBIDDEN - seccomp.REFUSED  # answered ENOSYS, not EPERM

    assert unlisted <= {"memfd_create"}


# ---------------------------------------------------------------------- the program


def records(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]


@pytest.fixture(params=["x86_64", "aarch64"])
def arch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Build the filter as the named architecture would (the tables are pure data)."""
    name: str = request.param
    monkeypatch.setattr(platform, "machine", lambda: name)
    return name


def run_filter(program: bytes, arch_id: int, nr: int, *args: int) -> int:
    """What the kernel would answer: a small interpreter of the classic BPF the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch_id, 0, *(list(args) + [0] * (6 - len(args))))
    code = records(program)
    pc = accumulator = 0
    for _ in range(len(code)):
        op, jt, jf, k = code[pc]
        if op == 0x06:  # BPF_RET | BPF_K
            return k
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            (accumulator,) = struct.unpack_from("<I", data, k)
            pc += 1
            continue
        taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[op]
        pc += 1 + (jt if taken else jf)
    raise AssertionError("the program ran off its end")


def test_seccomp_program_checks_the_architecture_first(arch: str) -> None:
    arch_id = seccomp._ARCHES[arch][0]

    code = records(seccomp.build_filter())

    assert code[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert code[1] == (0x15, 1, 0, arch_id)
    assert code[2] == (0x06, 0, 0, KILL)  # a foreign ABI kills the process
    assert run_filter(seccomp.build_filter(), 0x40000003, 0) == KILL  # i386's read


def test_seccomp_program_kills_an_x32_call_on_x86_64() -> None:
    arch_id, numbers = seccomp._ARCHES["x86_64"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(platform, "machine", lambda: "x86_64")
        program = seccomp.build_filter()

    assert run_filter(program, arch_id, 0x40000000 | numbers["read"]) == KILL


def test_seccomp_program_ends_by_answering_enosys(arch: str) -> None:
    assert records(seccomp.build_filter())[-1] == (0x06, 0, 0, ENOSYS)


def test_seccomp_program_jumps_stay_inside_it_and_it_fits_the_kernels_limit(arch: str) -> None:
    code = records(seccomp.build_filter())

    assert len(code) <= 4096  # BPF_MAXINSNS
    for pc, (op, jt, jf, _) in enumerate(code):
        if op in (0x15, 0x35, 0x45):
            assert pc + 1 + max(jt, jf) < len(code)


def test_seccomp_program_answers_every_syscall_as_its_lists_say(arch: str) -> None:
    arch_id, numbers = seccomp._ARCHES[arch]
    program = seccomp.build_filter()
    expected = {name: ALLOW if name in seccomp.allowed() else
                EPERM if name in seccomp.REFUSED else ENOSYS for name in numbers}

    # every argument of a rule-bound call at 0: the caller itself, plain flags
    answered = {name: run_filter(program, arch_id, nr) for name, nr in numbers.items()}

    assert answered == expected


@pytest.mark.parametrize(
    ("name", "args", "answer"),
    [
        ("prlimit64", (0, 7), ALLOW),
        ("prlimit64", (1, 7), EPERM),
        ("prlimit64", (1 << 32, 7), ALLOW),  # a pid is an int: only its low 32 bits count
        ("setpriority", (0, 0, 5), ALLOW),
        ("setpriority", (2, 0, 5), EPERM),  # PRIO_USER
        ("setpriority", (0, 1, 5), EPERM),  # another process
        ("sched_setaffinity", (1,), EPERM),
        ("clone", (0x003D0F00,), ALLOW),  # the flags pthread_create uses
        ("clone", (0x10000000,), EPERM),  # CLONE_NEWUSER
        ("clone", (0x00020000 | 0x11,), EPERM),  # CLONE_NEWNS with SIGCHLD
        ("ioctl", (1, 0x5401), ALLOW),  # TCGETS
        ("ioctl", (1, 0x5412), EPERM),  # TIOCSTI
        ("ioctl", (1, 0x541C), EPERM),  # TIOCLINUX
        ("madvise", (0, 4096, 4), ALLOW),  # MADV_DONTNEED on its own pages
        ("madvise", (0, 4096, 12), EPERM),  # MADV_MERGEABLE
        ("fadvise64", (3, 0, 0, 2), ALLOW),  # POSIX_FADV_SEQUENTIAL
        ("fadvise64", (3, 0, 0, 4), EPERM),  # POSIX_FADV_DONTNEED: evicts shared pages
        ("fcntl", (3, 2, 1), ALLOW),  # F_SETFD
        ("fcntl", (3, 1024, 1), EPERM),  # F_SETLEASE
        ("fcntl", (3, 1026, 0), EPERM),  # F_NOTIFY
        ("fcntl", (3, (1 << 32) | 1024, 1), EPERM),  # the kernel reads an unsigned int
        ("fcntl", (3, 1025, 0), ALLOW),  # F_GETLEASE
        ("fcntl", (4, 1031, 1 << 20), EPERM),  # F_SETPIPE_SZ
        ("fcntl", (4, 1032, 0), ALLOW),  # F_GETPIPE_SZ
    ],
)
def test_seccomp_program_checks_the_arguments_of_calls_allowed_only_on_the_caller(
    arch: str, name: str, args: tuple[int, ...], answer: int,
) -> None:
    arch_id, numbers = seccomp._ARCHES[arch]

    assert run_filter(seccomp.build_filter(), arch_id, numbers[name], *args) == answer


# ------------------------------------------------------------- the filter, for real


def _syscall(libc: ctypes.CDLL, nr: int, *args: Any) -> str:
    """One raw system call: ``"ok"``, or the name of the errno it failed with."""
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *args)
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _probe_under_filter(program: bytes, numbers: dict[str, int]) -> dict[str, Any]:
    """In a forked child: install the filter, then ask the kernel directly."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    old = (ctypes.c_uint64 * 2)()
    path, attribute = ctypes.c_char_p(b"/"), ctypes.c_char_p(b"user.capsa")
    pid = os.getpid()
    long = ctypes.c_long
    seccomp.install(program, libc)
    unused_uid = 0x7FFFFFF0  # even an unfiltered PRIO_USER call would renice no one
    report: dict[str, Any] = {
        "socket(AF_UNIX)": _syscall(libc, numbers["socket"], long(1), long(1), long(0)),
        "prlimit64(1)": _syscall(libc, numbers["prlimit64"], long(1), long(7), None,
                                 ctypes.byref(old)),
        "prlimit64(0)": _syscall(libc, numbers["prlimit64"], long(0), long(7), None,
                                 ctypes.byref(old)),
        "setpriority(PRIO_PROCESS, 0)": _syscall(libc, numbers["setpriority"], long(0),
                                                 long(0), long(5)),
        "setpriority(PRIO_USER)": _syscall(libc, numbers["setpriority"], long(2),
                                           long(unused_uid), long(5)),
        "unshare(CLONE_NEWUTS)": _syscall(libc, numbers["unshare"], long(0x04000000)),
        "getxattr": _syscall(libc, numbers["getxattr"], path, attribute, None, long(0)),
        "getpid": libc.syscall(long(numbers["getpid"])) == pid,
    }
    report["nofile"] = [old[0], old[1]]
    return report


def test_seccomp_filter_refuses_and_allows_real_syscalls() -> None:
    if not seccomp.available():
        pytest.skip("no syscall table for this architecture")
    program = seccomp.build_filter()
    numbers = seccomp._ARCHES[platform.machine()][1]
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the filtered child
        status = 70
        try:
            os.close(read_fd)
            os.write(write_fd, json.dumps(_probe_under_filter(program, numbers)).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as stream:
        sent = stream.read()
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert json.loads(sent) == {
        "socket(AF_UNIX)": "EPERM",
        "prlimit64(1)": "EPERM",
        "prlimit64(0)": "ok",
        "setpriority(PRIO_PROCESS, 0)": "ok",
        "setpriority(PRIO_USER)": "EPERM",
        "unshare(CLONE_NEWUTS)": "EPERM",
        "getxattr": "ENOSYS",
        "getpid": True,
        "nofile": list(nofile),
    }


# ----------------------------------------------------------------------- the report


def test_outermost_keeps_only_roots_of_each_subtree() -> None:
    assert _outermost(["/usr/lib", "/usr", "/usrx", "/a/b/c", "/a/b"]) == ["/a/b", "/usr", "/usrx"]


def test_summarise_marks_only_active_layers_and_names_every_layer() -> None:
    report = summarise({"seccomp": "active: 57 syscalls refused",
                        "landlock": "unavailable: the kernel has no Landlock",
                        "user_namespace": "not needed: the pool runs as root"})

    assert set(report.layers) == set(LAYERS)
    assert report.is_active("seccomp") and report.is_active("user_namespace")
    assert not report.is_active("landlock")
    assert report.layers["pid_namespace"].detail == "unavailable: not attempted"


def test_summarise_caps_a_layers_detail() -> None:
    report = summarise({"seccomp": "active: " + "x" * 1000})

    assert len(report.layers["seccomp"].detail) == 300


def test_sandbox_report_lists_active_and_missing_layers_in_layer_order() -> None:
    report = SandboxReport(layers={"seccomp": LayerStatus(active=True),
                                   "landlock": LayerStatus(active=False)})

    assert report.active() == ["seccomp"]
    assert report.missing() == [name for name in LAYERS if name != "seccomp"]


# ---------------------------------------------------------------------- capsa doctor


@pytest.fixture
def weak_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose probe child got every layer but Landlock."""
    weak = SandboxReport(layers={name: LayerStatus(active=name != "landlock", detail="x")
                                 for name in LAYERS})
    monkeypatch.setattr(doctor, "probe", lambda: weak)


@pytest.mark.usefixtures("weak_machine")
def test_doctor_exits_3_when_a_required_layer_is_missing(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main(["--require", "seccomp"]) == 0
    assert doctor.main(["--require", "landlock"]) == doctor.EXIT_MISSING
    assert doctor.main(["--require", "all"]) == doctor.EXIT_MISSING
    out = capsys.readouterr()
    assert "[MISSING] landlock" in out.out
    assert "open: file permissions alone decide" in out.out
    assert "required but missing: landlock" in out.err


def test_doctor_reports_this_machine_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    status = doctor.main(["--json"])
    report = json.loads(capsys.readouterr().out)

    assert status == 0
    assert set(report["layers"]) == set(LAYERS)
    assert report["required_missing"] == []


def test_sandbox_unavailable_pickles_with_what_is_missing() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(SandboxUnavailable("no", missing=["landlock"])))

    assert (error.detail, error.missing) == ("no", ["landlock"])


def test_isolated_extractor_refuses_an_unknown_sandbox_mode() -> None:
    from capsa.guard.extractors import PlainTextExtractor
    from capsa.guard.sandbox.pool import IsolatedExtractor

    with pytest.raises(ValueError, match="sandbox must be"):
        IsolatedExtractor(PlainTextExtractor(), sandbox="lenient")  # type: ignore[arg-type]


def test_a_strict_child_refuses_to_parse_when_a_layer_failed_for_it() -> None:
    from capsa.guard.sandbox.child import _unsealed
    from capsa.guard.sandbox.layers import SandboxPolicy

    sealed = {name: "active: here" for name in LAYERS}
    missing = {**sealed, "read_only_root": "unavailable: mount_setattr: EPERM"}

    assert _unsealed(SandboxPolicy(mode="strict"), sealed) is None
    assert _unsealed(SandboxPolicy(mode="strict"), missing) == (
        "sandbox='strict' and this child lacks: read_only_root")
    assert _unsealed(SandboxPolicy(mode="best-effort"), missing) is None


def test_the_minimal_root_recreates_links_and_never_creates_beneath_a_bind(
        tmp_path: Path) -> None:
    from capsa.guard.sandbox.namespaces import _links, _point

    host, new = tmp_path / "host", tmp_path / "new"
    (host / "usr" / "lib").mkdir(parents=True)
    (host / "lib").symlink_to("usr/lib")  # as Debian's merged /usr has it
    new.mkdir()
    binds = [str(host / "usr")]
    _links(str(new), str(host / "lib"), binds)
    link = new / str(host).lstrip("/") / "lib"
    assert link.is_symlink() and os.readlink(link) == "usr/lib"
    usr = _point(str(new), str(host / "usr"), True, binds)
    assert Path(usr).is_dir() and Path(usr) == new / str(host / "usr").lstrip("/")
    # a path beneath a bind exists there as the host's: nothing is made in it (it would
    # be made on the host once the bind is mounted)
    _point(str(new), str(host / "usr" / "lib" / "python3"), True, binds)
    assert not (Path(usr) / "lib").exists()
    cache = Path(_point(str(new), str(host / "etc" / "ld.so.cache"), False, binds))
    assert cache.is_file() and cache.stat().st_size == 0
    assert oct(cache.parent.stat().st_mode & 0o777) == "0o755"


def test_the_minimal_root_is_reported_missing_without_a_mount_namespace() -> None:
    from capsa.guard.sandbox import namespaces, zygote
    from capsa.guard.sandbox.layers import SandboxPolicy

    lib = namespaces.libc()
    without = SandboxPolicy(namespaces={"mount_namespace": "unavailable: EPERM"})
    assert zygote._minimal_root(without, lib) == \
        "unavailable: the worker has no mount namespace of its own"
    assert zygote._minimal_root(SandboxPolicy(mode="off"), lib) is None
    # a strict child counts it among the layers it lacks
    assert "minimal_root" in LAYERS
