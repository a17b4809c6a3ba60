"""Python references: names resolved through imports and re-exports to indexed functions, or
to the operators they run (torch.add, F.relu, x.add, torch.ops.aten.add.Tensor); a class's
methods (a class that is used runs them) and its subclasses (a base class reaches them)."""

from __future__ import annotations

import re
from collections import defaultdict

from indexer.rules.base import HUB_METHODS, HUB_SUBCLASSES, LinkContext, Phase, PythonResolver, Rule, op_key
from schema.model import CallKind, EdgeKind, FunctionRow, Lang

_MEMBER_OF = CallKind.MEMBER_OF
_MEMBER = CallKind.MEMBER
_PYTHON_FILE = Lang.PYTHON
_TORCH_OPS = re.compile(r"torch(?:\._ops)?\.ops\.(\w+)\.(\w+)(?:\.(\w+))?$")  # torch.ops.aten.add.Tensor
# Python prefixes whose attributes are ATen operators (torch.foo, F.foo, torch._C._nn.foo...)
_OP_PREFIXES = {
    "torch": "",
    "torch.Tensor": "",
    "torch._C._VariableFunctions": "",
    "torch._C._nn": "",
    "torch.nn.functional": "",
    "torch._C._TensorBase": "",
    "torch._C.TensorBase": "",
    "torch.special": "special_",
    "torch._C._special": "special_",
    "torch.linalg": "linalg_",
    "torch._C._linalg": "linalg_",
    "torch.fft": "fft_",
    "torch._C._fft": "fft_",
    "torch.nested": "nested_",
    "torch._C._nested": "nested_",
    "torch.sparse": "sparse_",
}
# methods that build, copy, convert or print a module, not run it: a benchmark that uses a
# class (runs its forward) is not affected through them
_SETUP_METHODS = frozenset(
    {
        "__init__",
        "__new__",
        "reset_parameters",
        "_reset_parameters",
        "extra_repr",
        "__repr__",
        "__str__",
        "__getstate__",
        "__setstate__",
        "__reduce__",
        "__reduce_ex__",
        "_load_from_state_dict",
        "_save_to_state_dict",
        "state_dict",
        "load_state_dict",
        "from_float",
        "from_reference",
        "to_float",
        "_get_name",
        "__deepcopy__",
    }
)


class PythonNames(PythonResolver):
    """Python references resolved through imports and re-exports: to an indexed function
    (``function``), or to the operators they call (``ops``: torch.add, F.relu, x.add,
    torch.ops.aten.add.Tensor). Both remember their answers (the same names are used all over)."""

    def __init__(self, ctx: LinkContext) -> None:
        self.py_by_qual = ctx.py_by_qual
        self.op_by_name, self.ops_by_base = ctx.op_by_name, ctx.ops_by_base
        self.method_ops, self.library_ops = ctx.method_ops, ctx.library_ops
        self.module_aliases: dict[str, dict[str, str]] = {}
        self.module_stars: dict[str, list[str]] = {}
        for f in ctx.all_files:
            if f.lang == _PYTHON_FILE:
                mod = f.path[:-3].replace("/", ".")
                mod = mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
                self.module_aliases[mod] = dict(a.split("=", 1) for a in f.includes if "=" in a)
                self.module_stars[mod] = [m for a, m in self.module_aliases[mod].items() if a.startswith("*")]
        self.resolved: dict[str, int | None] = {}
        self.ops_found: dict[tuple[str, str], list[str]] = {}

    def function(self, dotted: str, depth: int = 0) -> int | None:
        """The indexed Python function ``dotted`` names, through the longest prefix that is a module."""
        if dotted in self.resolved:
            return self.resolved[dotted]
        self.resolved[dotted] = None
        result = self.py_by_qual.get(dotted)
        if result is None and depth < 6:
            dot = len(dotted)
            while (dot := dotted.rfind(".", 0, dot)) > 0:  # the longest prefix that is a module
                aliases = self.module_aliases.get(dotted[:dot])
                if aliases is None:
                    continue
                head, _, rest = dotted[dot + 1 :].partition(".")
                candidates = [aliases[head]] if head in aliases else []
                if not head.startswith("_"):  # `from m import *` does not bring m's private names
                    candidates += [f"{m}.{head}" for m in self.module_stars[dotted[:dot]]]
                for target in candidates:
                    result = self.function(f"{target}.{rest}" if rest else target, depth + 1)
                    if result is not None:
                        break
                break
        self.resolved[dotted] = result
        return result

    def native_module(self, qualifier: str, depth: int = 0) -> bool:
        """Is ``qualifier`` a module of an indexed package with no Python source (an extension
        module, ``torch._C``, ``torch._C._nn``): past its longest prefix that is an indexed module,
        the next name is no function, class or value that module defines or imports from Python
        source (``torch._inductor.virtualized.V.graph`` is an object's attribute)."""
        parts = qualifier.split(".")
        known = next((k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in self.module_aliases), 0)
        if not known or known == len(parts) or depth > 4:
            return False
        module, head = ".".join(parts[:known]), parts[known]
        if self.function(f"{module}.{head}") is not None:
            return False
        target = self.module_aliases[module].get(head)
        if target is None or target == f"{module}.{head}":
            return True
        return self.native_module(".".join([target, *parts[known + 1 :]]), depth + 1)

    def ops(self, dotted: str, kind: str) -> list[str]:
        """The operators a Python call or reference of ``kind`` to ``dotted`` runs."""
        found = self.ops_found.get((dotted, kind))
        if found is None:
            found = self.ops_found[(dotted, kind)] = self._ops(dotted, kind)
        return found

    def _ops(self, dotted: str, kind: str) -> list[str]:
        qual, _, name = dotted.rpartition(".")
        if kind == _MEMBER or (
            qual and qual.split(".")[0] not in self.module_aliases and "." not in qual and qual not in _OP_PREFIXES
        ):
            return self.method_ops.get(name, [])
        m = _TORCH_OPS.match(dotted)
        if m:
            ns, base, overload = m.groups()
            if ns == "aten":
                return (
                    [f"{base}.{overload}"]
                    if overload and f"{base}.{overload}" in self.op_by_name
                    else self.ops_by_base.get(base, [])
                )
            key = op_key(ns, base)
            return [key] if key in self.library_ops else []
        if qual in _OP_PREFIXES:
            return self.ops_by_base.get(_OP_PREFIXES[qual] + name, [])
        return []


def resolve_and_link_methods(ctx: LinkContext) -> None:
    """The resolver of Python names (``ctx.python``), and classes' methods (a class that is used
    runs its methods, but those that build, copy or print it), for classes with no more than
    HUB_METHODS."""
    ctx.python = PythonNames(ctx)
    py_rows, py_first, fid_base = ctx.py_rows, ctx.py_first, ctx.fid_base
    ctx.class_methods = class_methods = defaultdict(list)
    for file_id, f in enumerate(ctx.all_files):
        if f.lang == _PYTHON_FILE:
            for c in f.calls:
                if c.kind == _MEMBER_OF:
                    method = ctx.py_by_qual.get(f"{c.qualifier}.{c.callee_name}")
                    if method is not None:
                        class_methods[fid_base[file_id] + c.func_index].append(method)
    for cls, methods in class_methods.items():
        if len(methods) <= HUB_METHODS:
            for method in methods:
                if py_rows[method - py_first][3] not in _SETUP_METHODS:
                    ctx.graph.edge(method, cls, EdgeKind.METHOD_OF, "")


def link_subclasses(ctx: LinkContext) -> None:
    """A base class reaches its subclasses (not a base with more than HUB_SUBCLASSES; the
    subclasses are what the calls rule found: ``class Sub(Base)``)."""
    for base_cls, subs in ctx.class_subs.items():
        if len(subs) <= HUB_SUBCLASSES:
            for sub in subs:
                ctx.graph.edge(base_cls, sub, EdgeKind.SUBCLASS, "")


RULE = Rule(
    "python references",
    writes=(),
    reads=(FunctionRow,),
    link={Phase.PYTHON: resolve_and_link_methods, Phase.REFERENCES: link_subclasses},
    place=50,
)
