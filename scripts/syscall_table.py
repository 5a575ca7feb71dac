"""Generate ``src/capsa/guard/sandbox/_syscall_numbers.py`` from the kernel headers.

The seccomp allow-list names syscalls; the BPF program compares numbers. This
script writes every syscall name and number for the two architectures the
sandbox supports, so no number is ever typed by hand:

- x86-64 from ``/usr/include/x86_64-linux-gnu/asm/unistd_64.h``: one
  ``#define __NR_name number`` a line.
- AArch64 from ``/usr/include/asm-generic/unistd.h`` (arm64 has no table of
  its own). That header is written for every architecture that uses it, so
  its ``#if`` blocks are evaluated here as the arm64 kernel evaluates them:
  64-bit longs, no ``__SYSCALL_COMPAT``, and the ``__ARCH_WANT_*`` switches of
  ``arch/arm64/include/uapi/asm/unistd.h``. The ``__NR3264_*`` numbers are
  resolved to their 64-bit names (``__NR3264_fstatat`` is ``newfstatat``,
  ``__NR3264_mmap`` is ``mmap``), never to the 32-bit ones (``fcntl64``,
  ``mmap2``).

Usage: python scripts/syscall_table.py [--check] [--x86-64 HEADER] [--generic HEADER]

``--check`` writes nothing and exits 1 if the module is out of date.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

X86_64_HEADER = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
GENERIC_HEADER = "/usr/include/asm-generic/unistd.h"
OUTPUT = Path(__file__).resolve().parent.parent / "src/capsa/guard/sandbox/_syscall_numbers.py"

# arch/arm64/include/uapi/asm/unistd.h, before it includes asm-generic/unistd.h.
_ARM64_MACROS: dict[str, int] = {
    "__BITS_PER_LONG": 64,
    "__ARCH_WANT_RENAMEAT": 1,
    "__ARCH_WANT_NEW_STAT": 1,
    "__ARCH_WANT_SET_GET_RLIMIT": 1,
    "__ARCH_WANT_TIME32_SYSCALLS": 1,
    "__ARCH_WANT_SYS_CLONE3": 1,
    "__ARCH_WANT_MEMFD_SECRET": 1,
}
_NOT_SYSCALLS = frozenset({"syscalls", "arch_specific_syscall"})
"""``__NR_`` macros that are not syscalls: the table's length, and the first number
of the block an architecture may fill with its own calls (arm64 leaves it empty)."""

_DEFINE = re.compile(r"#define\s+(__NR(?:3264)?_\w+)\s+(\w+)\s*$")
_DIRECTIVE = re.compile(r"#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)$")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return text.replace("\\\n", " ")


def _evaluate(condition: str, macros: dict[str, int]) -> bool:
    """A preprocessor condition of the shapes the header uses: defined(), ==, !=, ||, &&, !."""
    expression = re.sub(r"defined\s*\(\s*(\w+)\s*\)",
                        lambda match: " 1 " if match.group(1) in macros else " 0 ", condition)
    expression = re.sub(r"defined\s+(\w+)",
                        lambda match: " 1 " if match.group(1) in macros else " 0 ", expression)
    expression = expression.replace("||", " or ").replace("&&", " and ")
    expression = re.sub(r"!(?!=)", " not ", expression)
    expression = re.sub(r"\b[A-Za-z_]\w*\b",
                        lambda match: match.group(0) if match.group(0) in ("and", "or", "not")
                        else str(macros.get(match.group(0), 0)), expression)
    if not re.fullmatch(r"[\d\s()=!<>andort]*", expression):
        raise ValueError(f"cannot evaluate #if {condition.strip()!r}")
    return bool(eval(expression, {"__builtins__": {}}))  # digits and operators only


def _defines(text: str, macros: dict[str, int]) -> dict[str, str]:
    """Every ``__NR`` macro the preprocessor would define, with its raw value."""
    found: dict[str, str] = {}
    stack: list[tuple[bool, bool]] = []  # (this branch taken, some branch already taken)
    for line in _strip_comments(text).splitlines():
        line = line.strip()
        directive = _DIRECTIVE.match(line)
        active = all(taken for taken, _ in stack)
        if directive:
            keyword, rest = directive.group(1), directive.group(2).strip()
            if keyword in ("ifdef", "ifndef", "if"):
                if keyword == "if":
                    value = _evaluate(rest, macros)
                else:
                    value = (rest in macros) == (keyword == "ifdef")
                stack.append((value, value))
            elif keyword == "elif":
                _, done = stack.pop()
                value = not done and _evaluate(rest, macros)
                stack.append((value, done or value))
            elif keyword == "else":
                _, done = stack.pop()
                stack.append((not done, True))
            else:
                stack.pop()
            continue
        define = _DEFINE.match(line)
        if define and active:
            found[define.group(1)] = define.group(2)
    if stack:
        raise ValueError("unbalanced #if blocks")
    return found


def _table(text: str, macros: dict[str, int]) -> dict[str, int]:
    raw = _defines(text, macros)

    def resolve(value: str, seen: frozenset[str] = frozenset()) -> int:
        if value.isdigit():
            return int(value)
        if value in seen or value not in raw:
            raise ValueError(f"{value} does not resolve to a number")
        return resolve(raw[value], seen | {value})

    table = {name[len("__NR_"):]: resolve(value) for name, value in raw.items()
             if name.startswith("__NR_") and name[len("__NR_"):] not in _NOT_SYSCALLS}
    numbers: dict[int, str] = {}
    for name, number in table.items():
        if number in numbers:
            raise ValueError(f"{name} and {numbers[number]} share number {number}")
        numbers[number] = name
    return dict(sorted(table.items(), key=lambda item: item[1]))


def x86_64(header: str = X86_64_HEADER) -> dict[str, int]:
    """Every x86-64 syscall, name to number."""
    return _table(Path(header).read_text(), {"__BITS_PER_LONG": 64})


def aarch64(header: str = GENERIC_HEADER) -> dict[str, int]:
    """Every AArch64 syscall, name to number, with the 64-bit names of the 32/64 pairs."""
    return _table(Path(header).read_text(), _ARM64_MACROS)


def _dict_source(name: str, table: dict[str, int]) -> list[str]:
    lines = [f"{name}: dict[str, int] = {{"]
    line = "   "
    for key, number in table.items():
        item = f' "{key}": {number},'
        if len(line) + len(item) > 99:
            lines.append(line)
            line = "   "
        line += item
    lines.append(line)
    lines.append("}")
    return lines


def render(x86_header: str = X86_64_HEADER, generic_header: str = GENERIC_HEADER) -> str:
    """The generated module's source."""
    x86, arm = x86_64(x86_header), aarch64(generic_header)
    lines = [
        '"""Every syscall name and number on x86-64 and AArch64: generated, do not edit.',
        "",
        "Written by ``scripts/syscall_table.py`` from the kernel's user-space headers:",
        f"``{X86_64_HEADER}`` for `X86_64` ({len(x86)} calls) and",
        f"``{GENERIC_HEADER}`` for `AARCH64` ({len(arm)} calls), the",
        "latter with its ``#if`` blocks evaluated as arm64 does (64-bit, no compat)",
        "and the ``__NR3264_*`` numbers under their 64-bit names (``mmap``, ``fstat``,",
        "``newfstatat``, ``fcntl``, ``lseek``). Regenerate with",
        "``python scripts/syscall_table.py``; ``--check`` fails when this file is stale.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        '__all__ = ["AARCH64", "X86_64"]',
        "",
        *_dict_source("X86_64", x86),
        '"""x86-64 (``AUDIT_ARCH_X86_64``): name to number."""',
        "",
        *_dict_source("AARCH64", arm),
        '"""AArch64 (``AUDIT_ARCH_AARCH64``): name to number."""',
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the module is stale")
    parser.add_argument("--x86-64", default=X86_64_HEADER, dest="x86_header")
    parser.add_argument("--generic", default=GENERIC_HEADER, dest="generic_header")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    source = render(args.x86_header, args.generic_header)
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != source:
            print(f"{args.output} is out of date; run scripts/syscall_table.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(source)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
