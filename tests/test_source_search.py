"""The extractor's anchored searches (indexer/source_text.py): ``at_word_start`` and
``at_line_start`` find exactly what ``finditer`` of the pattern behind a leading ``\\b`` or
``^[ \\t]*`` (``re.M``) finds, on any text, while letting the engine search for the pattern's
literal (the extractor's regexes that used ``\\b``/``^`` tried every offset)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer import cpp_local_names, registrations
from indexer.source_text import at_line_start, at_word_start

# texts made of the pieces the patterns care about: words glued to the keywords, blanks, newlines,
# line splices, '#'s mid-line and at a line's start
PIECES = st.sampled_from([
    "using", "xusing", "_using", "typedef", "é", "typedef3", " ", "\t", "\n", "\\\n", "#", "  #", "define", "#define",
    "F(a, b)", " = ", "ns::", "T", "<int>", ";", "(", ")", "x", "1", "DEFINE_DISPATCH", "REGISTER_DISPATCH",
    "ALSO_REGISTER_AVX512_DISPATCH", "REGISTER_NO_CPU_DISPATCH", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY", "_",
])
TEXTS = st.lists(PIECES, max_size=40).map("".join)
WORD_PATTERNS = [cpp_local_names._USING, cpp_local_names._TYPEDEF, registrations._STUB_DECL,
                 registrations._STUB_REG, registrations._LIBRARY]


def _found(matches) -> list[tuple]:
    return [(m.start(), m.end(), m.groups()) for m in matches]


@settings(max_examples=300, deadline=None, database=None)
@given(TEXTS)
def test_at_word_start_finds_what_a_leading_word_boundary_finds(text: str):
    for pattern in WORD_PATTERNS:
        bounded = re.compile(r"\b" + pattern.pattern)
        assert _found(at_word_start(pattern, text)) == _found(bounded.finditer(text))


@settings(max_examples=300, deadline=None, database=None)
@given(TEXTS)
def test_at_line_start_finds_what_a_line_anchor_finds(text: str):
    pattern = cpp_local_names._DEFINE
    anchored = re.compile(r"^[ \t]*" + pattern.pattern, re.M)
    ours = [(m.end(), m.groups()) for m in at_line_start(pattern, text)]
    assert ours == [(m.end(), m.groups()) for m in anchored.finditer(text)]


def test_a_keyword_inside_a_word_is_not_found_and_the_one_after_it_is():
    text = "myusing A = B; using C = ns::D<int>;\nx = 1; #define F(a) g(a)\n  #define G(b) h(b)\n"
    assert [m.group(1) for m in at_word_start(cpp_local_names._USING, text)] == ["C"]
    assert [m.group(1) for m in at_line_start(cpp_local_names._DEFINE, text)] == ["G"]
