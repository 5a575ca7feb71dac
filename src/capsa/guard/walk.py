"""The one link rule every entry point that walks a folder follows.

A folder an application ingests may hold a symbolic link to ``/etc/hostname``
or to a tenant's neighbour; a walk that follows it sends that file to the
model. Every capsa entry point that reads files from a path
(`extract_many`, ``capsa extract``, `CapsaLoader`, `CapsaReader`,
`CapsaDirectoryReader`) therefore takes the same ``symlinks`` option:

- ``"refuse"`` (the default): a symbolic link, as the file itself or as a
  folder on the way to it below the root, is refused as ``symlink``;
- ``"within_root"``: a link is followed when its target lies inside the
  root being walked, and refused as ``symlink`` otherwise;
- ``"follow"``: links are followed wherever they point; only for trees the
  application itself controls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from capsa.errors import IngestionRejected
from capsa.guard.labels import safe_label

__all__ = ["LinkRule", "check_link", "walk_files"]

LinkRule = Literal["refuse", "within_root", "follow"]
"""What a walk does with a symbolic link: refuse it, follow it inside the root, or follow it."""

_RULES = ("refuse", "within_root", "follow")


def check_link(path: str | os.PathLike[str], *, symlinks: LinkRule = "refuse",
               root: str | os.PathLike[str] | None = None) -> IngestionRejected | None:
    """The refusal the link rule gives `path`, or None when it may be read.

    Links are looked for in the file itself and in every folder between
    `root` and it (with no root, the file itself only).

    Raises:
        ValueError: an unknown rule, or ``"within_root"`` without a root.

    Examples:
        >>> folder = getfixture("tmp_path")
        >>> (folder / "a.txt").write_text("a") and (folder / "link").symlink_to("/etc/hostname")
        >>> check_link(folder / "a.txt") is None, check_link(folder / "link").reason
        (True, 'symlink')
        >>> check_link(folder / "link", symlinks="within_root", root=folder).reason
        'symlink'
    """
    if symlinks not in _RULES:
        raise ValueError(f"symlinks must be one of {_RULES}, got {symlinks!r}")
    if symlinks == "within_root" and root is None:
        raise ValueError("symlinks='within_root' needs the root the links must stay in")
    if symlinks == "follow":
        return None
    target = Path(path)
    links = [p for p in _between(target, root) if p.is_symlink()]
    if not links:
        return None
    label = safe_label(target.name)
    if symlinks == "refuse":
        return IngestionRejected(
            "a symbolic link is not followed (symlinks='refuse'; pass 'within_root' or "
            "'follow' to read it)", label=label, stage="size", reason="symlink")
    assert root is not None
    inside = Path(root).resolve()
    resolved = target.resolve()
    if resolved == inside or inside in resolved.parents:
        return None
    return IngestionRejected("a symbolic link that points outside the folder being read "
                             "(symlinks='within_root')", label=label, stage="size",
                             reason="symlink")


def _between(target: Path, root: str | os.PathLike[str] | None) -> list[Path]:
    if root is None:
        return [target]
    top = Path(root)
    try:
        relative = target.relative_to(top)
    except ValueError:
        return [target]
    found = []
    current = top
    for part in relative.parts:
        current = current / part
        found.append(current)
    return found


def walk_files(root: str | os.PathLike[str], pattern: str = "**/*", *,
               symlinks: LinkRule = "refuse", hidden: bool = True
               ) -> Iterator[tuple[Path, IngestionRejected | None]]:
    """Every file under `root` matching `pattern`, sorted, with its link-rule refusal (or None).

    A link is listed (never silently skipped) so the caller can report it;
    folders reached through a link are walked only when the rule lets the
    link be followed.

    Args:
        root: the folder to walk.
        pattern: a `Path.glob` pattern relative to `root` (``**`` recurses).
        symlinks: the link rule.
        hidden: include names starting with a dot.

    Examples:
        >>> folder = getfixture("tmp_path")
        >>> _ = (folder / "a.txt").write_text("a"); (folder / "b").symlink_to("/etc/hostname")
        >>> [(p.name, r and r.reason) for p, r in walk_files(folder)]
        [('a.txt', None), ('b', 'symlink')]
    """
    if symlinks not in _RULES:
        raise ValueError(f"symlinks must be one of {_RULES}, got {symlinks!r}")
    top = Path(root)
    found: set[Path] = set()
    for path in _glob(top, pattern, follow=symlinks != "refuse"):
        relative = path.relative_to(top)
        if not hidden and any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_symlink() or path.is_file():
            found.add(path)
    for path in sorted(found):
        refusal = check_link(path, symlinks=symlinks, root=top)
        if refusal is None and not path.is_file():
            continue  # a link to a folder, followed: its files are listed on their own
        yield path, refusal


def _glob(top: Path, pattern: str, *, follow: bool) -> Iterator[Path]:
    if not follow or "**" not in pattern:
        yield from top.glob(pattern)
        return
    # Path.glob does not descend into linked folders before Python 3.13; walk them
    # explicitly when the rule may follow them (each file is checked afterwards).
    # Each real folder is walked once, so a link loop ends.
    suffix = pattern.split("**/", 1)[-1] if "**/" in pattern else "*"
    seen: set[Path] = set()
    for folder, subfolders, _ in os.walk(top, followlinks=True):
        real = Path(folder).resolve()
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        yield from Path(folder).glob(suffix)
