"""A red team's findings: what a parser taken over by a crafted file could still do.

Each test names one attack that `test_sandbox` and `test_sealed_box` do not
try. Attacks run in the parse child through `hostile._box_attacks`
(``clone3_namespaces``, ``read_paths``); the policy finding is checked on the
function that builds the policy, because showing it end to end needs an
interpreter whose site-packages the test would have to change.

Run as root and as ``nobody`` like the other sandbox suites::

    python scripts/as_unprivileged.py -- pytest -q -p no:cacheprovider \\
        tests/hostile/test_redteam.py

The worker is started as ``python -I``, so it imports capsa from the
interpreter's site-packages, never from ``PYTHONPATH``: run from a worktree,
these tests exercise the worktree's sandbox only with an interpreter whose
site-packages put that worktree's ``src`` first.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capsa.guard import IsolatedExtractor
from capsa.guard.sandbox import layers, namespaces, seccomp

from .test_sealed_box import attack, refused, require, started_pool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
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
