"""Run import-linter on perfq as it is installed.

perfq maps top-level folders into one package (``[tool.setuptools.package-dir]``:
``indexer/`` -> ``indexer``, ``features/run`` -> ``perfq.run``...). import-linter reads
a package from one directory, so this lays the mapped folders out as ``perfq/...`` with
symlinks in a temporary directory and runs ``lint-imports`` there (contracts in pyproject.toml).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_view(dest: Path) -> Path:
    """``dest/perfq``: the package tree of pyproject's package-dir mapping, as symlinks."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = dest / "perfq"
    top.mkdir()
    for entry in (ROOT / mapping["perfq"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in sorted(mapping.items()):
        if package != "perfq":
            target = dest.joinpath(*package.split("."))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(ROOT / folder)
    return top


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="perfq-lint-imports-") as tmp:
        package_view(Path(tmp))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")])}
        lint = Path(sys.executable).with_name("lint-imports")
        argv = [str(lint) if lint.exists() else "lint-imports", str(ROOT / "pyproject.toml"), "--no-cache"]
        return subprocess.run([*argv, *sys.argv[1:]], cwd=tmp, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
