"""A red team's findings: what a parser taken over by a crafted file could still do.

Each test names one attack that `test_sandbox` and `test_sealed_box` do not
try. Attacks run in the parse child through `hostile._box_attacks`
(``clone3_namespaces``, ``read_paths``, ``identity``, ``inheritance``,
``pending_signals``, ``hoard``, ``layout``); a policy finding is also checked
on the function that builds the policy, because showing every case end to end
needs an interpreter whose site-packages the test would have to change.

The second round asks four questions of a child: what it **inherits** (its
descriptors, shared pages, threads' filters, the application's environment and
limits), what it can **use up** while it lives (queued signals, kernel objects,
pipe buffers), what it can **reach** (the interpreter's prefix, devices, the
host's state) and what it learns that outlives it (the worker's layout).

Run as root and as ``nobody`` like the other sandbox suites::

    python scripts/as_unprivileged.py -- pytest -q -p no:cacheprovider \\
        tests/hostile/test_redteam.py

The worker is started as ``python -I``, so it imports capsa from the
interpreter's site-packages, never from ``PYTHONPATH``: run from a worktree,
these tests exercise the worktree's sandbox only with an interpreter whose
site-packages put that worktree's ``src`` first.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capsa.errors import ExtractionFailed
from capsa.guard import Attachment, IsolatedExtractor, extract_attachment
from capsa.guard.sandbox import layers, namespaces, seccomp

from .test_sealed_box import (
    LIMITS,
    MiB,
    assert_next_file_extracts,
    attack,
    attempt,
    lingering,
    refused,
    require,
    started_pool,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    with started_pool() as started:
        yield started


@pytest.fixture
def fresh_pool() -> Iterator[IsolatedExtractor]:
    """For an attack that may leave something behind or break its worker."""
    with started_pool() as started:
        yield started


# ------------------------------------------------- 1. namespaces through clone3


@pytest.fixture(scope="module")
def clone3_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return attack(pool, "clone3_namespaces")


@pytest.mark.parametrize("attempt", ["clone_user", "clone3_user", "clone3_mount", "clone3_net",
                                     "clone3_pid", "clone3_ipc", "clone3_uts", "clone3_cgroup",
                                     "clone3_user_and_every_namespace"])
def test_no_clone_call_makes_a_namespace(pool: IsolatedExtractor,
                                         clone3_report: dict[str, Any], attempt: str) -> None:
    # clone3 takes its flags in a struct the seccomp filter cannot read; allowed,
    # it hands the child a user namespace in which it holds every capability,
    # which the legacy clone with the same flag (the control) is refused.
    require(pool, "seccomp")
    assert refused(clone3_report[attempt]), clone3_report


def test_threads_and_subprocesses_still_start_without_clone3(
        pool: IsolatedExtractor, clone3_report: dict[str, Any]) -> None:
    # glibc tries clone3 first and falls back to clone on ENOSYS (never on EPERM)
    assert clone3_report["thread"] == "ok", clone3_report
    assert clone3_report["subprocess"] == "exit 0", clone3_report
    if pool.health.sandbox.is_active("seccomp"):
        assert clone3_report["clone3_plain"] == "errno=ENOSYS", clone3_report


@pytest.mark.parametrize("unix_listen", [False, True], ids=["filter", "libreoffice_filter"])
def test_both_filters_answer_clone3_enosys(unix_listen: bool) -> None:
    # on a machine without seccomp the end-to-end tests above cannot show it
    assert "clone3" not in seccomp.allowed(unix_listen=unix_listen)
    assert "clone" in seccomp.allowed(unix_listen=unix_listen)


# ------------------------------------------------ 2. paths that lead elsewhere


@pytest.fixture(scope="module")
def planted() -> Iterator[dict[str, str]]:
    """A secret in the application's temporary directory, one in /dev/shm, and a module
    in a directory the application puts on its own `sys.path` (as a script's directory
    is), which the pool hands the worker after the sandbox is built."""
    secret = f"redteam-{secrets.token_hex(8)}"
    directory = Path(tempfile.mkdtemp(prefix="capsa-redteam-"))
    directory.chmod(0o755)
    app_file = directory / "settings.env"
    app_file.write_text(f"OPENAI_API_KEY={secret}\n")
    app_file.chmod(0o644)
    shm = Path(f"/dev/shm/capsa-redteam-{secrets.token_hex(6)}")
    shm.write_text(secret)
    shm.chmod(0o644)
    module = directory / "app_module.py"
    module.write_text(f"TOKEN = {secret!r}\n")
    module.chmod(0o644)
    sys.path.append(str(directory))
    try:
        yield {"secret": secret, "app_file": str(app_file), "shm": str(shm),
               "module": str(module)}
    finally:
        sys.path.remove(str(directory))
        shm.unlink()
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()


@pytest.fixture(scope="module")
def path_report(planted: dict[str, str]) -> dict[str, Any]:
    """What a child reads through magic links, /dev/shm and the application's sys.path."""
    paths = {
        "via_proc_self_root": "/proc/self/root" + planted["app_file"],
        "via_proc_self_cwd": "/proc/self/cwd/" + planted["app_file"].lstrip("/"),
        "via_proc_1_root": "/proc/1/root" + planted["app_file"],
        "etc_shadow_via_proc_self_root": "/proc/self/root/etc/shadow",
        "dev_shm": planted["shm"],
        "module_on_the_applications_sys_path": planted["module"],
    }
    with started_pool() as pool:  # started with the module's directory on sys.path
        report = attack(pool, "read_paths", paths=list(paths.values()))
        landlock = pool.health.sandbox.is_active("landlock")
    if not landlock:
        pytest.skip("this machine lacks landlock (see `capsa doctor`)")
    return {name: report[path] for name, path in paths.items()}


@pytest.mark.parametrize("route", ["via_proc_self_root", "via_proc_self_cwd", "via_proc_1_root",
                                   "etc_shadow_via_proc_self_root", "dev_shm",
                                   "module_on_the_applications_sys_path"])
def test_child_reads_no_host_file_by_a_roundabout_path(
        path_report: dict[str, Any], planted: dict[str, str], route: str) -> None:
    assert refused(path_report[route]), path_report
    assert planted["secret"] not in path_report[route]


# -------------------------------------- 3. what the sandbox lets a child read at all


def _beneath(path: Path, roots: list[str]) -> bool:
    return any(str(path) == root or str(path).startswith(root.rstrip("/") + "/")
               for root in roots)


@pytest.fixture
def editable_project(tmp_path: Path) -> Path:
    """An application installed editable from a flat layout: its package sits at the
    project root, beside its secrets (hatchling, Poetry, PDM and ``setup.py develop``
    all put that root on ``sys.path`` through a ``.pth`` file)."""
    project = tmp_path / "app-project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "views.py").write_text("")
    (project / "top_level_module.py").write_text("")
    (project / ".env").write_text("OPENAI_API_KEY=sk-redteam\n")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text('[remote "origin"]\n  url = https://token@x\n')
    (project / "config").mkdir()
    (project / "config" / "production.yaml").write_text("db_password: hunter2\n")
    (project / "secrets.toml").write_text("token = 'x'\n")
    return project


def test_an_editable_projects_root_is_not_readable_beyond_what_imports(
        editable_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child reads only what imports from a sys.path entry outside the interpreter:
    # for an editable flat-layout install that entry is the project root, .env and
    # .git included.
    monkeypatch.setattr(sys, "path", [*sys.path, str(editable_project)])
    roots = layers.interpreter_roots()
    assert _beneath(editable_project / "app" / "views.py", roots)  # still importable
    assert _beneath(editable_project / "top_level_module.py", roots)
    readable = [name for name in (".env", ".git/config", "config/production.yaml",
                                  "secrets.toml") if _beneath(editable_project / name, roots)]
    assert readable == [], f"a parse child may read {readable} under {editable_project}"



def test_tessdata_prefix_opens_only_a_directory_of_models(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # TESSDATA_PREFIX comes from the host's environment: "/" must not become a read root
    monkeypatch.setenv("TESSDATA_PREFIX", "/")
    assert "/" not in layers.data_roots()
    models = tmp_path / "share" / "tessdata"
    models.mkdir(parents=True)
    (models / "eng.traineddata").write_bytes(b"model")
    (tmp_path / "share" / "secret.txt").write_text("x")
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path / "share"))
    roots = layers.data_roots()
    assert _beneath(models / "eng.traineddata", roots)
    assert not _beneath(tmp_path / "share" / "secret.txt", roots)


# ----------------------------------------------------------- 4. the machine's name


@pytest.fixture(scope="module")
def identity_report(pool: IsolatedExtractor) -> dict[str, Any]:
    return attack(pool, "identity")


def test_child_does_not_learn_the_machines_name(pool: IsolatedExtractor,
                                                identity_report: dict[str, Any]) -> None:
    # A host's name is often its tenant's or its pod's; uname and /proc answer it
    # to anyone unless the worker has a UTS namespace of its own.
    require(pool, "network_namespace")
    host = os.uname().nodename
    assert host != namespaces.HOST_NAME.decode()  # else this test shows nothing
    assert identity_report["nodename"] == namespaces.HOST_NAME.decode(), identity_report
    assert host not in identity_report["proc_hostname"], identity_report
    assert host not in identity_report["etc_hostname"], identity_report


def test_child_cannot_rename_the_machine(pool: IsolatedExtractor,
                                         identity_report: dict[str, Any]) -> None:
    assert refused(identity_report["sethostname"]), identity_report
    assert os.uname().nodename != "renamed-by-a-parser"
    assert attack(pool, "identity")["nodename"] == namespaces.HOST_NAME.decode()


# ------------------------------------------- 5. what a child inherits when it starts


@pytest.fixture(scope="module")
def inherited() -> Iterator[dict[str, Any]]:
    """A child's inheritance, from a pool started while the application's environment
    holds a marker (a secret it would hold in a variable), and that child's memory scan."""
    name, prefix = "CAPSA_REDTEAM_SECRET", f"env{secrets.token_hex(4)}q"
    marker = prefix + secrets.token_hex(16)
    os.environ[name] = marker
    try:
        with started_pool() as pool:
            report = attack(pool, "inheritance")
            report["scan"] = attack(pool, "scan_self", prefix_parts=[prefix[:4], prefix[4:]])
            report["seccomp_active"] = pool.health.sandbox.is_active("seccomp")
    finally:
        del os.environ[name]
    report["marker"] = marker
    return report


def test_child_holds_no_descriptor_but_null_and_its_reply(inherited: dict[str, Any]) -> None:
    # the zygote's control socket, its spare's, the request pipe once read: none of them
    held = inherited["descriptors"]
    others = [d for d in held if d[1] != "device:/dev/null" and not
              (d[1].startswith("fifo:") and d[2] == "w")]
    assert others == [], held
    assert len([d for d in held if d[1].startswith("fifo:")]) == 1, held


def test_child_shares_no_writable_memory_with_the_zygote(inherited: dict[str, Any]) -> None:
    # a shared writable page would be the zygote's and every later child's too
    assert inherited["shared_writable"] == [], inherited["shared_writable"]


def test_every_thread_of_the_child_is_filtered(inherited: dict[str, Any]) -> None:
    if not inherited["seccomp_active"]:
        pytest.skip("this machine lacks seccomp (see `capsa doctor`)")
    threads = inherited["threads"]
    assert threads and all(t == {"Seccomp": "2", "NoNewPrivs": "1"} for t in threads.values()), \
        threads


def test_child_finds_nothing_of_the_applications_environment(
        inherited: dict[str, Any]) -> None:
    assert inherited["scan"]["scanned"] > 1024 * 1024, inherited["scan"]
    assert inherited["marker"] not in inherited["scan"]["found"], inherited["scan"]
    assert inherited["marker"] not in inherited["environ"], inherited["environ"]


@pytest.mark.parametrize(("limit", "most"), [("RLIMIT_RTPRIO", 0), ("RLIMIT_NICE", 0),
                                             ("RLIMIT_SIGPENDING", 64),
                                             ("RLIMIT_MSGQUEUE", 0)])
def test_limits_an_application_may_have_raised_are_not_inherited(
        inherited: dict[str, Any], limit: str, most: int) -> None:
    # Real-time and raised priority (an audio-group desktop user often has both), and
    # room in per-user counts that a pool that is not root shares with the application.
    soft, hard = inherited["rlimits"][limit]
    assert 0 <= soft <= hard <= most, inherited["rlimits"]


@pytest.mark.parametrize("attempt", ["realtime_priority", "raised_priority", "prctl_set_mm",
                                     "prctl_cap_ambient_raise"])
def test_child_cannot_raise_its_priority_or_privileges(inherited: dict[str, Any],
                                                       attempt: str) -> None:
    assert refused(inherited[attempt]), inherited[attempt]


def test_address_layout_is_the_workers_as_documented(pool: IsolatedExtractor) -> None:
    # Children are forks of their zygote: an address one file leaks holds for the next
    # file on that worker (docs/threat-model.md, "What remains"); a new worker draws anew.
    first, second = attack(pool, "layout"), attack(pool, "layout")
    assert first == second
    with started_pool() as other:
        assert attack(other, "layout") != first


# ------------------------------------------------- 6. what a child can use up meanwhile


def test_child_queues_a_few_signals_not_its_users_whole_allowance(
        pool: IsolatedExtractor) -> None:
    # The count is per user: a pool that is not root runs the child as the application's
    # uid, so a child that queued its users's whole allowance (96 363 here) left the
    # application's sigqueue and timer_create failing with EAGAIN while it lived.
    report = attack(pool, "pending_signals", attempts=5000)
    assert report["queued"] <= 64 and report["limit"] <= 64, report


def test_kernel_objects_a_file_hoards_go_with_it(fresh_pool: IsolatedExtractor) -> None:
    # pipes, eventfds, armed timerfds and epoll instances in every process the limits
    # allow, then threads, all held until the file ends
    report = attack(fresh_pool, "hoard", processes=200)
    assert report["processes"] > 10 and report["pipes"] > 100, report
    assert report["stopped"] == "fork errno=EAGAIN", report
    assert_next_file_extracts(fresh_pool)
    assert fresh_pool.restarts == 0
    assert lingering(fresh_pool) == {}


def test_bytes_a_file_leaves_in_pipes_count_as_its_memory(
        fresh_pool: IsolatedExtractor) -> None:
    # a pipe's buffer is kernel memory no process maps: filled in every process the
    # limits allow, they hold far more than the file's 64 MiB
    require(fresh_pool, "cgroup")
    limits = LIMITS.model_copy(update={"memory_bytes": 64 * MiB})
    outcome = attempt(fresh_pool, "hoard", limits, processes=200, fill=1 << 20)
    if isinstance(outcome, ExtractionFailed):
        assert outcome.cause == "memory_limit", outcome
    else:
        assert outcome["pipe_bytes"] <= 80 * MiB, outcome
    assert_next_file_extracts(fresh_pool)
    assert fresh_pool.restarts == 0


def test_an_answer_meant_for_the_next_file_never_reaches_it(
        fresh_pool: IsolatedExtractor) -> None:
    # Each file has pipes of its own, read up to one whole frame: a child that answers
    # twice lies only about its own file, and the next file reads its own answer.
    payload = json.dumps({"attack": "reply_twice",
                          "texts": ["this file's answer", "the next file's forged answer"]})
    text = extract_attachment(Attachment(label="reply_twice.json", payload=payload.encode()),
                              fresh_pool, LIMITS).text
    assert text == "this file's answer"
    assert_next_file_extracts(fresh_pool)
    assert fresh_pool.restarts == 0


# -------------------------------------------------- 7. what a child can reach on disk


@pytest.fixture(scope="module")
def landlocked(pool: IsolatedExtractor) -> IsolatedExtractor:
    require(pool, "landlock")
    return pool


def test_child_reads_no_file_at_the_top_of_the_interpreters_prefix(
        landlocked: IsolatedExtractor) -> None:
    # pip reads a site-wide pip.conf from the prefix (its index URL often carries a
    # token), conda a .condarc; a virtual environment's pyvenv.cfg sits beside them
    tops = [entry.path for prefix in layers.installation_prefixes()
            for entry in os.scandir(prefix) if entry.is_file()]
    if not tops:
        pytest.skip("this interpreter's prefixes hold no file at their top")
    report = attack(landlocked, "read_paths", paths=tops)
    assert [path for path in tops if not refused(report[path])] == [], report


def test_read_roots_open_a_prefix_to_its_directories(tmp_path: Path) -> None:
    # a prefix beneath a system root (the official image's /usr/local under /usr)
    system = tmp_path / "usr"
    prefix = system / "local"
    for directory in (system / "lib", prefix / "lib" / "python3.12", prefix / "bin",
                      prefix / "etc" / "fonts", prefix / ".cache"):
        directory.mkdir(parents=True)
    for name in ("pip.conf", ".condarc", "pyvenv.cfg"):
        (prefix / name).write_text("index-url = https://user:token@example.invalid/simple\n")
    (system / "README").write_text("")
    roots = layers._opened([str(system), str(tmp_path / "elsewhere")], [str(prefix)])
    for readable in (system / "lib", prefix / "lib" / "python3.12", prefix / "bin",
                     prefix / "etc" / "fonts", tmp_path / "elsewhere"):
        assert _beneath(readable, roots), roots
    for hidden in ("pip.conf", ".condarc", "pyvenv.cfg", ".cache"):
        assert not _beneath(prefix / hidden, roots), roots
    assert not _beneath(system / "README", roots)


DEVICES_AND_HOST_STATE = [
    "/dev/tty", "/dev/console", "/dev/kmsg", "/dev/mem", "/dev/port", "/dev/fuse", "/dev/ptmx",
    "/dev/pts/ptmx", "/dev/net/tun", "/dev/kvm", "/dev/loop-control", "/dev/vsock",
    "/dev/userfaultfd", "/dev/hwrng", "/dev/full", "/dev/shm", "/proc/kcore", "/proc/kmsg",
    "/proc/kallsyms", "/proc/keys", "/proc/cmdline", "/proc/meminfo", "/proc/uptime",
    "/proc/sys/kernel/random/boot_id", "/proc/sys/kernel/ns_last_pid", "/proc/sysvipc/shm",
    "/sys/class/net", "/sys/fs/cgroup", "/sys/kernel/security", "/sys/firmware",
    "/sys/class/dmi/id/product_uuid", "/etc/machine-id", "/var/lib/dbus/machine-id",
    "/etc/passwd", "/etc/hosts", "/etc/resolv.conf",
]


@pytest.fixture(scope="module")
def host_state_report(landlocked: IsolatedExtractor) -> dict[str, Any]:
    return attack(landlocked, "read_paths", paths=DEVICES_AND_HOST_STATE, nonblocking=True)


@pytest.mark.parametrize("path", DEVICES_AND_HOST_STATE)
def test_child_opens_no_device_and_no_state_of_the_host(host_state_report: dict[str, Any],
                                                        path: str) -> None:
    # a terminal to type into, the kernel's log and memory, FUSE, tun, KVM, and what
    # names the machine (boot id, machine id, DMI uuid) or its network
    assert refused(host_state_report[path]), host_state_report[path]


# ------------------------------------ 8. what a child learns of paths it cannot read


def _worker_read_roots() -> list[str]:
    """The read roots a worker computes: in a ``python -I`` interpreter, as the pool starts it."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-I", "-c",
         "import json; from capsa.guard.sandbox import layers; "
         "print(json.dumps(layers.read_roots()))"],
        check=True, capture_output=True, text=True, env={
            k: v for k, v in os.environ.items() if k == "TESSDATA_PREFIX"}).stdout
    roots: list[str] = json.loads(out)
    return roots


@pytest.fixture(scope="module")
def unseen() -> Iterator[dict[str, str]]:
    """Paths a child may not read, that exist on the host: the application's secrets,
    its working directory and a guessed file in it, and a file in a temporary directory."""
    directory = Path(tempfile.mkdtemp(prefix="capsa-unseen-"))
    directory.chmod(0o755)
    planted = directory / "planted.txt"
    planted.write_text("exists")
    planted.chmod(0o644)
    cwd = Path.cwd()
    guessed = next((cwd / name for name in ("pyproject.toml", "setup.py", ".env", "README.md")
                    if (cwd / name).exists()), cwd)
    try:
        yield {"shadow": "/etc/shadow", "root": "/root", "root_profile": "/root/.bashrc",
               "home": "/home", "cwd": str(cwd),
               "guessed_in_cwd": str(guessed), "temp_dir": str(directory),
               "planted_in_temp": str(planted), "passwd": "/etc/passwd",
               "docker_hosts": "/etc/hosts"}
    finally:
        planted.unlink()
        directory.rmdir()


@pytest.fixture(scope="module")
def stat_report(pool: IsolatedExtractor, unseen: dict[str, str]) -> dict[str, Any]:
    require(pool, "minimal_root")
    return attack(pool, "stat_paths", paths=list(unseen.values()))


@pytest.mark.parametrize("name", ["shadow", "root_profile", "home", "guessed_in_cwd", "temp_dir",
                                  "planted_in_temp", "passwd", "docker_hosts"])
@pytest.mark.parametrize("call", ["stat", "access", "readlink"])
def test_a_path_the_child_cannot_read_does_not_exist_for_it(
        stat_report: dict[str, Any], unseen: dict[str, str], name: str, call: str) -> None:
    # Landlock governs open, not stat, access or readlink: on the host's root a child
    # learns whether any path exists, with its size, times and owner (/etc/shadow's size,
    # a guessed file in the application's directory). In the minimal root it is not there.
    assert stat_report[unseen[name]][call] == "errno=ENOENT", stat_report[unseen[name]]


@pytest.mark.parametrize("name", ["cwd", "root"])
def test_a_directory_on_the_way_to_a_read_root_is_only_a_step_of_the_minimal_root(
        stat_report: dict[str, Any], unseen: dict[str, str], name: str) -> None:
    # An editable install imports capsa from beneath the working directory, and a pyenv
    # Python lives beneath /root: then the directory exists, but as an empty step of the
    # minimal root (its device, its times), never the host's directory.
    path = unseen[name]
    seen = stat_report[path]["stat"]
    if seen != "errno=ENOENT":
        assert f"dev={stat_report['root_dev']} " in seen, seen
        assert any(root.startswith(path + "/") for root in _worker_read_roots())


def test_mountinfo_lists_only_the_minimal_roots_mounts(pool: IsolatedExtractor,
                                                       stat_report: dict[str, Any]) -> None:
    # on the host's root, /proc/self/mountinfo names every mount point of the machine
    points = stat_report["mountinfo"]
    assert isinstance(points, list), points
    assert "/" in points
    read = [os.path.realpath(r) for r in _worker_read_roots()] + _worker_read_roots()
    cgroups = {"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
               "/sys/fs/cgroup/cpuacct"}
    exact = {"/", "/proc", pool._all[0].scratch, *cgroups}
    stray = [p for p in points if p not in exact and not _beneath(Path(p), read)]
    assert stray == [], points


def test_mountinfo_names_neither_the_applications_cgroup_nor_the_worker(
        pool: IsolatedExtractor, stat_report: dict[str, Any]) -> None:
    # The worker's cgroup lives under the application's own (on a systemd or Kubernetes
    # host, a path naming its service or pod); the child sees it at the hierarchy's
    # usual mount point instead.
    points = stat_report["mountinfo"]
    assert isinstance(points, list), points
    host_paths = pool._all[0].cgroups  # what the application removes when the worker ends
    if not host_paths:
        pytest.skip("this machine gives the worker no cgroup (see `capsa doctor`)")
    assert all(os.path.basename(p).startswith("capsa-worker-") and os.path.isdir(p)
               for p in host_paths), host_paths
    assert not set(host_paths) & set(points), points
    assert not [p for p in points if re.search(r"capsa-worker-\d", p)], points
