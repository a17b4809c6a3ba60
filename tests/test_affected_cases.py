"""`perfq affected` on our own labelled PyTorch 2.6.0 cases (tests/data/affected_cases.json).

Each case is an edit of one corpus file (hub kernels, composites over hubs, header templates,
quantized paths, comment/whitespace-only no-ops, ops without a benchmark). The index is built
once per session on a shared clone of the corpus (the corpus itself is not written); every
case is committed there and `perfq affected <base> --format json` must select every expected
benchmark, nothing outside expected + acceptable, and nothing at all for no-op and negative
cases. Marked ``corpus``: deselect with ``-m "not corpus"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.affected_cases import (
    CORPUS,
    Case,
    CaseError,
    Edit,
    EditKind,
    Scratch,
    case_lines,
    commit_case,
    edited_lines,
    failures,
    load_cases,
    run_affected,
    score,
)

CASES = load_cases()
HELDOUT = load_cases(Path(__file__).parents[1] / "bench" / "pytorch-heldout-cases.json")  # bench/eval_cases.py --cases
needs_corpus = pytest.mark.skipif(not (CORPUS / ".git").exists(), reason="PyTorch 2.6.0 corpus not fetched")


def test_cases_cover_the_classes():
    classes = {case.klass for case in CASES}
    assert {"hub-kernel", "composite-over-hub", "comment-in-function", "comment-outside-function",
            "whitespace", "header-template", "quantized-path", "negative"} <= classes
    assert len({case.id for case in CASES}) == len(CASES) >= 12
    for case in CASES:
        no_token = (EditKind.comment, EditKind.whitespace, EditKind.reformat)
        assert case.no_op == all(edit.kind in no_token for edit in case.edits), case.id
        assert not set(case.expected_benchmarks) & set(case.acceptable_benchmarks), case.id


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("case", CASES + HELDOUT, ids=[case.id for case in CASES + HELDOUT])
def test_edit_applies_to_the_corpus(case: Case):
    lines = (CORPUS / case.file).read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
    new = case_lines(lines, case)
    assert new != lines


def test_reformat_that_changes_a_token_is_refused():
    lines = ["int f(int a) {\n", "  return g(a,\n", "           1);\n", "}\n"]
    ok = Edit(EditKind.reformat, r"return g\(a,$", replacement="  return g(a, 1);", count=2)
    assert edited_lines(lines, ok)[1] == "  return g(a, 1);\n"
    with pytest.raises(CaseError):
        edited_lines(lines, Edit(EditKind.reformat, r"return g\(a,$", replacement="  return g(a, 2);", count=2))
    with pytest.raises(CaseError):
        edited_lines(lines, Edit(EditKind.comment, r"return g", text="  a += 1;"))
    with pytest.raises(CaseError):
        edited_lines(lines, Edit(EditKind.insert_after, r"\(", text="x"))


def test_score_counts_canary_sets_and_no_op_reports():
    hub = next(case for case in CASES if case.id == "hub-cat-serial-kernel")
    doc = {"benchmarks": [{"name": "cat_test", "file": "benchmarks/operator_benchmark/pt/cat_test.py"}],
           "canary": [{"set": "broad", "benchmarks": [{"name": "stack_test"}, {"name": "softmax_test"}]}],
           "ops": ["cat.out"]}
    result = score(hub, doc)
    assert result.selected == ("cat_test", "softmax_test", "stack_test")
    assert result.missed == ("qcat_test", "qrnn_test") and result.extra == ("softmax_test",)
    assert result.recall == 0.5
    no_op = next(case for case in CASES if case.no_op)
    assert failures(no_op, score(no_op, {"benchmarks": [], "no_op_changes": [{"file": no_op.file}]})) == []
    assert failures(no_op, score(no_op, {"benchmarks": []})) == ["the change is not reported under no_op_changes"]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_affected_case(case: Case, corpus_scratch: Scratch):
    commit_case(corpus_scratch, case)
    doc, wall = run_affected(corpus_scratch)
    result = score(case, doc, wall)
    problems = failures(case, result)
    assert not problems, f"{case.id}: {'; '.join(problems)} (selected: {', '.join(result.selected) or 'nothing'})"


def test_a_splice_replaces_lines_below_its_anchor_and_a_case_applies_its_edits_from_the_last():
    lines = ["int f(int a) {\n", "  int b = a;\n", "  return b;\n", "}\n", "int g() {\n", "  return 1;\n", "}\n"]
    first = Edit(EditKind.splice, r"^int f\(int a\) \{$", offset=1, count=2, lines=("  return a + 0;",))
    second = Edit(EditKind.splice, r"^int g\(\) \{$", offset=1, count=0, lines=("  // two", "  (void)0;"))
    case = Case("c", "k", "f.cpp", (first, second), "f", (), (), (), False, False, "")
    assert case_lines(lines, case) == [
        "int f(int a) {\n", "  return a + 0;\n", "}\n",
        "int g() {\n", "  // two\n", "  (void)0;\n", "  return 1;\n", "}\n",
    ]
