"""Globs matched literal-first (common/globs.py) agree with fnmatch on any pattern and string,
and a pattern no string can match is never compiled."""

from __future__ import annotations

import fnmatch

from hypothesis import given, settings
from hypothesis import strategies as st

from common import globs

TEXT = st.text(alphabet="ab/._", max_size=12)
PATTERN = st.text(alphabet="ab/._*?[]!", max_size=10)


@settings(max_examples=400, deadline=None)
@given(strings=st.lists(TEXT, max_size=5), pattern=PATTERN)
def test_matching_agrees_with_fnmatch(strings, pattern):
    assert globs.matching(strings, pattern) == [s for s in strings if fnmatch.fnmatchcase(s, pattern)]
    assert [s for s in strings if globs.match(s, pattern)] == globs.matching(strings, pattern)
    rooted = ["/" + s for s in strings]
    expected = [r for r in rooted if fnmatch.fnmatchcase(r, pattern) or fnmatch.fnmatchcase(r[1:], pattern)]
    assert globs.matching(rooted, pattern, rooted=True) == expected


def test_a_pattern_whose_text_no_string_holds_is_not_compiled():
    globs._expression.cache_clear()
    assert not globs.match("aten/src/ATen/native/cpu/SoftMaxKernel.cpp", "c10/core/CPUAllocator*")
    assert globs._expression.cache_info().currsize == 0
    assert globs.match("c10/core/CPUAllocator.cpp", "c10/core/CPUAllocator*")
    assert globs._expression.cache_info().currsize == 1
