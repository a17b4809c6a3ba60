#!/usr/bin/env python3
"""Byte-identity of perfq's outputs between two code checkouts on a PyTorch corpus (issue 39; not a test).

Each side runs in its own virtualenv (made here from the checkout, or given), on a fresh clone of
the corpus at the same path, so no path or cache differs between the two:

1. every table of a cold ``perfq index --no-trace`` (rows sorted, one CSV per table);
2. that index patched in place four times in a row (a body edit, a new function, a deleted
   registered kernel, a call added in a header), every table after each patch;
3. every table of a cold traced index (``perfq index --trace``, minutes);
4. ``perfq affected`` on a 1-, 2- and 300-file diff, a header diff and a Python diff
   (``--explain --format json``, ``--format markdown``, the table at COLUMNS=80, ``--budget 5m``
   as table and json), ``perfq coverage`` (table, json) and ``--scaffold`` of one operator, over
   the cold index and over the traced one;
5. ``--help`` of every command and bad inputs, each with its exit code.

Then it prints one line per output: identical or different (with the first differing line).
Only what differs between any two runs of the same code is masked (see ``MASKS``): memory
addresses in test names, timings and the code's own digests in ``meta``.

    python bench/identity.py BEFORE_CHECKOUT AFTER_CHECKOUT [--corpus DIR] [--work DIR]
        [--sides before,after] [--no-traced]

``--sides before`` (or ``after``, or an empty value) collects only those sides and compares
with what an earlier run left in ``--work``: re-run one side after a fix. ``--query-db DB``
runs only item 4, both codes over one index (e.g. ``WORK/traced/index.duckdb`` that a run
left): seconds, for a change of the query side only.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb

DIFFS = ("one", "two", "many", "header", "py")
SCAFFOLD_OP = "lerp"
DATE = "2026-01-01T00:00:00Z"
# (output-name pattern, regex, replacement): what differs between two runs of the same code
MASKS: tuple[tuple[str, str, str], ...] = (
    ("", r"(at ?)0x[0-9a-f]+", r"\g<1>0xADDR"),  # a lambda's address in cat_test's test names (spaces dropped)
    ("meta.csv", r"^(built_at|time_[a-z_]+|config:linker),.*$", r"\1,<masked>"),  # when, how long, the code's digest
    ("traces.csv", r",[0-9.]+,[0-9]+,([^,]*)$", r",<seconds>,<max_rss_mb>,\1"),  # a traced file's time and memory
    ("index-", r"\d+\.\d+", "<t>"),  # the build's timings
)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return proc


def side_python(checkout: Path, work: Path, label: str) -> Path:
    """The side's virtualenv (system site packages, perfq installed editable from the checkout)."""
    venv = work / f"venv-{label}"
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], work)
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(checkout)], work)
    where = run([str(python), "-c", "import perfq; print(perfq.__file__)"], work).stdout.strip()
    if not Path(where).resolve().is_relative_to(checkout.resolve()):
        sys.exit(f"error: {python} imports perfq from {where}, not from {checkout}")
    return python


class Side:
    """One side's perfq, run in the shared tree; every output saved under ``out``."""

    def __init__(self, python: Path, tree: Path, out: Path, cache: Path) -> None:
        self.perfq = [str(python.parent / "perfq")]
        self.tree, self.out = tree, out
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        self.env.update(COLUMNS="80", XDG_CACHE_HOME=str(cache), NO_COLOR="1")

    def save(self, name: str, args: list[str], cwd: Path | None = None, stdin: str | None = None) -> int:
        """Run ``perfq ARGS``; stdout, stderr and the exit code go to ``out/NAME``."""
        proc = subprocess.run(self.perfq + args, cwd=cwd or self.tree, capture_output=True, text=True,
                              env=self.env, input=stdin)
        (self.out / name).write_text(f"exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
        return proc.returncode


def dump_tables(db: Path, folder: Path) -> None:
    """Every table of ``db``, its columns then its rows as CSV lines, sorted."""
    folder.mkdir(parents=True)
    con = duckdb.connect(str(db), read_only=True)
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1").fetchall()]
    for table in tables:
        columns = con.execute(f'DESCRIBE "{table}"').fetchall()
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
            writer.writerow(row)
        rows = sorted(buf.getvalue().splitlines())
        header = ",".join(f"{c[0]}:{c[1]}" for c in columns)
        (folder / f"{table}.csv").write_text("\n".join([header, *rows]) + "\n")
    con.close()


def git(tree: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE}
    return run(["git", "-c", "user.name=identity", "-c", "user.email=identity@localhost", *args], tree, env).stdout


def edit_lines(path: Path, change) -> None:
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
    path.write_text("".join(change(lines)), encoding="utf-8", errors="surrogateescape")


def before_closing_brace(marker: str, after: str):
    """An edit adding ``marker`` as a statement before the closing brace of the function opening
    at the first line that starts with ``after``."""
    def change(lines: list[str]) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(after))
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
        return lines[:end] + [f"  (void)0; // {marker}\n"] + lines[end:]
    return change


def replace(old: str, new: str):
    def change(lines: list[str]) -> list[str]:
        text = "".join(lines)
        if old not in text:
            sys.exit(f"error: the corpus has no {old!r}")
        return text.replace(old, new, 1).splitlines(keepends=True)
    return change


ACTIVATION = "aten/src/ATen/native/cpu/Activation.cpp"
UTILS_H = "aten/src/ATen/native/cpu/utils.h"
BODY_EDIT = (ACTIVATION, before_closing_brace("one", "static void log_sigmoid_cpu_kernel("))
NEW_FUNCTION = (ACTIVATION, replace("} // namespace\n\n\nREGISTER_DISPATCH",
                                    "static void perfq_new_helper(TensorIteratorBase& iter) {\n"
                                    "  hardsigmoid_kernel(iter);\n}\n\n} // namespace\n\n\nREGISTER_DISPATCH"))
HEADER_CALL = (UTILS_H, replace("inline bool data_index_step() {\n  return true;\n}",
                                "inline bool data_index_step() {\n  (void)data_index_init(0);\n  return true;\n}"))


def delete_function(first_line: str):
    def change(lines: list[str]) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(first_line))
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
        return lines[:start] + lines[end + 1:]
    return change


DELETED_KERNEL = (ACTIVATION, delete_function("static void log_sigmoid_backward_cpu_kernel("))
PATCHES = (("body-edit", BODY_EDIT), ("new-function", NEW_FUNCTION), ("deleted-kernel", DELETED_KERNEL),
           ("header-call", HEADER_CALL))


def many_files(tree: Path, n: int = 300) -> Iterator[tuple[str, object]]:
    """A statement added to the first top-level function of each of the first ``n`` native C++ files."""
    found = 0
    for path in sorted((tree / "aten/src/ATen/native").rglob("*.cpp")):
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
        if any(line == "}" and i > 0 and lines[i - 1].startswith("  ") for i, line in enumerate(lines)):
            found += 1
            yield str(path.relative_to(tree)), _before_first_closing
        if found == n:
            return


def _before_first_closing(lines: list[str]) -> list[str]:
    end = next(i for i, line in enumerate(lines) if line.rstrip("\r\n") == "}" and i and lines[i - 1].startswith("  "))
    return lines[:end] + ["  (void)0; // many\n"] + lines[end:]


def write_diffs(tree: Path, folder: Path) -> None:
    """The diffs ``affected`` reads, made once from the corpus (the same files for both sides)."""
    folder.mkdir(parents=True, exist_ok=True)
    edits = {
        "one": [BODY_EDIT],
        "two": [(ACTIVATION, before_closing_brace("two", "static void log_sigmoid_cpu_kernel(")),
                ("aten/src/ATen/native/Convolution.cpp", before_closing_brace("two", "bool check_cudnn_depthwise"))],
        "many": list(many_files(tree)),
        "header": [HEADER_CALL],
        "py": [("torch/nn/functional.py", replace("        ret = input.softmax(dim)\n",
                                                  "        ret = input.softmax(dim) if True else None\n"))],
    }
    for name, changes in edits.items():
        for path, change in changes:
            edit_lines(tree / path, change)
        (folder / f"{name}.diff").write_text(git(tree, "diff"))
        git(tree, "checkout", "--", ".")


def help_pages(side: Side) -> None:
    """``--help`` of the root, every command and every group's commands (names read from the help)."""
    pending, seen = [[]], set()
    while pending:
        words = pending.pop()
        name = "help-" + ("-".join(words) or "root")
        side.save(name, [*words, "--help"])
        text = (side.out / name).read_text()
        box = text.split("─ Commands ─", 1)
        for match in re.finditer(r"^│ ([a-z][a-z0-9-]*)\s", box[1] if len(box) > 1 else "", re.M):
            command = (*words, match.group(1))
            if command not in seen:
                seen.add(command)
                pending.append(list(command))


def bad_inputs(side: Side, diffs: Path, work: Path) -> None:
    garbage = work / "not-an-index.duckdb"
    garbage.write_text("not a database\n")
    nowhere = work / "not-a-repo"
    nowhere.mkdir(exist_ok=True)
    one = str(diffs / "one.diff")
    side.save("bad-unknown-ref", ["affected", "no-such-ref"])
    side.save("bad-missing-diff", ["affected", "--diff", str(work / "missing.diff")])
    side.save("bad-budget", ["affected", "--diff", one, "--budget", "5x"])
    side.save("bad-shards", ["affected", "--diff", one, "--shards", "0"])
    side.save("bad-index-not-a-repo", ["index", "--no-trace", "-q"], cwd=nowhere)
    side.save("bad-db-garbage", ["affected", "--diff", one, "--db", str(garbage)])
    side.save("bad-scaffold-unknown-op", ["coverage", "--scaffold", "no_such_op_xyz", "--out", str(work / "x.py")])
    side.save("bad-compare-no-history", ["compare", "no-such-label"])


def query_outputs(side: Side, diffs: Path, db: Path, work: Path, prefix: str = "") -> None:
    """``affected`` on every diff in four formats and two budget plans, ``coverage`` and a scaffold, over ``db``."""
    where = ["--db", str(db)]
    for name in DIFFS:
        diff = ["affected", "--diff", str(diffs / f"{name}.diff"), *where]
        side.save(f"{prefix}affected-{name}-json", [*diff, "--explain", "--format", "json"])
        side.save(f"{prefix}affected-{name}-md", [*diff, "--format", "markdown"])
        side.save(f"{prefix}affected-{name}-table", diff)
        side.save(f"{prefix}affected-{name}-budget", [*diff, "--budget", "5m"])
        side.save(f"{prefix}affected-{name}-budget-json", [*diff, "--budget", "5m", "--format", "json"])
    side.save(f"{prefix}coverage-table", ["coverage", *where])
    side.save(f"{prefix}coverage-json", ["coverage", "--format", "json", *where])
    scaffold = work / "scaffold.py"
    side.save(f"{prefix}coverage-scaffold", ["coverage", "--scaffold", SCAFFOLD_OP, "--out", str(scaffold), *where])
    shutil.move(scaffold, side.out / f"{prefix}coverage-scaffold-file")


def collect(label: str, python: Path, corpus: Path, work: Path, traced: bool) -> None:
    """Every output of one side, under ``work/out/LABEL``."""
    tree, cache, out = work / "tree", work / "cache", work / "out" / label
    for stale in (tree, cache, out):
        shutil.rmtree(stale, ignore_errors=True)
    out.mkdir(parents=True)
    run(["git", "clone", "-q", str(corpus), str(tree)], work)
    diffs = work / "diffs"
    if not (diffs / "py.diff").exists():
        write_diffs(tree, diffs)
    side = Side(python, tree, out, cache)
    db = tree / ".git/perfq/index.duckdb"
    print(f"{label}: cold index", flush=True)
    side.save("index-cold", ["index", "--no-trace", "-q", "--format", "json"])
    dump_tables(db, out / "tables-cold")
    query_outputs(side, diffs, db, work)
    help_pages(side)
    bad_inputs(side, diffs, work)
    for name, (path, change) in PATCHES:
        print(f"{label}: patch {name}", flush=True)
        edit_lines(tree / path, change)
        git(tree, "commit", "-qam", name)
        side.save(f"index-patch-{name}", ["index", "--no-trace", "-q", "--format", "json"])
        dump_tables(db, out / f"tables-patch-{name}")
    if traced:
        print(f"{label}: traced index", flush=True)
        git(tree, "reset", "-q", "--hard", "HEAD~4")
        traced_db = work / "traced" / "index.duckdb"
        shutil.rmtree(traced_db.parent, ignore_errors=True)
        side.save("index-traced", ["index", "--trace", "-q", "--format", "json", "--db", str(traced_db)])
        dump_tables(traced_db, out / "tables-traced")
        query_outputs(side, diffs, traced_db, work, "traced-")


def collect_queries(label: str, python: Path, work: Path, db: Path) -> None:
    """The query outputs of one side over an index built earlier (the build's tables compared apart)."""
    out = work / "out-query" / label
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    query_outputs(Side(python, work / "tree", out, work / "cache"), work / "diffs", db, work)


def masked(name: str, text: str) -> str:
    for where, pattern, repl in MASKS:
        if where in name:
            text = re.sub(pattern, repl, text, flags=re.M)
    return text


def comparable(name: str, path: Path) -> list[str]:
    """The output's masked lines; a table's rows sorted again, as a mask can reorder them."""
    lines = masked(name, path.read_text(errors="replace")).splitlines()
    return lines[:1] + sorted(lines[1:]) if name.startswith("tables-") else lines


def load_notes(side: Path) -> Iterator[str]:
    """The traced files a side's tracer cut off (timeout, memory): their rows depend on the machine's load."""
    traces = side / "tables-traced" / "traces.csv"
    lines = traces.read_text().splitlines()[1:] if traces.exists() else []
    for row in csv.reader(lines):
        if row[3].startswith(("timed out", "used more than")):
            yield f"note: {side.name} traced {row[1]}: {row[3]} (load-dependent; re-run that side on a quieter machine)"


def outputs(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}


def compare(before: Path, after: Path) -> int:
    """One line per output; the number that differ."""
    a, b = outputs(before), outputs(after)
    different = 0
    for name in sorted(a.keys() | b.keys()):
        if name not in a or name not in b:
            print(f"{name:55} only {'before' if name in a else 'after'}")
            different += 1
            continue
        old, new = (comparable(name, p) for p in (a[name], b[name]))
        if old == new:
            print(f"{name:55} identical ({len(old)} lines)")
            continue
        different += 1
        first = next(line for line in difflib.unified_diff(old, new, lineterm="", n=0)
                     if line[:1] in "+-" and not line.startswith(("+++", "---")))
        changed = sum(1 for line in difflib.unified_diff(old, new, lineterm="", n=0)
                      if line[:1] in "+-" and not line.startswith(("+++", "---")))
        print(f"{name:55} DIFFERENT ({changed} lines +/-; first: {first[:120]})")
    for note in (*load_notes(before), *load_notes(after)):
        print(note)
    print(f"{len(a.keys() | b.keys())} outputs, {different} different")
    return different


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the code checkout before the change")
    ap.add_argument("after", type=Path, help="the code checkout after the change")
    ap.add_argument("--corpus", type=Path,
                    default=Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0")
    ap.add_argument("--work", type=Path, default=Path("identity-work"), help="scratch folder (clones, venvs, outputs)")
    ap.add_argument("--sides", default="before,after", help="the sides to collect now (the others: from --work)")
    ap.add_argument("--no-traced", dest="traced", action="store_false", help="skip the traced index (minutes)")
    ap.add_argument("--query-db", type=Path, help="only the query outputs of both codes over this index (seconds)")
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    outputs_dir = work / ("out-query" if args.query_db else "out")
    for label in filter(None, args.sides.split(",")):
        checkout = {"before": args.before, "after": args.after}[label].resolve()
        python = side_python(checkout, work, label)
        if args.query_db:
            collect_queries(label, python, work, args.query_db.resolve())
        else:
            collect(label, python, args.corpus, work, args.traced)
    sys.exit(1 if compare(outputs_dir / "before", outputs_dir / "after") else 0)


if __name__ == "__main__":
    main()
