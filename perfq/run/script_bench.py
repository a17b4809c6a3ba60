"""Adapter for plain micro-benchmark scripts: a command plus a metric pattern from config.

``[tool.perfq.benchmarks.<name>]`` (read from ``Config.extra["benchmarks"]``)::

    command = "{python} benchmarks/bench_gemm.py --n 512"   # string (shell-split) or list
    pattern = "^(?P<test>\\S+): (?P<value>[0-9.]+) us$"     # 'value' group required, 'test' optional
    unit = "us"                  # optional, default "us"
    metric = "time"              # optional, default "time"
    cwd = "."                    # optional, relative to the repo root

``{python}`` is replaced by the interpreter of the side being run. Every match of the
pattern in stdout is one measurement (the test name defaults to the benchmark name).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import PerfqError
from perfq.run.opbench import Measurement


@dataclass(frozen=True)
class ScriptBench:
    """A configured script benchmark."""

    name: str
    command: tuple[str, ...]
    pattern: re.Pattern[str]
    unit: str = "us"
    metric: str = "time"
    cwd: str = "."

    def argv(self, python: str) -> list[str]:
        """The command with ``{python}`` substituted."""
        return [part.replace("{python}", python) for part in self.command]

    def workdir(self, repo: Path) -> Path:
        return (repo / self.cwd).resolve()


def _table_name(name: str) -> str:
    """``[tool.perfq.benchmarks.NAME]`` as TOML spells it (a quoted key when NAME is not bare): one line."""
    key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
    return f"[tool.perfq.benchmarks.{key}]"


def script_benchmarks(extra: dict[str, Any]) -> dict[str, ScriptBench]:
    """The script benchmarks declared in config (``Config.extra``); malformed entries raise PerfqError."""
    table = extra.get("benchmarks") or {}
    if not isinstance(table, dict):
        raise PerfqError("[tool.perfq.benchmarks] must be a table of benchmark tables")
    found: dict[str, ScriptBench] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise PerfqError(f"{_table_name(name)} must be a table")
        command = entry.get("command")
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as exc:  # an unclosed quote or a trailing escape
                raise PerfqError(f"{_table_name(name)} 'command' does not split into words: {exc}") from None
        if not command or not isinstance(command, list) or not all(isinstance(c, str) for c in command):
            raise PerfqError(f"{_table_name(name)} needs a 'command' (string or list of strings)")
        raw = entry.get("pattern") or entry.get("metric_regex")
        if not isinstance(raw, str):
            raise PerfqError(f"{_table_name(name)} needs a 'pattern' regex with a 'value' group")
        try:
            pattern = re.compile(raw, re.MULTILINE)
        except re.error as exc:
            raise PerfqError(f"{_table_name(name)} bad pattern: {exc}") from None
        if "value" not in pattern.groupindex:
            raise PerfqError(f"{_table_name(name)} pattern needs a (?P<value>...) group")
        found[name] = ScriptBench(
            name,
            tuple(command),
            pattern,
            str(entry.get("unit", "us")),
            str(entry.get("metric", "time")),
            str(entry.get("cwd", ".")),
        )
    return found


def output_line_needed(bench: ScriptBench, line: str) -> bool:
    """Whether ``line`` holds a match of the benchmark's pattern (kept from the middle of capped output)."""
    return bench.pattern.search(line) is not None


def parse_output(bench: ScriptBench, stdout: str, device: str = "cpu") -> list[Measurement]:
    """Every match of the benchmark's pattern as a measurement."""
    found = []
    for m in bench.pattern.finditer(stdout):
        try:
            value = float(m.group("value"))
        except (TypeError, ValueError):
            continue
        test = m.groupdict().get("test") or bench.name
        found.append(Measurement(test, value, bench.metric, bench.unit, "eager", device))
    return found
