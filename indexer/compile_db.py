"""compile_commands.json: per-file compile flags, for exact callee resolution."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from common import files
from common.errors import PerfqError


def load_compile_db(repo: Path, path: str) -> dict[str, list[str]]:
    """Repo-relative source path -> the clang arguments to parse it with (compiler,
    output and the source itself dropped; the entry's directory made the working dir)."""
    file = Path(path) if Path(path).is_absolute() else repo / path
    try:
        entries = json.loads(files.input_text(file, files.InputKind.compile_commands))
    except OSError as exc:
        raise PerfqError(f"compile_commands {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PerfqError(f"compile_commands {file}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PerfqError(f"compile_commands {file}: malformed JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(entries, list):
        raise PerfqError(f"compile_commands {file}: not a list of entries")
    root = repo.resolve()
    out: dict[str, list[str]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or "file" not in entry:
            continue
        directory = Path(entry.get("directory") or root)
        source = Path(entry["file"])
        source = (source if source.is_absolute() else directory / source).resolve()
        try:
            rel = source.relative_to(root).as_posix()
        except ValueError:
            continue
        argv = entry.get("arguments") or shlex.split(entry.get("command", ""))
        args: list[str] = []
        skip = False
        for arg in argv[1:]:
            if skip:
                skip = False
                continue
            if arg in ("-c", "-o"):
                skip = arg == "-o"
                continue
            if Path(arg).name == source.name and (directory / arg).resolve() == source:
                continue
            args.append(arg)
        out[rel] = [f"-working-directory={directory}", *args]
    return out
