"""The example manifests shipped with StreamApp, found by name: ``streamapp run wordcount``.

The project's fixed layout has no top-level ``examples/`` folder, and examples are only useful
where the installed ``streamapp`` command can find them, so they are package data of the CLI:
``streamapp examples`` lists them (name, summary, path), and ``streamapp run|describe|validate
NAME`` takes an example's name where a manifest path is expected. Each file opens with comment
lines saying what it does, its input and its output.
"""

from __future__ import annotations

import dataclasses
import pathlib

__all__ = ["FOLDER", "Example", "available", "find"]

FOLDER = pathlib.Path(__file__).parent


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    path: pathlib.Path
    summary: str  # the file's first comment line


def _summary(path: pathlib.Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


def available() -> list[Example]:
    """Every example, by name."""
    return [Example(p.stem, p, _summary(p)) for p in sorted(FOLDER.glob("*.yaml"))]


def find(name: str) -> pathlib.Path:
    """The manifest of the example called ``name``; KeyError when there is none."""
    path = FOLDER / f"{name}.yaml"
    if not path.is_file() or "/" in name:
        raise KeyError(name)
    return path
