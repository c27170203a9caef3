"""The distribution ships every package: folder names differ from import names, so they are listed."""

from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, name in (("runtime", "streamapp.runtime"), ("operator", "streamapp.operator")):
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found == listed, f"missing in pyproject: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_package_data_files_exist() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, patterns in config["package-data"].items():
        folder = ROOT / package.removeprefix("streamapp.").replace(".", "/")
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}: no file matches {pattern!r} in {folder}"
