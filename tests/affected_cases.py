"""Labelled `perfq affected` cases on PyTorch 2.6.0, written as programmatic edits.

``tests/data/affected_cases.json`` holds the cases (labels checked against real profiler traces
of the 2.6.0 operator benchmarks, see bench/trace_truth.py). This module loads them, applies
an edit to a checkout, runs ``perfq affected`` on a scratch copy of the corpus and scores the
answer. Used by tests/test_affected_cases.py and bench/eval_cases.py; no PyTorch code is stored,
only anchors (a regex that matches one line) and the new text.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

CASES_FILE = Path(__file__).with_name("data") / "affected_cases.json"
CORPUS = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
DEFAULT_AFFECTED_CMD = f"{shlex.quote(sys.executable)} -m perfq affected {{base}} --format json"
DEFAULT_INDEX_CMD = f"{shlex.quote(sys.executable)} -m perfq index -q"
COMMENT_PREFIXES = ("//", "/*", "*", "#")
GIT_ENV = {"GIT_AUTHOR_NAME": "cases", "GIT_AUTHOR_EMAIL": "cases@localhost",
           "GIT_COMMITTER_NAME": "cases", "GIT_COMMITTER_EMAIL": "cases@localhost"}


class EditKind(str, Enum):
    """How a case changes its file. ``comment``, ``whitespace`` and ``reformat`` change no token."""

    insert_after = "insert_after"  # insert ``text`` after the anchor line
    replace = "replace"  # substitute the anchor's match on its line by ``replacement``
    comment = "comment"  # insert comment lines (``text``) after the anchor line
    whitespace = "whitespace"  # re-indent ``count`` lines from the anchor by ``indent`` spaces
    reformat = "reformat"  # replace ``count`` lines from the anchor by ``replacement``, same non-blank characters
    splice = "splice"  # replace ``count`` lines, ``offset`` lines below the anchor, by ``lines`` (a diff's hunk)


class CaseError(ValueError):
    """A case that cannot be applied as written (anchor not unique, edit changes tokens...)."""


@dataclass(frozen=True)
class Edit:
    kind: EditKind
    anchor: str
    text: str = ""
    replacement: str = ""
    count: int = 1
    indent: int = 0
    before: bool = False  # insert_after/comment: insert before the anchor line instead
    offset: int = 0  # splice: where the replaced lines start, below the anchor line
    lines: tuple[str, ...] = ()  # splice: the new lines

    def to_json(self) -> dict:
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Case:
    id: str
    klass: str
    file: str
    edits: tuple[Edit, ...]  # in file order, anchors in the unedited file
    changed_function: str
    expected_ops: tuple[str, ...]
    expected_benchmarks: tuple[str, ...]
    acceptable_benchmarks: tuple[str, ...]
    canary: bool
    no_op: bool
    notes: str
    compile_mode: bool = False  # the change only shows under torch.compile: the answer must say so

    @property
    def negative(self) -> bool:
        """A change that must select nothing: a no-op, or ops without a benchmark."""
        return self.no_op or not self.expected_benchmarks


def _edit(doc: dict) -> Edit:
    fields = dict(doc)
    kind = EditKind(fields.pop("kind"))
    return Edit(kind=kind, **{k: tuple(v) if k == "lines" else v for k, v in fields.items()})


def case_from_json(doc: dict) -> Case:
    return Case(
        id=doc["id"], klass=doc["class"], file=doc["file"],
        edits=tuple(_edit(e) for e in (doc["edits"] if "edits" in doc else [doc["edit"]])),
        changed_function=doc["changed_function"],
        expected_ops=tuple(doc["expected_ops"]), expected_benchmarks=tuple(doc["expected_benchmarks"]),
        acceptable_benchmarks=tuple(doc["acceptable_benchmarks"]),
        canary=bool(doc["canary"]), no_op=bool(doc["no_op"]), notes=doc["notes"],
        compile_mode=bool(doc.get("compile_mode")),
    )


def load_cases(path: Path = CASES_FILE) -> list[Case]:
    return [case_from_json(doc) for doc in json.loads(path.read_text(encoding="utf-8"))["cases"]]


# ------------------------------------------------------------------------------ edits


def anchor_line(lines: list[str], anchor: str) -> int:
    """Index of the one line ``anchor`` (a regex) matches; CaseError unless exactly one does."""
    pattern = re.compile(anchor)
    hits = [i for i, line in enumerate(lines) if pattern.search(line)]
    if len(hits) != 1:
        raise CaseError(f"anchor {anchor!r} matches {len(hits)} lines, not one")
    return hits[0]


def _text_lines(text: str) -> list[str]:
    return [line + "\n" for line in text.split("\n")]


def _no_blanks(lines: list[str]) -> str:
    return "".join("".join(lines).split())


def _blank_or_comment(line: str) -> bool:
    return not line.strip() or line.strip().startswith(COMMENT_PREFIXES)


def _reindent(line: str, indent: int) -> str:
    if not line.strip():
        return line
    if indent >= 0:
        return " " * indent + line
    strip = min(-indent, len(line) - len(line.lstrip(" ")))
    return line[strip:]


def edited_lines(lines: list[str], edit: Edit) -> list[str]:
    """The file's lines after ``edit`` (lines keep their line ends)."""
    at = anchor_line(lines, edit.anchor)
    if edit.kind in (EditKind.insert_after, EditKind.comment):
        new = _text_lines(edit.text)
        if edit.kind is EditKind.comment and not all(_blank_or_comment(x) for x in new):
            raise CaseError(f"comment edit inserts a non-comment line: {edit.text!r}")
        cut = at if edit.before else at + 1
        return lines[:cut] + new + lines[cut:]
    if edit.kind is EditKind.replace:
        line = re.sub(edit.anchor, lambda _: edit.replacement, lines[at].rstrip("\n"), count=1)
        return lines[:at] + _text_lines(line) + lines[at + 1 :]
    if edit.kind is EditKind.splice:
        start = at + edit.offset
        return lines[:start] + [line + "\n" for line in edit.lines] + lines[start + edit.count :]
    end = at + edit.count
    if edit.kind is EditKind.whitespace:
        return lines[:at] + [_reindent(x, edit.indent) for x in lines[at:end]] + lines[end:]
    new = _text_lines(edit.replacement)
    if _no_blanks(new) != _no_blanks(lines[at:end]):
        raise CaseError("reformat edit changes more than whitespace")
    return lines[:at] + new + lines[end:]


def case_lines(lines: list[str], case: Case) -> list[str]:
    """The file's lines after every edit of ``case`` (the last first: the others' lines stay put)."""
    for edit in reversed(case.edits):
        lines = edited_lines(lines, edit)
    return lines


def apply_edit(tree: Path, case: Case) -> None:
    """Apply ``case``'s edit to its file under ``tree`` (a checkout of the corpus commit)."""
    path = tree / case.file
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    new = "".join(case_lines(text.splitlines(keepends=True), case))
    if new == text:
        raise CaseError(f"case {case.id}: the edit leaves {case.file} unchanged")
    path.write_text(new, encoding="utf-8", errors="surrogateescape")


# ------------------------------------------------------------------------ scratch runs


def git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:400]}")
    return proc.stdout


@dataclass(frozen=True)
class Scratch:
    """A scratch checkout of the corpus at ``base`` whose index is built once."""

    root: Path
    base: str


def make_scratch(corpus: Path, dest: Path, index_cmd: str = DEFAULT_INDEX_CMD) -> Scratch:
    """A shared clone of ``corpus`` (the corpus is not written) with its perfq index built at its commit."""
    base = git(corpus, "rev-parse", "HEAD").strip()
    git(dest.parent, "clone", "-q", "--shared", "--no-checkout", str(corpus), str(dest))
    git(dest, "checkout", "-q", "--detach", base)
    if index_cmd:
        proc = subprocess.run(shlex.split(index_cmd), cwd=dest, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"index failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return Scratch(dest, base)


def commit_case(scratch: Scratch, case: Case) -> None:
    """Reset the scratch checkout to the base commit, apply ``case`` and commit it."""
    git(scratch.root, "checkout", "-q", "-f", "--detach", scratch.base)
    git(scratch.root, "clean", "-fdq")
    apply_edit(scratch.root, case)
    git(scratch.root, "commit", "-qam", f"case {case.id}")


def run_affected(scratch: Scratch, cmd: str = DEFAULT_AFFECTED_CMD, timeout: int = 600) -> tuple[dict, float]:
    """The JSON document ``cmd`` prints at the scratch root (``{base}`` is the base commit), and its wall time."""
    argv = [part.replace("{base}", scratch.base) for part in shlex.split(cmd)]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=scratch.root, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"no JSON from {argv[0]} (exit {proc.returncode}): {proc.stderr.strip()[-300:]}") from exc
    return doc, wall


# ----------------------------------------------------------------------------- scoring


def stem_of(name: str) -> str:
    """A benchmark's identity: its file stem (``softmax_test``), as the shared eval harness spells it."""
    stem = os.path.basename(str(name).strip()).removesuffix(".py").removeprefix("pt.")
    return stem if stem.endswith("_test") else f"{stem}_test"


def selected_benchmarks(doc: dict) -> set[str]:
    """Benchmarks a `perfq affected` JSON selects, canary sets included."""
    items = list(doc.get("benchmarks") or [])
    items += [b for c in doc.get("canary") or [] for b in c.get("benchmarks") or []]
    return {stem_of(b.get("file") or b.get("name")) for b in items}


def _op_names(ops: list[str] | tuple[str, ...]) -> set[str]:
    return {op.split(".")[0] for op in ops}


@dataclass(frozen=True)
class Score:
    case: str
    klass: str
    selected: tuple[str, ...]
    missed: tuple[str, ...]
    extra: tuple[str, ...]
    recall: float | None
    no_op_reported: bool
    missing_ops: tuple[str, ...] = field(default=())
    wall_s: float = 0.0
    compile_signalled: bool = False  # compile_mode set and the selected benchmarks run in compile mode

    @property
    def empty_ok(self) -> bool:
        return not self.selected

    def to_json(self) -> dict:
        return asdict(self)


def score(case: Case, doc: dict, wall_s: float = 0.0) -> Score:
    selected = selected_benchmarks(doc)
    expected, acceptable = set(case.expected_benchmarks), set(case.acceptable_benchmarks)
    reported_ops = _op_names(doc.get("ops") or [])
    return Score(
        case=case.id, klass=case.klass, selected=tuple(sorted(selected)),
        missed=tuple(sorted(expected - selected)), extra=tuple(sorted(selected - expected - acceptable)),
        recall=(len(expected & selected) / len(expected)) if expected else None,
        no_op_reported=bool(doc.get("no_op_changes")),
        missing_ops=tuple(sorted(op for op in case.expected_ops if op.split(".")[0] not in reported_ops)),
        wall_s=round(wall_s, 3),
        compile_signalled=_compile_signalled(doc),
    )


def _compile_signalled(doc: dict) -> bool:
    """Whether the answer says the change shows in compile mode, with a benchmark to run there."""
    modes = {m for b in doc.get("benchmarks") or [] for m in b.get("modes") or ()}
    return bool(doc.get("compile_mode")) and "compile" in modes


def failures(case: Case, result: Score) -> list[str]:
    """Why ``result`` does not meet ``case``'s labels (empty when it does)."""
    problems = []
    if result.missed:
        problems.append(f"missed {', '.join(result.missed)}")
    if result.extra:
        problems.append(f"selected outside expected+acceptable: {', '.join(result.extra)}")
    if case.negative and result.selected:
        problems.append(f"must select nothing, selected {', '.join(result.selected)}")
    if case.no_op and not result.no_op_reported:
        problems.append("the change is not reported under no_op_changes")
    if case.compile_mode and not result.compile_signalled:
        problems.append("compile mode not signalled")
    return problems
