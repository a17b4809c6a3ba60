"""Registrations read from comment-stripped C++ text: DispatchStub declare/define/
register (every REGISTER_*_DISPATCH flavour) and TORCH_LIBRARY(_IMPL) m.impl / m.def."""

from __future__ import annotations

import bisect
import re

from indexer.facts import FileFacts, LibraryDef, LibraryImpl, StubFact, StubImpl
from indexer.source_text import LineIndex, at_word_start

# searched with at_word_start: a leading \b would make the engine try the whole pattern at every offset
_STUB_DECL = re.compile(r"(DECLARE_DISPATCH|DEFINE_DISPATCH)\s*\(")
_STUB_REG = re.compile(
    r"(REGISTER_ARCH_DISPATCH|REGISTER_DISPATCH|ALSO_REGISTER_(\w+?)_DISPATCH|"
    r"REGISTER_NO_(\w+?)_DISPATCH|REGISTER_(\w+?)_DISPATCH)\s*\("
)
_ANY_STUB = re.compile(r"_DISPATCH\s*\(")  # a literal first: much faster than the patterns above
_LIBRARY = re.compile(r"(TORCH_LIBRARY_IMPL|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY)\s*\(")
_M_CALL = re.compile(r"\b\w+\s*\.\s*(impl|def)\s*\(")
_STRING = re.compile(r'"((?:\\.|[^"\\])*)"')
_OP_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)?")
LAMBDA_KERNEL = "<lambda>"  # an m.impl whose kernel is a lambda: the functions its body calls implement the op
_LAMBDA = re.compile(r"^\[[^\]]*\]\s*(\(|\{|mutable\b|->)")
_LAST_NAME = re.compile(r"([A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)\s*(?:<[^<>]*(?:<[^<>]*>[^<>]*)*>)?\s*\)*\s*$")


def balanced_args(text: str, open_paren: int) -> tuple[list[str], int]:
    """Split the argument list starting at ``text[open_paren] == '('`` on top-level commas.

    Returns the arguments and the offset just past the closing parenthesis.
    """
    depth = 0
    angle = 0
    args: list[str] = []
    start = open_paren + 1
    i = open_paren
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
        elif ch == "<" and depth == 1 and text[i - 1 : i + 1] != "<<" and text[i : i + 2] != "<<":
            angle += 1
        elif ch == ">" and depth == 1 and angle > 0 and text[i - 1] != "-":
            angle -= 1
        elif ch == "," and depth == 1 and angle == 0:
            args.append(text[start:i].strip())
            start = i + 1
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j
        i += 1
    return args, n


def _scope_templates_dropped(arg: str) -> str:
    """``arg`` without the template arguments of the scopes it names (``QMul<false>::run`` ->
    ``QMul::run``); a function's own template arguments, at the end, are kept."""
    i = arg.find("<")
    while i > 0:
        depth, j = 0, i
        while j < len(arg):
            depth += {"<": 1, ">": -1}.get(arg[j], 0)
            if depth == 0:
                break
            j += 1
        rest = arg[j + 1 :].lstrip()
        if depth == 0 and rest.startswith("::") and (arg[i - 1].isalnum() or arg[i - 1] in "_ "):
            arg = arg[:i].rstrip() + rest
            i = arg.find("<", i)
        else:
            i = arg.find("<", i + 1)
    return arg


def _function_name(arg: str) -> str:
    """The function an argument names: '&foo' -> foo, 'TORCH_FN(ns::bar<T>)' -> ns::bar;
    LAMBDA_KERNEL for a lambda (``[](Tensor x) { return impl(x); }``)."""
    if _LAMBDA.match(arg.strip()):
        return LAMBDA_KERNEL
    arg = _scope_templates_dropped(re.sub(r"\bTORCH_FN(_TYPE)?\s*\(", "(", arg).replace("&", " ").strip())
    m = _LAST_NAME.search(arg)
    return re.sub(r"\s+", "", m.group(1)) if m else ""


def _default_arch(path: str) -> str:
    if path.endswith((".cu", ".cuh")) or "/cuda/" in path or "/cudnn/" in path:
        return "CUDA"
    if path.endswith(".mm") or "/mps/" in path:
        return "MPS"
    if "/hip/" in path or "/miopen/" in path:
        return "HIP"
    return "CPU"


def extract_registrations(path: str, code: str, facts: FileFacts, lines: LineIndex | None = None) -> None:
    """Append DispatchStub and TORCH_LIBRARY facts found in ``code`` to ``facts`` (``lines``:
    the line index of ``code``, or of a text with the same lines)."""
    stubs = _ANY_STUB.search(code) is not None  # most files have neither kind: two fast searches
    if not stubs and "TORCH_LIBRARY" not in code:
        return
    lines = lines or LineIndex(code)
    directives = Directives(code)
    for m in at_word_start(_STUB_DECL, code) if stubs else ():
        if directives.covers(m.start()):
            continue
        args, _ = balanced_args(code, m.end() - 1)
        stub = _function_name(args[-1]) if args else ""
        if stub:
            role = "declare" if m.group(1) == "DECLARE_DISPATCH" else "define"
            facts.stubs.append(StubFact(stub.split("::")[-1], role, lines.line_of(m.start())))
    for m in at_word_start(_STUB_REG, code) if stubs else ():
        macro = m.group(1)
        if directives.covers(m.start()):
            continue
        args, _ = balanced_args(code, m.end() - 1)
        line = lines.line_of(m.start())
        if not args or not args[0]:
            continue
        if macro == "REGISTER_ARCH_DISPATCH" and len(args) >= 3:
            arch, fn = args[1], args[2]
        elif m.group(3):  # REGISTER_NO_X_DISPATCH: a registration of nothing
            continue
        elif len(args) >= 2:
            arch = m.group(2) or m.group(4) or _default_arch(path)
            fn = args[1]
        else:
            continue
        impl = _function_name(fn)
        if impl and impl != "nullptr":
            facts.stub_impls.append(StubImpl(args[0].split("::")[-1], arch.upper(), impl, line))
    for m in at_word_start(_LIBRARY, code):
        args, end = balanced_args(code, m.end() - 1)
        if not args or not re.fullmatch(r"\w+", args[0]):
            continue
        namespace = args[0]
        key = args[1] if m.group(1) == "TORCH_LIBRARY_IMPL" and len(args) >= 3 else ""
        body_start = code.find("{", end)
        if body_start < 0:
            continue
        body_end = _block_end(code, body_start)
        body = code[body_start:body_end]
        for c in _M_CALL.finditer(body):
            if directives.covers(body_start + c.start()):  # inside a #define: a template, not a registration
                continue
            cargs, _ = balanced_args(body, c.end() - 1)
            if not cargs:
                continue
            names = _STRING.findall(cargs[0])
            if not names or not _OP_NAME.fullmatch(names[0].split("(")[0].split("::")[-1].strip()):
                continue  # no name, or one pasted by the preprocessor (#op "." #overload)
            line = lines.line_of(body_start + c.start())
            op_text = names[0]
            if c.group(1) == "def":
                facts.library_defs.append(LibraryDef(namespace, op_text, line))
                if len(cargs) >= 2:  # m.def("schema", TORCH_FN(fn)): a catch-all kernel
                    kernel = _function_name(cargs[1])
                    if kernel:
                        op = op_text.split("(")[0].split("::")[-1]
                        facts.library_impls.append(LibraryImpl(namespace, key, op, kernel, line))
                continue
            op = op_text.split("(")[0].split("::")[-1]
            kernel = _function_name(cargs[1]) if len(cargs) >= 2 else ""
            if kernel:
                facts.library_impls.append(LibraryImpl(namespace, key, op, kernel, line))


class Directives:
    """Where the preprocessor directives of ``code`` are, continuation lines included."""

    def __init__(self, code: str) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        offset, inside = 0, False
        for line in code.splitlines(keepends=True):
            if inside or line.lstrip().startswith("#"):
                if not inside:
                    self.starts.append(offset)
                inside = line.rstrip("\r\n").endswith("\\")
                if not inside:
                    self.ends.append(offset + len(line))
            offset += len(line)
        if inside:
            self.ends.append(offset)

    def covers(self, offset: int) -> bool:
        """Whether ``offset`` is inside a directive (a macro's own ``#define``, on any of its lines)."""
        i = bisect.bisect_right(self.starts, offset) - 1
        return i >= 0 and offset < self.ends[i]


def _block_end(code: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(code)):
        ch = code[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)
