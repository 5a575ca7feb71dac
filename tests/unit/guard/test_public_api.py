"""The public surface: `__all__` lists exactly the public names, and the core stays framework-free.

After httpx's ``test_exported_members``: a name becomes public only by being
listed, and the list is kept in the order ruff's RUF022 enforces (constants,
then classes, then functions and the rest).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import capsa
import capsa.guard

SRC = Path(capsa.__file__).parent
CORE_PACKAGES = ("guard", "budget", "capsule", "shadow")
FRAMEWORKS = ("langchain", "llama_index", "capsa.langchain", "capsa.llama_index")
PARSERS = ("unstructured", "pypdf", "pdfminer", "PIL", "pytesseract", "docx", "pptx",
           "openpyxl", "lxml", "spacy")


def public_names(module: types.ModuleType, *, also: frozenset[str] = frozenset()) -> set[str]:
    return {name for name, value in vars(module).items()
            if (not name.startswith("_") or name in also)
            and not isinstance(value, types.ModuleType)}


def ruff_order(name: str) -> tuple[int, str]:
    """RUF022's isort-style order: SCREAMING_CASE, then CamelCase, then everything else."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_guard_all_lists_exactly_its_public_names() -> None:
    assert set(capsa.guard.__all__) == public_names(capsa.guard)


def test_guard_all_is_sorted() -> None:
    assert capsa.guard.__all__ == sorted(capsa.guard.__all__, key=ruff_order)


def test_guard_all_has_no_duplicates() -> None:
    assert len(capsa.guard.__all__) == len(set(capsa.guard.__all__))


def test_capsa_all_lists_exactly_its_public_names() -> None:
    assert set(capsa.__all__) == public_names(capsa, also=frozenset({"__version__"}))


def test_capsa_all_is_sorted() -> None:
    assert capsa.__all__ == sorted(capsa.__all__, key=ruff_order)


@pytest.mark.parametrize(
    "name",
    ["Attachment", "ExtractionLimits", "extract_attachment", "extract_all", "Omission",
     "ExtractionResult", "default_extractor", "IngestionRejected", "ExtractionFailed",
     "IsolatedExtractor", "TextExtractor", "safe_label", "sniff", "normalize"],
)
def test_guard_exports_the_names_the_issue_promises(name: str) -> None:
    assert name in capsa.guard.__all__


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in {
                  "import_module", "__import__", "require"}):
            found.add(node.args[0].value)
    return found


def is_framework(module: str) -> bool:
    return any(module == f or module.startswith(f"{f}.") or module.startswith(f"{f}_")
               for f in FRAMEWORKS)


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_core_package_sources_never_import_a_framework(package: str) -> None:
    root = SRC / package
    if not root.is_dir():
        pytest.skip(f"capsa.{package} is not written yet")

    offenders = {str(path.relative_to(SRC)): sorted(filter(is_framework, imported_modules(path)))
                 for path in sorted(root.rglob("*.py"))}

    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_framework_detection_catches_every_import_form(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text("import langchain_core.documents\nfrom llama_index.core import x\n"
                      "import importlib\nimportlib.import_module('langchain')\n"
                      "from capsa.langchain import CapsaLoader\nimport langgraph\n")

    assert sorted(filter(is_framework, imported_modules(source))) == [
        "capsa.langchain", "langchain", "langchain_core.documents", "llama_index.core"]


def modules_after(statements: str) -> list[str]:
    code = (f"import json, sys\n{statements}\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize(
    "statements",
    ["import capsa", "import capsa.guard",
     "import capsa.guard.extractors, capsa.guard.testing\n"
     "from capsa.guard import default_extractor\ndefault_extractor()"],
)
def test_importing_the_core_loads_no_framework(statements: str) -> None:
    assert [m for m in modules_after(statements) if is_framework(m)] == []


def test_building_the_default_pool_loads_no_parser_in_the_application_process() -> None:
    loaded = modules_after("from capsa.guard import default_extractor\n"
                           "import capsa.guard.extractors\ndefault_extractor()")

    assert [m for m in loaded if m.split(".")[0] in PARSERS] == []
