"""Operator benchmark extractor: the tests of one benchmark file and the dotted names
its timed region references (statically).

For the operator_benchmark framework a test is a ``TorchBenchmarkBase`` subclass whose
``forward`` is timed and whose ``init`` only builds inputs. The timed references are
those of ``forward``, of what ``init`` stores in ``self.X`` for the attributes that
``forward`` uses, and of the ``op_list`` attributes when ``forward`` calls a
configured ``op_func``. Plain scripts (no such class) count as wholly timed.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field

from indexer.python_src import collect_refs, dotted, parse_module, resolve


@dataclass
class BenchmarkFacts:
    name: str
    file: str
    framework: str
    tests: list[dict] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    refs: list[tuple[str, str, str]] = field(default_factory=list)  # (test, dotted, kind)
    status: str = "ok"
    message: str = ""
    sha256: str = ""

    def tests_json(self) -> str:
        return json.dumps(self.tests)


def _refs(nodes: list[ast.AST]) -> list[tuple[str, str]]:
    return [(ref, kind) for ref, kind, _ in collect_refs(nodes)]


def _self_attrs(nodes: list[ast.AST]) -> set[str]:
    used: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                used.add(sub.attr)
    return used


def _string_constants(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def extract_benchmark(path: str, text: str) -> BenchmarkFacts:
    """Tests, devices and timed-region references of one benchmark file."""
    stem = path.rsplit("/", 1)[-1][:-3]
    facts = BenchmarkFacts(stem, path, "operator_benchmark")
    try:
        tree, module, aliases = parse_module(path, text)
    except (SyntaxError, ValueError) as exc:
        facts.status, facts.message = "warning", f"python syntax error: {exc}"
        return facts
    local = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}

    def qualify(ref: str) -> str:
        return ref if ref.startswith(".") else resolve(ref, aliases, module, local)

    op_list_refs: list[tuple[str, str]] = []
    op_names: list[str] = []
    devices: set[str] = set()
    # module-level ``device = "xpu"`` (the scripts of a backend), seen through ``device=device``
    named = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (dotted(node.func) or "").endswith("op_list"):
            op_list_refs += _refs([kw.value for kw in node.keywords] + list(node.args))
            for kw in node.keywords:
                if kw.arg == "attrs" and isinstance(kw.value, ast.List | ast.Tuple):
                    for row in kw.value.elts:
                        if isinstance(row, ast.List | ast.Tuple) and row.elts and isinstance(row.elts[0], ast.Constant):
                            op_names.append(str(row.elts[0].value))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                if isinstance(key, ast.Constant) and key.value == "device":
                    devices.update(s for s in _string_constants(value) if s in ("cpu", "cuda", "mps", "xpu"))
        if isinstance(node, ast.keyword) and node.arg == "device":
            value = named.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
            devices.update(s for s in _string_constants(value) if s in ("cpu", "cuda", "mps", "xpu"))

    classes = [
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef)
        and any((dotted(b) or "").endswith(("TorchBenchmarkBase", "BenchmarkBase")) for b in n.bases)
    ]
    if not classes:
        facts.framework = "script"
        facts.tests.append({"name": stem, "class": "", "ops": []})
        facts.refs = [
            (stem, qualify(r), "ref" if k == "name" else k)
            for r, k in _refs(list(tree.body))
            if k != "name" or qualify(r) != r
        ]
    for cls in classes:
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        timed = [m for name, m in methods.items() if name in ("forward", "backward")] or list(methods.values())
        used = _self_attrs(timed)
        nodes: list[ast.AST] = [stmt for m in timed for stmt in m.body]
        init = methods.get("init")
        module_names: list[str] = []
        params: set[str] = set()
        if init is not None:
            params = {a.arg for a in init.args.args}
            assigned: dict[str, ast.AST] = {}
            for stmt in ast.walk(init):
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    assigned[stmt.targets[0].id] = stmt.value
            for stmt in ast.walk(init):
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id == "self"
                            and target.attr in used
                        ):
                            nodes.append(stmt.value)
                            # one step of local data flow: qconfig = default_qconfig; self.m = M(qconfig=qconfig)
                            nodes += [
                                assigned[n.id]
                                for n in ast.walk(stmt.value)
                                if isinstance(n, ast.Name) and n.id in assigned
                            ]
                if isinstance(stmt, ast.Call) and (dotted(stmt.func) or "").endswith("set_module_name"):
                    module_names += [s for s in _string_constants(stmt)]
        refs = _refs(nodes)
        # forward calls an op_func given by the configs: the op_list entries are timed
        names_used = {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
        if params & names_used or any(r.startswith("self.op_func") for r, _ in refs):
            refs += op_list_refs
        for ref, kind in refs:
            if ref.startswith("self.") or ref.split(".")[0] in params:
                continue
            if kind == "name":
                target = qualify(ref)
                if target == ref:
                    continue  # a local variable
                facts.refs.append((cls.name, target, "ref"))
                continue
            facts.refs.append((cls.name, qualify(ref), kind))
        facts.tests.append(
            {
                "name": cls.name,
                "class": cls.name,
                "module_names": module_names,
                "ops": op_names if params & names_used else [],
            }
        )
    facts.devices = sorted(devices) or ["cpu"]
    return facts
