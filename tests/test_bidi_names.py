"""Issue 37 (low): a right-to-left override (U+202E) in a test name reached the PR comment, where it
makes the name read differently from what it is. Untrusted names lose every bidirectional control
on their way to a terminal, markdown or HTML."""

from __future__ import annotations

import pytest

from common.render import html_text, md_code, md_text, plain
from perfq.ci.comment import report_body

BIDI = ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
        "\u061c"]


@pytest.mark.parametrize("control", BIDI)
def test_bidirectional_controls_never_reach_any_output(control):
    name = f"add_M8_{control}upc_dda"
    for render in (plain, md_text, md_code, html_text):
        assert control not in render(name)
    assert plain(name) == "add_M8_upc_dda"


def test_a_pr_comment_shows_the_name_without_its_override():
    body = report_body("affected", None, 1, "", missing=("softmax\u202e_test",))
    assert "\u202e" not in body and "`softmax_test`" in body
