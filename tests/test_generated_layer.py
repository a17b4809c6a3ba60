"""The C++ the code generators emit into every operator's generated wrapper runs in every operator
that has one (issue 40, round six s01): the generated files (VariableType_*.cpp) are not in the
tree, but their templates and generators are. A class the template declares a variable of
(``at::AutoBelow guard;``) means its constructor, and what that constructor calls (its members'
constructors, from its initializer list) runs too: a change there is shared infrastructure, the
executed-by-all kind, explained by the template that names it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import duckdb
import pytest

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.generated_layer import TemplateNames, cpp_texts, names_in, read_templates
from indexer.link import link
from indexer.rules.generated_layer import layer_rows
from tests.aten_fixture import FILES, commit_all, git, perfq, replace_in, write_tree
from tests.test_affected_sampled import _affected_after

GUARD_H = """\
    #pragma once
    namespace c10::impl {
    class ExcludeGuard {
     public:
      ExcludeGuard(int keys);
     private:
      int keys_;
    };
    }
    namespace at {
    struct AutoBelow {
      AutoBelow() : guard_(3) {}
      c10::impl::ExcludeGuard guard_;
    };
    }
    """
GUARD_CPP = """\
    #include <c10/core/impl/Guards.h>
    namespace c10::impl {
    ExcludeGuard::ExcludeGuard(int keys) : keys_(keys) {
      if (keys != 0) {
        set_excluded(keys);
      }
    }
    void unrelated_helper(int keys) {
      set_excluded(keys + 1);
    }
    }
    """
TEMPLATE = """\
    #include <c10/core/impl/Guards.h>
    // ${generated_comment}
    namespace torch::autograd::VariableType {
    ${type_derived_method_definitions}
    }
    """
GENERATOR = '''\
    GUARD = "at::AutoBelow guard;"
    CALL = CodeTemplate("""\\
    ${guard}
    return at::redispatch::${api_name}(${args});
    """)
    '''
# a backend's helper the generated structured wrappers call (RegisterCPU.cpp's create_out), named
# with the backend as a placeholder through a variable the generator binds
EMPTY_CPP = """\
    namespace at::detail {
    namespace {
    int GetAllocatorMaybePinned(bool pin) {
      if (pin) {
        return 1;
      }
      return 2;
    }
    }
    int cuda_alloc(bool pin) {
      if (pin) {
        return 3;
      }
      return 4;
    }
    struct KeySet {
      KeySet(int key) : repr_(key) {}
      KeySet(bool full) : repr_(full ? -1 : 0) {}
      int repr_;
    };
    int empty_cpu(int size, bool pin) {
      int a = GetAllocatorMaybePinned(pin);
      KeySet ks(1);
      return size + a + ks.repr_;
    }
    int empty_cuda(int size, bool pin) {
      return size + cuda_alloc(pin);
    }
    }
    """
REGISTER = '''\
    def gen_empty_impl_names(backend_index):
        dispatch = str(backend_index.dispatch_key).lower()
        empty_impl = f"at::detail::empty_{dispatch}"
        return empty_impl


    def gen_create_out_helper(backend_index):
        empty_impl = gen_empty_impl_names(backend_index)
        return [f"""
    Tensor create_out(IntArrayRef sizes, const TensorOptions &options) {{
      return {empty_impl}(sizes, options);
    }}
    """]
    '''
FIXTURE = {
    **FILES,
    "c10/core/impl/Guards.h": GUARD_H,
    "c10/core/impl/Guards.cpp": GUARD_CPP,
    "tools/autograd/templates/VariableType.cpp": TEMPLATE,
    "tools/autograd/gen_variable_type.py": GENERATOR,
    "aten/src/ATen/EmptyTensor.cpp": EMPTY_CPP,
    "torchgen/dest/register_dispatch_key.py": REGISTER,
}


def test_the_names_of_the_generators_cpp_are_read():
    pieces = cpp_texts("tools/autograd/gen_variable_type.py", textwrap.dedent(GENERATOR))
    names = {(n.kind, n.name) for first, text in pieces for n in names_in("g.py", first, text)[0]}
    assert ("type", "at::AutoBelow") in names
    assert not any("redispatch" in name for _, name in names)  # a placeholder's call names nothing
    _, includes = names_in("t.cpp", 1, textwrap.dedent(TEMPLATE))
    assert includes == ["c10/core/impl/Guards.h"]


def _facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_the_layer_is_the_named_constructor_and_its_members_constructors(tmp_path):
    write_tree(tmp_path, {k: FIXTURE[k] for k in ("tools/autograd/templates/VariableType.cpp",
                                                   "tools/autograd/gen_variable_type.py")})
    templates = read_templates(tmp_path, ("tools/autograd/templates/*.cpp", "tools/autograd/gen_*.py"))
    files = [_facts("c10/core/impl/Guards.h", GUARD_H), _facts("c10/core/impl/Guards.cpp", GUARD_CPP)]
    tables = link(files, [], [], [], {}, [], templates=templates)
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    layer = {(name[fid], source, depth) for fid, source, _, _, depth in tables.rows["generated_layer"]}
    assert layer == {
        ("at::AutoBelow::AutoBelow", "tools/autograd/gen_variable_type.py", 0),
        ("c10::impl::ExcludeGuard::ExcludeGuard", "tools/autograd/gen_variable_type.py", 1),
    }
    assert link(files, [], [], [], {}, [], templates=TemplateNames((), ())).rows["generated_layer"] == []


def test_a_name_with_a_placeholder_is_the_target_builds_backend_helper_and_what_it_calls(tmp_path):
    write_tree(tmp_path, {"torchgen/dest/register_dispatch_key.py": REGISTER})
    templates = read_templates(tmp_path, ("torchgen/dest/*.py",))
    assert ("call", "at::detail::empty_{}") in {(n.kind, n.name) for n in templates.names}
    files = [_facts("aten/src/ATen/EmptyTensor.cpp", EMPTY_CPP)]
    tables = link(files, [], [], [], {}, [], templates=templates)
    name = {row[0]: row[2] for row in tables.rows["functions"]}
    layer = {(name[fid], named, depth) for fid, _, _, named, depth in tables.rows["generated_layer"]}
    # a CPU build: RegisterCUDA.cpp is not compiled, its helper and the allocator it calls are no
    # layer; nor is a call resolved to every overload of a name (KeySet's constructors)
    assert layer == {
        ("at::detail::empty_cpu", "at::detail::empty_{}", 0),
        ("at::detail::(anonymous namespace)::GetAllocatorMaybePinned", "at::detail::empty_{}", 1),
    }


def test_a_placeholder_that_is_a_whole_part_of_the_name_names_nothing_and_one_stands_for_a_backend():
    code = "return at::redispatch::${api_name}(ks, self); at::meta::${name}_out(x); ${ns}::structured_${op}(y);"
    names = names_in("g.py", 1, code)[0]
    assert [n.name for n in names] == ["at::meta::{}_out"]
    functions = [(0, 0, "at::meta::add_out", "add_out"), (1, 0, "at::meta::cpu_out", "cpu_out")]
    # an operator's name in the placeholder is one operator's function, not what every wrapper runs
    assert [r[0] for r in layer_rows(tuple(names), (), functions, ["a.cpp"], [])] == [1]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_tree(tmp_path_factory.mktemp("layer"), FIXTURE)
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "base")
    proc = perfq(root, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    return root


def _layer_canaries(doc: dict) -> list[dict]:
    """The ``generated-wrapper`` canary sets of an ``affected`` document."""
    return [c for c in doc["canary"] if c["set"] == "generated-wrapper"]


def test_a_change_to_a_members_constructor_is_shared_infrastructure(repo):
    doc = _affected_after(repo, "c10/core/impl/Guards.cpp", "if (keys != 0) {", "if (keys >= 0) {")
    assert doc["shared_infrastructure"]
    layer = _layer_canaries(doc)
    assert len(layer) == 1
    assert "tools/autograd/gen_variable_type.py" in layer[0]["trigger"] and "AutoBelow" in layer[0]["trigger"]


def test_a_function_no_wrapper_runs_is_not(repo):
    doc = _affected_after(repo, "c10/core/impl/Guards.cpp", "set_excluded(keys + 1);", "set_excluded(keys + 2);")
    assert not _layer_canaries(doc)
    assert not doc["shared_infrastructure"]


def test_a_change_to_what_a_backend_helper_calls_is_shared_infrastructure(repo):
    doc = _affected_after(repo, "aten/src/ATen/EmptyTensor.cpp", "return 1;", "return 5;")
    assert doc["shared_infrastructure"]
    layer = _layer_canaries(doc)
    assert len(layer) == 1
    assert "torchgen/dest/register_dispatch_key.py" in layer[0]["trigger"] and "empty_{}" in layer[0]["trigger"]


def test_another_backends_helper_is_not(repo):
    doc = _affected_after(repo, "aten/src/ATen/EmptyTensor.cpp", "return 3;", "return 6;")
    assert not _layer_canaries(doc)


def test_a_patch_of_a_layer_file_leaves_the_layer_as_a_full_link_makes_it(repo, tmp_path):
    def layer(db: Path) -> list[tuple]:
        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute("SELECT f.qualname, g.source, g.depth FROM generated_layer g"
                               " JOIN functions f ON f.id = g.function_id ORDER BY ALL").fetchall()

    patched = tmp_path / "patched.duckdb"
    assert perfq(repo, "index", "-q", "--db", str(patched)).returncode == 0
    git(repo, "checkout", "-q", "-b", "patched")
    try:
        replace_in(repo, "c10/core/impl/Guards.h", "AutoBelow() : guard_(3) {}", "AutoBelow() {}")
        assert perfq(repo, "index", "-q", "--db", str(patched)).returncode == 0  # in place, or re-linked
        full = tmp_path / "full.duckdb"
        assert perfq(repo, "index", "-q", "--full", "--db", str(full)).returncode == 0
        assert layer(patched) == layer(full)
        assert ("c10::impl::ExcludeGuard::ExcludeGuard", "tools/autograd/gen_variable_type.py", 1) not in layer(full)
    finally:
        git(repo, "checkout", "-q", "-f", "main")
        git(repo, "branch", "-q", "-D", "patched")
