"""Recording the installed torch's build settings for the target build (indexer.build_config):
torch is imported in a child process, once per torch install, by the index build. A query only
reads the record, so it never loads the process machinery."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from common import proc
from common.paths import write_atomically
from indexer.build_config import read_record, record_key, record_places, settings_macros, torch_package_dir

RECORD_TIMEOUT_S = 300.0

_PROBE = ("import json, torch; print(json.dumps({'config': torch.__config__.show(), "
          "'version': torch.__version__}))")


def record_torch_build(record_dir: Path, python: str = sys.executable) -> str | None:
    """Record the installed torch's build settings, once per torch install (a current record
    is kept), in the user's cache or else in ``record_dir``. Runs ``python -I`` (no current
    directory on its path) so that a PyTorch source tree's ``torch/`` is never what gets
    imported. None on success, else why not."""
    torch_dir = torch_package_dir()
    if torch_dir is None:
        return "torch is not installed"
    if read_record(record_dir, torch_dir) is not None:
        return None
    res = proc.run([python, "-I", "-c", _PROBE], cwd=record_dir, timeout=RECORD_TIMEOUT_S)
    if not res.ok:
        return res.error or f"exit {res.returncode}: {res.last_line()}"
    try:
        shown = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "torch printed no configuration"
    defined, undefined = settings_macros(shown["config"])
    doc = {"key": record_key(torch_dir), "version": shown["version"], "defined": defined, "undefined": undefined}
    for folder, name in record_places(record_dir, torch_dir):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomically(folder / name, [json.dumps(doc, indent=1)])
            return None
        except OSError as exc:
            why = f"cannot write {folder / name}: {exc.strerror}"
    return why
