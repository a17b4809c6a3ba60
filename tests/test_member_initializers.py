"""A constructor runs its data members' constructors from its initializer list: ``: guard_(keys)``
on a member declared ``c10::impl::ExcludeGuard guard_;`` calls ``ExcludeGuard``'s constructor
(``at::AutoDispatchBelowADInplaceOrView`` holds a ``c10::impl::ExcludeDispatchKeyGuard``), not a
function named ``guard_``; a member of a type no class of the index has (``int``) calls nothing."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link

SOURCE = """
namespace c10::impl {
class ExcludeGuard {
 public:
  ExcludeGuard(int keys);
 private:
  int keys_;
};
ExcludeGuard::ExcludeGuard(int keys) : keys_(keys) {
  set_excluded(keys);
}
}
namespace at {
struct AutoBelow {
  AutoBelow()
      : guard_(3), count_{2} {}
  c10::impl::ExcludeGuard guard_;
  int count_;
};
struct AutoBraced {
  AutoBraced() : guard_{4} {}
  c10::impl::ExcludeGuard guard_;
};
}
"""


def facts() -> FileFacts:
    out = file_facts("cpp", "c10/core/Guards.h", textwrap.dedent(SOURCE).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_a_member_initializer_calls_the_members_constructor():
    calls = {(c.callee_name, c.qualifier, c.line) for c in facts().calls}
    assert ("ExcludeGuard", "c10::impl", 15) in calls
    assert ("ExcludeGuard", "c10::impl", 20) in calls  # brace-initialized
    assert not {name for name, _, _ in calls} & {"guard_", "keys_", "count_", "int"}


def test_the_constructor_links_to_the_members_constructor():
    tables = link([facts()], [], [], [], {}, [])
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    edges = {(name[caller], name[callee]) for caller, callee, _, _ in tables.rows["call_edges"]}
    assert ("at::AutoBelow::AutoBelow", "c10::impl::ExcludeGuard::ExcludeGuard") in edges
    assert ("at::AutoBraced::AutoBraced", "c10::impl::ExcludeGuard::ExcludeGuard") in edges
