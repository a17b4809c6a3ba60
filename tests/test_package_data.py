"""The non-code inputs in data/ ship with perfq: every file of the folder is package data of
``data`` (a file that is not would be missing from an installed wheel, found only in a checkout),
and the code finds each through ``importlib.resources``, where it reads it."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from common.config import Config
from indexer.build_info import canaries_text
from indexer.cpp import _prelude
from perfq.ci.workflows import WORKFLOW_FILES, template

ROOT = Path(__file__).resolve().parent.parent


def _shipped_patterns() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["setuptools"]["package-data"]["data"]


def test_every_file_of_data_is_package_data():
    folder = ROOT / "data"
    shipped = {p for pattern in _shipped_patterns() for p in folder.glob(pattern)}  # as setuptools globs them
    files = {p for p in folder.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert files
    assert sorted(str(p.relative_to(folder)) for p in files - shipped) == []


def test_the_readers_find_the_data_through_importlib_resources(tmp_path):
    data = resources.files("data")
    assert Path(str(data)).resolve() == (ROOT / "data").resolve()
    assert canaries_text(tmp_path, Config()) == data.joinpath("canaries.yaml").read_text(encoding="utf-8")
    defines, count = _prelude()
    assert count > 0 and defines.count("#define ") == count
    for name in WORKFLOW_FILES:
        assert template(name) == data.joinpath(f"ci/{name}.in").read_text(encoding="utf-8")


def test_the_version_has_one_source():
    """pyproject.toml names no version of its own: setuptools reads common/version.py's."""
    from setuptools.config.pyprojecttoml import read_configuration

    from common.version import __version__

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["version"] == __version__
