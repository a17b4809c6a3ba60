"""Head extents moved from the base's without a parse (query/extents.py shifted_extents):
wherever they are given they equal what parsing the head gives, and a change that could
move a function's bounds is left to the parser."""

from __future__ import annotations

import difflib
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.diff import parse_diff
from query.extents import parse_extents, shifted_extents

BASE = """#include <vector>
namespace at { namespace native {

static int helper(int x) {
  int y = x + 1;
  return y * 2;
}

template <typename T>
T twice(
    const T* data,
    int n) {
  T sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += data[i];
  }
  return sum * 2;
}

struct Acc {
  int value = 0;
  void add(int x) {
    value += x;
  }
};

}}  // namespace at::native
"""
LINES = BASE.splitlines(keepends=True)


def _shift(head: str):
    change = parse_diff("".join(difflib.unified_diff(LINES, head.splitlines(True), "a/k.cpp", "b/k.cpp")))[0]
    base = parse_extents("cpp", "k.cpp", BASE.encode())
    data = head.encode()
    return shifted_extents(base, BASE.encode(), change, hashlib.sha256(data).hexdigest(), data.count(b"\n") + 1)


def _edit(at: int, remove: int, insert: list[str]) -> str:
    return "".join(LINES[:at] + [line + "\n" for line in insert] + LINES[at + remove :])


def _extents(facts) -> list[tuple[str, int, int]]:
    return [(f.qualname, f.start_line, f.end_line) for f in facts.functions]


@pytest.mark.parametrize(
    "head",
    [
        _edit(4, 0, ["  y += 3;"]),  # a statement in helper
        _edit(4, 1, []),  # a statement removed
        _edit(12, 0, ["  if (n > 4) {", "    n -= 1;", "  }"]),  # a block in twice
        _edit(14, 1, ["    sum += data[i] * 1;  // }"]),  # a brace inside a comment
        _edit(4, 1, ['  int y = x + (int)sizeof("}{");']),  # braces inside a string
        _edit(4, 0, ["  /* } */ y += 1;"]),  # a block comment on one line
        _edit(4, 0, ["  y++;"]).replace("    value += x;\n", "    value += x;\n    value *= 2;\n"),  # two hunks
    ],
    ids=["insert", "delete", "block", "comment-brace", "string-brace", "inline-block-comment", "two-hunks"],
)
def test_moved_extents_equal_the_parse_of_the_head(head):
    moved = _shift(head)
    assert moved is not None
    assert _extents(moved) == _extents(parse_extents("cpp", "k.cpp", head.encode()))


@pytest.mark.parametrize(
    "head",
    [
        _edit(7, 0, ["", "int added(int a) {", "  return a;", "}"]),  # a new function between two
        _edit(5, 0, ["}", "int split(int y) {"]),  # helper closed early: another function starts
        _edit(3, 1, ["static int helper(int x, int z) {"]),  # the first line of a function
        _edit(9, 1, ["T thrice("]),  # its name, on a line of its own
        _edit(10, 1, ["    const T* data, // the input"]),  # a parameter of a multi-line signature
        _edit(4, 0, ["#if 0", "  }", "#endif"]),  # a preprocessor branch
        _edit(4, 0, ["  /* a comment", "  } */"]),  # a block comment over lines
        _edit(4, 0, ["  y += 1; \\\r", "  y += 2;"]),  # a continued line (a CRLF file's)
        _edit(1, 0, ["#include <map>"]),  # outside every function
    ],
    ids=["new-function", "split", "first-line", "renamed", "parameter", "preprocessor", "block-comment",
         "continued-crlf", "outside"],
)
def test_changes_that_may_move_bounds_are_parsed(head):
    assert _shift(head) is None


STATEMENTS = ["  x += 1;", "  if (x) {", "  }", "  } else {", "  for (;;) { break; }", "  return;", "  // }", ""]


@settings(max_examples=200, deadline=None)
@given(
    at=st.integers(min_value=1, max_value=len(LINES) - 1),
    remove=st.integers(min_value=0, max_value=2),
    insert=st.lists(st.sampled_from(STATEMENTS), max_size=3),
)
def test_moved_extents_are_never_wrong(at, remove, insert):
    head = _edit(at, remove, insert)
    if head == BASE:
        return
    moved = _shift(head)
    if moved is not None:
        assert _extents(moved) == _extents(parse_extents("cpp", "k.cpp", head.encode()))
