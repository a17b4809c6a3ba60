"""Virtual calls through a class hierarchy: a call of a method declared ``virtual`` in a base
class (``packed->apply(x)`` on a ``intrusive_ptr<PackedBase>``) reaches the overrides of the
method in every class deriving from the receiver's class, directly or not (call_edges kind
``virtual``, reach_edges ``virtual_call`` naming the override's class). The receiver's declared
type picks the base; an unknown one takes the bases the calling file sees. A base with more
overriding classes than VIRTUAL_HUB is a hub: not followed, and a link warning says so. A patch
adding an override links the existing virtual callers into it; a change of the hierarchy re-links."""

from __future__ import annotations

import textwrap
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from indexer.cpp_fallback import class_bases, text_structure
from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.link_cpp import VIRTUAL_HUB
from query.affected import _layouts_from_paths
from query.reach import Reach
from tests.aten_fixture import make_repo, replace_in, write_tree


def facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


BASES = """
namespace at::native {
struct TORCH_API PackedBase : public torch::CustomClassHolder {
  virtual at::Tensor apply(at::Tensor input, bool relu = false) = 0;
  virtual ~PackedBase() = default;
  int rows() const;
};
template <int kDim>
struct ConvBase : torch::CustomClassHolder {
  virtual at::Tensor apply(const at::Tensor& input) = 0;
};
}
"""

IMPLS_H = """
#include "ATen/native/quantized/Packed.h"
namespace at::native {
struct PackedFast final : public PackedBase {
  at::Tensor apply(at::Tensor input, bool relu = false) override;
};
struct PackedSlow : PackedBase {
  at::Tensor apply(at::Tensor input, bool relu = false) override { return input; }
};
struct PackedSlower : PackedSlow {
  at::Tensor apply(at::Tensor input, bool relu) override;
};
template <int kDim>
struct ConvFast : public ConvBase<kDim> {
  at::Tensor apply(const at::Tensor& input) override;
};
struct Unrelated {
  at::Tensor apply(at::Tensor input) { return input; }
};
}
"""

IMPLS_CPP = """
#include "ATen/native/quantized/cpu/impls.h"
namespace at::native {
at::Tensor PackedFast::apply(at::Tensor input, bool relu) { return fast_rows(input); }
at::Tensor PackedSlower::apply(at::Tensor input, bool relu) { return input; }
template <int kDim>
at::Tensor ConvFast<kDim>::apply(const at::Tensor& input) { return input; }
}
"""

CELLS = """
#include "ATen/native/quantized/Packed.h"
namespace at::native {
struct CellParams {
  at::Tensor linear(const at::Tensor& x) const {
    return packed_w->apply(x, false);
  }
  c10::intrusive_ptr<PackedBase> packed_w;
};
at::Tensor typed(const c10::intrusive_ptr<PackedBase>& w, const at::Tensor& x) {
  return w->apply(x);
}
at::Tensor typed_conv(const c10::intrusive_ptr<ConvBase<2>>& w, const at::Tensor& x) {
  return w->apply(x);
}
at::Tensor qualified(PackedSlow& w, const at::Tensor& x) {
  return w.PackedSlow::apply(x, false);
}
at::Tensor from_slow(PackedSlow& w, const at::Tensor& x) {
  return w.apply(x, false);
}
}
"""

PATHS = {
    "aten/src/ATen/native/quantized/Packed.h": BASES,
    "aten/src/ATen/native/quantized/cpu/impls.h": IMPLS_H,
    "aten/src/ATen/native/quantized/cpu/impls.cpp": IMPLS_CPP,
    "aten/src/ATen/native/RNNCells.cpp": CELLS,
}


def linked(extra: dict[str, str] | None = None):
    files = [facts(p, s) for p, s in {**PATHS, **(extra or {})}.items()]
    return link(files, [], [], [], {}, [])


def callees(tables, caller_suffix: str, kind: str | None = None) -> set[str]:
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    return {
        name[callee]
        for caller, callee, k, _ in tables.rows["call_edges"]
        if name[caller].endswith(caller_suffix) and (kind is None or k == kind)
    }


def test_class_heads_give_their_bases():
    assert class_bases("struct TORCH_API D final : public ns::B<T, U<int>>, private virtual C ") == ("ns::B", "C")
    assert class_bases("template <typename T> class D : T ") == ("T",)
    assert class_bases("struct S ") == ()


def test_class_bodies_give_their_virtual_and_overriding_methods():
    _, classes, _ = text_structure(textwrap.dedent(BASES) + textwrap.dedent(IMPLS_H))
    by_name = {c.qualname: c for c in classes}
    assert by_name["at::native::PackedBase"].virtuals == ("apply", "~PackedBase")
    assert by_name["at::native::PackedBase"].bases == ("torch::CustomClassHolder",)
    assert by_name["at::native::PackedSlower"].bases == ("PackedSlow",)
    assert by_name["at::native::PackedSlow"].virtuals == ("apply",)  # defined in its body, override
    assert "at::native::Unrelated" not in by_name  # no base, nothing virtual: not recorded


def test_a_virtual_call_on_a_field_takes_the_fields_declared_type():
    tables = linked()
    expected = {
        "at::native::PackedFast::apply",
        "at::native::PackedSlow::apply",
        "at::native::PackedSlower::apply",  # through PackedSlow: overrides at any depth
    }
    # packed_w is a c10::intrusive_ptr<PackedBase>: not ConvBase's apply, though the file sees it
    assert callees(tables, "CellParams::linear", "virtual") == expected
    assert "at::native::Unrelated::apply" not in callees(tables, "CellParams::linear")


OUT_OF_LINE = """
#include "ATen/native/quantized/Packed.h"
#include "ATen/native/RNNCells.h"
namespace at::native {
at::Tensor CellParams::linear_hh(const at::Tensor& x) const {
  return packed_hh->apply(x);
}
at::Tensor CellParams::shadowed(const at::Tensor& x) const {
  c10::intrusive_ptr<ConvBase<2>> packed_w = conv_weight();
  return packed_w->apply(x);
}
}
"""


def test_a_member_whose_class_the_file_does_not_show_reaches_every_override_the_file_can_see():
    # CellParams is defined in a header: its members' types are not read from this file
    tables = linked({"aten/src/ATen/native/RNNCellsMore.cpp": OUT_OF_LINE})
    assert callees(tables, "CellParams::linear_hh", "virtual") == {
        "at::native::PackedFast::apply",
        "at::native::PackedSlow::apply",
        "at::native::PackedSlower::apply",
        "at::native::ConvFast::apply",  # ConvBase declares apply too, and the file sees it
    }
    # a local variable named like a member is the local's type
    assert callees(tables, "CellParams::shadowed", "virtual") == {"at::native::ConvFast::apply"}


def test_class_bodies_give_their_members_declared_types():
    _, _, fields = text_structure(textwrap.dedent(CELLS) + textwrap.dedent("""
        struct Holder {
         public:
          static constexpr int kRows = 4;
          std::unique_ptr<ConvBase<2>> conv_ = nullptr;
          const at::Tensor& weight_;
          at::Tensor bias_[2];
          using Ptr = std::shared_ptr<Holder>;
          friend struct Other;
          at::Tensor run(const at::Tensor& x) const;
          int rows() const { return kRows; }
        };
    """))
    assert fields["at::native::CellParams"] == {"packed_w": "c10::intrusive_ptr<PackedBase>"}
    assert fields["Holder"] == {
        "kRows": "int", "conv_": "std::unique_ptr<ConvBase<2>>", "weight_": "at::Tensor&",
        "bias_": "at::Tensor",
    }


def test_the_receivers_declared_type_picks_the_base():
    tables = linked()
    assert callees(tables, "native::typed", "virtual") == {
        "at::native::PackedFast::apply", "at::native::PackedSlow::apply", "at::native::PackedSlower::apply"
    }
    assert callees(tables, "native::typed_conv", "virtual") == {"at::native::ConvFast::apply"}
    # a subclass's type: its override and those below it, not its siblings
    assert callees(tables, "native::from_slow") == {"at::native::PackedSlow::apply", "at::native::PackedSlower::apply"}


def test_a_qualified_call_names_its_definition_without_dispatch():
    assert not callees(linked(), "native::qualified", "virtual")


def test_the_chain_says_virtual_call_and_the_overrides_class():
    tables = linked()
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    details = {
        (name[dst], detail) for dst, src, kind, detail in tables.rows["reach_edges"]
        if kind == "virtual_call" and name.get(src, "").endswith("CellParams::linear")
    }
    assert ("at::native::PackedFast::apply", "virtual call, override in PackedFast (line 5)") in details
    assert tables.rows["class_bases"] and tables.rows["virtual_methods"]


def test_a_base_with_many_overriding_classes_is_a_hub_and_says_so():
    many = "".join(
        f"struct Impl{i} : PackedBase {{\n"
        "  at::Tensor apply(at::Tensor input, bool relu) override { return input; }\n};\n"
        for i in range(VIRTUAL_HUB + 1)
    )
    tables = linked({"aten/src/ATen/native/quantized/cpu/many.h": f"namespace at::native {{\n{many}}}\n"})
    assert not callees(tables, "native::typed", "virtual")
    hubs = [w for w in tables.warnings if "a hub" in w[2]]
    # with the 3 other PackedBase classes
    assert len(hubs) == 1 and "apply()" in hubs[0][2] and f"{VIRTUAL_HUB + 4} classes" in hubs[0][2]


# ---- the patch path

@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "repo")
    write_tree(root, PATHS)
    return root


def _virtual_rows(db: Path) -> tuple[set, set]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        edges = set(con.execute(
            "SELECT a.qualname, b.qualname, e.kind FROM call_edges e JOIN functions a ON a.id = e.caller_id"
            " JOIN functions b ON b.id = e.callee_id"
        ).fetchall())
        reach = set(con.execute("SELECT kind, detail FROM reach_edges WHERE kind = 'virtual_call'").fetchall())
    finally:
        con.close()
    return edges, reach


def test_an_override_added_by_a_patch_gets_the_virtual_callers_a_full_link_gives(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(
        repo, "aten/src/ATen/native/quantized/cpu/impls.cpp", "template <int kDim>\n",
        "at::Tensor PackedSlow::helper(at::Tensor input) { return input; }\ntemplate <int kDim>\n",
    )
    replace_in(  # the new override: a body edit of a file whose class hierarchy stays
        repo, "aten/src/ATen/native/quantized/cpu/impls.cpp", "namespace at::native {\n",
        "namespace at::native {\nat::Tensor PackedSlower::apply(at::Tensor input) { return input; }\n",
    )
    report = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert report.mode == "patched"
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True)
    assert _virtual_rows(db) == _virtual_rows(full)
    edges, _ = _virtual_rows(db)
    into_new = {(a, k) for a, b, k in edges if b == "at::native::PackedSlower::apply"}
    assert ("at::native::typed", "virtual") in into_new


def _virtual_reach(db: Path) -> list[tuple]:
    """Every virtual-call reachability edge, by its functions' names, duplicates kept."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(con.execute(
            "SELECT a.qualname, b.qualname, e.detail FROM reach_edges e JOIN functions a ON a.id = e.src"
            " JOIN functions b ON b.id = e.dst WHERE e.kind = 'virtual_call'"
        ).fetchall())
    finally:
        con.close()


def test_a_patch_of_a_virtual_caller_s_file_keeps_one_edge_per_virtual_call(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    cells = "aten/src/ATen/native/RNNCells.cpp"
    replace_in(repo, cells, "  return w->apply(x);\n}\nat::Tensor typed_conv",
               "  return w->apply(x);  // unchanged code\n}\nat::Tensor typed_conv")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True)
    assert any(src == "at::native::typed" for src, _, _ in _virtual_reach(full))
    assert _virtual_reach(db) == _virtual_reach(full)


def test_a_changed_hierarchy_is_linked_again(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    header = "aten/src/ATen/native/quantized/cpu/impls.h"
    replace_in(repo, header, "struct Unrelated {", "struct Unrelated : PackedBase {")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "linked"
    edges, _ = _virtual_rows(db)
    assert ("at::native::typed", "at::native::Unrelated::apply", "virtual") in edges


SPARSE = """
namespace ao::sparse {
struct PackedBase {
  virtual at::Tensor apply(const at::Tensor& input) = 0;
};
struct SparseImpl : public PackedBase {
  at::Tensor apply(const at::Tensor& input) override { return input; }
};
at::Tensor sparse_run(const c10::intrusive_ptr<PackedBase>& w, const at::Tensor& x) {
  return w->apply(x);
}
}
"""


def test_a_base_is_looked_up_from_its_classs_namespace_outwards():
    """Two bases share a name in two namespaces: each subclass derives from its own namespace's."""
    tables = linked({"aten/src/ATen/native/ao_sparse/packed.h": SPARSE})
    assert callees(tables, "native::typed", "virtual") == {
        "at::native::PackedFast::apply", "at::native::PackedSlow::apply", "at::native::PackedSlower::apply"
    }
    assert callees(tables, "sparse::sparse_run", "virtual") == {"ao::sparse::SparseImpl::apply"}
    assert "ao::sparse::SparseImpl::apply" not in callees(tables, "CellParams::linear")  # its file is not included


@pytest.mark.parametrize("edge, layouts", [("call", {"quantized_lstm": {"quantized"}}), ("virtual_call", {})])
def test_quantized_code_reached_through_a_virtual_call_keeps_the_operators_layouts(edge: str, layouts: dict):
    """Quantized code reached from a general kernel through a call runs on quantized tensors only
    (a branch on the layout); through a virtual call it runs whatever the tensors (packed weights)."""
    own = Reach(
        parent={2: (1, edge, "line 416"), 3: (2, "library_impl", "CPU")},
        kind={1: "function", 2: "function", 3: "op"},
        key={3: "quantized_lstm"},
    )
    paths = {1: "aten/src/ATen/native/quantized/cpu/qlinear_dynamic.cpp", 2: "aten/src/ATen/native/RNN.cpp"}
    assert _layouts_from_paths(own, paths) == layouts
