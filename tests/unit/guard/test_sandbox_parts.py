"""The sandbox's pieces: syscall tables, the BPF program, the report, `capsa doctor`.

The attacks themselves are in `tests/hostile/test_sandbox.py`.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from capsa.errors import SandboxUnavailable
from capsa.guard import _seccomp, doctor
from capsa.guard.sandbox import LAYERS, LayerStatus, SandboxReport, _outermost, summarise

HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_seccomp_syscall_numbers_match_the_kernel_headers(arch: str) -> None:
    header = HEADERS[arch]
    if not header.exists():
        pytest.skip(f"{header} is not installed")
    numbers = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}
    table = _seccomp._ARCHES[arch][1]
    checked = {name: number for name, number in table.items() if name in numbers}
    assert checked == {name: numbers[name] for name in checked}
    assert len(checked) >= len(table) - 3  # a few are spelled differently in the generic header


def test_every_denied_syscall_has_a_number_on_every_architecture() -> None:
    for _, table in _seccomp._ARCHES.values():
        assert set(_seccomp.DENIED) <= set(table)


def test_seccomp_program_checks_the_architecture_first_and_allows_by_default() -> None:
    if not _seccomp.available():
        pytest.skip("no syscall table for this architecture")
    program = _seccomp.build_filter()
    records = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    assert records[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert records[2] == (0x06, 0, 0, 0x80000000)  # a foreign ABI kills the process
    assert records[-1] == (0x06, 0, 0, 0x7FFF0000)  # anything not denied is allowed
    assert len(records) < 256  # every jump offset fits in one byte


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


def test_doctor_exits_3_when_a_required_layer_is_missing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    weak = SandboxReport(layers={name: LayerStatus(active=name != "landlock", detail="x")
                                 for name in LAYERS})
    monkeypatch.setattr(doctor, "probe", lambda: weak)

    assert doctor.main(["--require", "seccomp"]) == 0
    assert doctor.main(["--require", "landlock"]) == doctor.EXIT_MISSING
    assert doctor.main(["--require", "all"]) == doctor.EXIT_MISSING
    out = capsys.readouterr()
    assert "[MISSING] landlock" in out.out
    assert "open: file permissions alone decide" in out.out
    assert "required but missing: landlock" in out.err


def test_doctor_reports_this_machine_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

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
