"""The parse child holds against code running inside the parser.

`hostile._attacks.AttackExtractor` plays a parser that a crafted file has
taken over: it attacks with raw libc calls through `ctypes`, and the tests
assert on what the kernel let it do, from its own report and from the
outside (the files it tried to write must not exist afterwards). After each
attack the same pool must still extract the next file with the same worker.

`make test` runs this module twice: as root (the child runs as its worker's uid)
and as an unprivileged user (the child keeps the user's uid inside a user
namespace), so both paths are proven on every run. Layers the machine lacks
are skipped by name, never silently passed: `capsa doctor` says which.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from capsa.errors import SandboxUnavailable
from capsa.guard import Attachment, ExtractionLimits, extract_attachment
from capsa.guard.sandbox.layers import CHILD_PROCESSES, LAYERS, WORKER_UID_BASE, SandboxReport
from capsa.guard.sandbox.pool import IsolatedExtractor

from ._attacks import AttackExtractor
from .conftest import probes_importable

LIMITS = ExtractionLimits(timeout_s=60, cpu_s=60)
REFUSED = ("errno=EACCES", "errno=EPERM", "errno=ENOENT", "errno=ESRCH")


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    with probes_importable(), IsolatedExtractor(AttackExtractor(), workers=1) as started:
        yield started


@pytest.fixture(scope="module")
def layers(pool: IsolatedExtractor) -> SandboxReport:
    return pool.health.sandbox


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """What the attack aims at: this process, its files, places it must not write."""
    app_dir = tmp_path_factory.mktemp("app")
    os.chmod(app_dir, 0o755)
    secret = app_dir / "secret.env"
    secret.write_text("OPENAI_API_KEY=sk-capsa-test-secret\n")
    os.chmod(secret, 0o644)  # readable by anyone: only the sandbox stands in the way
    outside_tmp = Path("/tmp") / f"capsa-attack-{uuid.uuid4().hex}"
    outside_tmp.mkdir(mode=0o777)
    os.chmod(outside_tmp, 0o777)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = app_dir / "agent.sock"
    listener.bind(str(path))
    os.chmod(path, 0o777)
    listener.listen(1)
    abstract_name = f"capsa-attack-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(1)
    ssh_dir = Path(os.path.expanduser("~")) / ".ssh"
    try:
        yield {
            "app_pid": os.getpid(),
            "secret": str(secret),
            "app_cwd": str(app_dir),
            "ssh_dir": str(ssh_dir),
            "write_into": {"site_packages": sysconfig.get_paths()["purelib"],
                           "stdlib": sysconfig.get_paths()["stdlib"],
                           "app_cwd": str(app_dir),
                           "tmp": str(outside_tmp)},
            "write_name": f"capsa-attack-{uuid.uuid4().hex}.txt",
            "unix_socket": str(path),
            "abstract_socket": abstract_name,
        }
    finally:
        listener.close()
        abstract.close()
        for leftover in outside_tmp.iterdir():
            leftover.unlink()
        outside_tmp.rmdir()


@pytest.fixture(scope="module")
def report(pool: IsolatedExtractor, targets: dict[str, object]) -> dict[str, str]:
    payload = json.dumps({**targets, "zygote_pid": pool.health["pid"]}).encode()
    text = extract_attachment(Attachment(label="attack.json", payload=payload), pool,
                              LIMITS).text
    parsed: dict[str, str] = json.loads(text)
    return parsed


def require(layers: SandboxReport, *names: str) -> None:
    missing = [name for name in names if not layers.is_active(name)]
    if missing:
        pytest.skip(f"this machine lacks {', '.join(missing)} (see `capsa doctor`)")


def test_every_layer_is_reported_with_what_it_stops(layers: SandboxReport) -> None:
    assert set(layers.layers) == set(LAYERS)
    for name, status in layers.layers.items():
        assert status.detail, name


def test_the_attack_ran_in_the_parse_child(report: dict[str, str]) -> None:
    assert report["write_scratch"] == "ok"
    assert int(report["pid"]) != os.getpid()


@pytest.mark.parametrize("who", ["app", "zygote", "init"])
@pytest.mark.parametrize("what", ["environ", "maps", "cwd", "fds", "mem"])
def test_child_cannot_read_another_process_through_proc(
        layers: SandboxReport, report: dict[str, str], who: str, what: str) -> None:
    require(layers, "landlock")
    if who == "init" and report["pid"] == "1":
        pytest.skip("the child is the init of its own PID namespace: pid 1 is itself")
    assert report[f"{who}_{what}"] in REFUSED, report[f"{who}_{what}"]


def test_child_cannot_see_the_application_at_all(layers: SandboxReport,
                                                   report: dict[str, str]) -> None:
    require(layers, "pid_namespace", "landlock")
    assert report["app_cmdline"] in REFUSED
    assert str(os.getpid()) not in report["proc_listing"].split(",")


@pytest.mark.parametrize("who", ["app", "zygote", "init"])
def test_child_cannot_ptrace_or_signal_outside_itself(
        layers: SandboxReport, report: dict[str, str], who: str) -> None:
    require(layers, "seccomp", "landlock")
    if who == "init" and report["pid"] == "1":
        pytest.skip("the child is the init of its own PID namespace: pid 1 is itself")
    assert report[f"{who}_ptrace"] in REFUSED
    assert report[f"{who}_signal0"] in REFUSED


def test_child_cannot_kill_the_zygote_or_the_application(
        layers: SandboxReport, pool: IsolatedExtractor, report: dict[str, str]) -> None:
    require(layers, "landlock")
    assert report["kill_zygote"] in REFUSED
    assert report["kill_init"] in (*REFUSED, "self")
    assert report["kill_app"] in REFUSED
    assert pool.restarts == 0


@pytest.mark.parametrize("target", ["shadow", "secret", "app_cwd_listing"])
def test_child_cannot_read_the_hosts_or_the_applications_files(
        layers: SandboxReport, report: dict[str, str], target: str) -> None:
    require(layers, "landlock")
    assert report[target] in REFUSED, report[target]
    assert "sk-capsa-test-secret" not in json.dumps(report)


def test_child_cannot_list_the_users_ssh_directory(layers: SandboxReport,
                                                   report: dict[str, str]) -> None:
    require(layers, "landlock")
    assert report["ssh_dir"] in REFUSED


@pytest.mark.parametrize("where", ["site_packages", "stdlib", "app_cwd", "tmp"])
def test_child_cannot_write_outside_its_scratch_directory(
        layers: SandboxReport, report: dict[str, str], targets: dict[str, object],
        where: str) -> None:
    require(layers, "landlock")
    directories = targets["write_into"]
    assert isinstance(directories, dict)
    refusals = ("errno=EACCES", "errno=EPERM", "errno=EROFS")
    if layers.is_active("minimal_root"):  # the application's directories are not there at all
        refusals += ("errno=ENOENT",)
    assert report[f"write_{where}"] in refusals
    assert not (Path(directories[where]) / str(targets["write_name"])).exists()


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET",
                                    "AF_VSOCK", "AF_ALG", "AF_BLUETOOTH", "AF_XDP"])
@pytest.mark.parametrize("kind", ["stream", "dgram", "raw"])
def test_child_cannot_open_a_socket_of_any_network_family(
        layers: SandboxReport, report: dict[str, str], family: str, kind: str) -> None:
    require(layers, "seccomp")
    assert report[f"socket_{family}_{kind}"].startswith("errno=")


def test_child_cannot_reach_a_unix_socket_on_disk_or_abstract(
        layers: SandboxReport, report: dict[str, str]) -> None:
    require(layers, "seccomp")
    # no socket of any family can even be made, Unix included
    assert report["unix_path_connect"].endswith("errno=EPERM")
    assert report["unix_abstract_connect"].endswith("errno=EPERM")


@pytest.mark.parametrize("attempt", ["unshare_user", "unshare_mount", "mount_tmpfs",
                                     "setuid_root"])
def test_child_cannot_gain_privileges(layers: SandboxReport, report: dict[str, str],
                                      attempt: str) -> None:
    require(layers, "seccomp", "no_new_privs")
    # EINVAL: inside a user namespace uid 0 is not even mapped
    assert report[attempt] in ("errno=EPERM", "errno=EINVAL")


def test_child_runs_unprivileged(layers: SandboxReport, report: dict[str, str]) -> None:
    require(layers, "unprivileged_uid")
    if os.geteuid() == 0:
        assert int(report["uid"]) >= WORKER_UID_BASE
    else:
        assert report["uid"] == str(os.getuid())


def test_fork_bomb_stops_at_the_process_limit(layers: SandboxReport,
                                              report: dict[str, str]) -> None:
    require(layers, "process_limit")
    assert report["fork_bomb"].startswith("stopped after "), report["fork_bomb"]
    assert int(report["fork_bomb"].split()[2].rstrip(":")) <= CHILD_PROCESSES


def test_file_descriptors_stop_at_the_limit(report: dict[str, str]) -> None:
    assert report["fds"].startswith("stopped after "), report["fds"]
    assert report["fds"].endswith("errno=EMFILE")


def test_the_next_file_on_the_same_pool_still_extracts(
        pool: IsolatedExtractor, report: dict[str, str]) -> None:
    worker = pool.health["pid"]
    text = extract_attachment(Attachment(label="next.txt", payload=b"the next file"), pool,
                              LIMITS).text
    assert text == "the next file"
    assert (pool.health["pid"], pool.restarts) == (worker, 0)


def test_strict_pool_starts_only_with_every_layer(layers: SandboxReport) -> None:
    with contextlib.ExitStack() as stack:
        if layers.missing():
            with pytest.raises(SandboxUnavailable) as refused:
                stack.enter_context(IsolatedExtractor(AttackExtractor(), sandbox="strict"))
            assert refused.value.missing == layers.missing()
        else:
            with probes_importable():
                strict = stack.enter_context(
                    IsolatedExtractor(AttackExtractor(), sandbox="strict"))
            assert strict.health.sandbox.missing() == []
