"""Property-based fuzzing of the parsers of outside input: `perfq affected --diff` patches, config files,
registration macros in C++ sources, and the bisect metric readers. Every property: a valid answer or one
PerfqError line, never another exception, and never a changed index."""

from __future__ import annotations

import hashlib
import json
import math
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from common.config import POSITIVE, Config, load_config
from common.diff import applies, apply_hunks, parse_diff, parse_patch
from common.errors import PerfqError
from indexer.build import build_index
from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.registrations import extract_registrations
from perfq.bisect.metric import AGGREGATES, MetricSpec, extract
from query.service import affected_for_ref
from tests.aten_fixture import FILES, make_repo

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SLOW = settings(FUZZ, max_examples=60)

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
GOOD_PATCH = (
    f"diff --git a/{KERNEL} b/{KERNEL}\n--- a/{KERNEL}\n+++ b/{KERNEL}\n"
    "@@ -7 +7 @@\n-    out[i] = out[i] * 2;\n+    out[i] = out[i] * 4;\n"
)
PATHS = [KERNEL, "aten/src/ATen/native/SoftmaxOp.cpp", "aten/src/ATen/native/native_functions.yaml",
         "benchmarks/operator_benchmark/pt/fancy_test.py", "torch/nn/functional.py", "aten/src/ATen/native/New.cpp",
         "README.md", "a b/c d.cpp", "../outside.cpp", "/etc/passwd", "x\x00y.cpp", "dir/"]
LINE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=30)


def _one_line(exc: PerfqError) -> None:
    assert str(exc) and "\n" not in str(exc), repr(str(exc))


# --- diffs ----------------------------------------------------------------------------------------------------


@st.composite
def patches(draw) -> str:
    """Unified diffs with arbitrary headers, hunk ranges and lines (most of them do not apply)."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        old, new = draw(st.sampled_from(PATHS)), draw(st.sampled_from([*PATHS, "/dev/null"]))
        out.append(f"diff --git a/{old} b/{new}\n--- a/{old}\n+++ {'' if new == '/dev/null' else 'b/'}{new}\n")
        for _ in range(draw(st.integers(0, 3))):
            a, b, c, d = (draw(st.integers(0, 40)) for _ in range(4))
            out.append(f"@@ -{a},{b} +{c},{d} @@{draw(LINE)}\n")
            for _ in range(draw(st.integers(0, 6))):
                out.append(draw(st.sampled_from([" ", "+", "-", "\\", ""])) + draw(LINE) + "\n")
    return "".join(out)


@st.composite
def mutated(draw) -> str:
    """The good patch with a few characters inserted, deleted or replaced."""
    text = list(GOOD_PATCH)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.characters(exclude_categories=("Cs",)))
        if op == "insert":
            text.insert(at, char)
        elif at < len(text):
            text[at : at + 1] = [char] if op == "replace" else []
    return "".join(text)


def mutated_text(text: str):
    return st.integers(0, len(text)).flatmap(lambda at: st.text(max_size=3).map(lambda s: text[:at] + s + text[at:]))


SOURCES = {path: textwrap.dedent(text).splitlines() for path, text in FILES.items() if text.strip()}


@st.composite
def applying(draw) -> str:
    """Patches that apply to the fixture: real context, some lines removed, random lines added."""
    out = []
    for path in draw(st.lists(st.sampled_from(sorted(SOURCES)), min_size=1, max_size=3, unique=True)):
        lines = SOURCES[path]
        start = draw(st.integers(0, len(lines) - 1))
        old = lines[start : start + draw(st.integers(1, 6))]
        body, new_count = [], 0
        for line in old:
            kind = draw(st.sampled_from([" ", " ", "-"]))
            body.append(kind + line)
            new_count += kind == " "
            for added in draw(st.lists(LINE, max_size=2)):
                body.append("+" + added)
                new_count += 1
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
                   f"@@ -{start + 1},{len(old)} +{start + 1},{new_count} @@\n" + "\n".join(body) + "\n")
    return "".join(out)


DIFF_INPUT = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    patches(),
    mutated(),
    applying(),
    applying().flatmap(lambda text: mutated_text(text)),
    st.just(GOOD_PATCH),
)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("fuzz") / "repo")
    build_index(repo, Config(), repo / ".git/perfq/index.duckdb", jobs=1, quiet=True, trace=False)
    return repo


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@FUZZ
@given(text=DIFF_INPUT)
def test_diff_parsing_gives_changes_or_one_line(text: str):
    try:
        changes = parse_patch(text)
    except PerfqError as exc:
        _one_line(exc)
        return
    old = "\n".join(f"line {i}" for i in range(30)).encode()
    for change in changes:
        why = applies(old, change)
        assert why is None or "\n" not in why
        rebuilt = apply_hunks(old, change)
        assert rebuilt is None or isinstance(rebuilt, bytes)
    assert parse_diff(text) == changes


@SLOW
@given(text=DIFF_INPUT)
def test_affected_on_any_patch_answers_or_fails_in_one_line(indexed: Path, text: str):
    db = indexed / ".git/perfq/index.duckdb"
    before = _digest(db)
    try:
        doc = affected_for_ref(indexed, None, db, diff_text=text)
    except PerfqError as exc:
        _one_line(exc)
        event(f"error: {str(exc)[:28]}")
    else:
        event(f"answer: {len(doc.changed_functions)} changed functions, {len(doc.benchmarks)} benchmarks")
        json.dumps(doc.to_json())
        assert doc.head == "PATCH"
    assert _digest(db) == before
    assert not [p for p in db.parent.iterdir() if ".tmp" in p.name]


# --- config files ---------------------------------------------------------------------------------------------

KEYS = [*Config.__dataclass_fields__, "source_root", "max_depht", "tool", "perfq", "ir", "compare", "colour", "x-y"]
SCALARS = st.one_of(st.integers(-3, 200), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS),
                                                                                            inner, max_size=3),
                      max_leaves=6)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def config_files(draw) -> tuple[str, str]:
    name = draw(st.sampled_from(["perfq.toml", "pyproject.toml"]))
    table = draw(st.sampled_from(["", "[tool.perfq]\n", "[tool]\n", "[tool.other]\n"]))
    body = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5))
    text = table + "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in body.items())
    return name, draw(st.one_of(st.just(text), st.text(max_size=80), mutated_text(text)))


@FUZZ
@given(case=config_files())
def test_config_files_give_a_typed_config_or_one_line(tmp_path_factory, case: tuple[str, str]):
    name, text = case
    repo = tmp_path_factory.mktemp("cfg")
    (repo / name).write_text(text, encoding="utf-8")
    try:
        cfg = load_config(repo)
    except PerfqError as exc:
        _one_line(exc)
        return
    defaults = Config()
    for key in Config.__dataclass_fields__:
        value, default = getattr(cfg, key), getattr(defaults, key)
        if isinstance(default, tuple):
            assert isinstance(value, tuple) and all(isinstance(v, str) for v in value)
        elif isinstance(default, int):
            assert type(value) is int and (key not in POSITIVE or value >= 1)
        elif isinstance(default, str):
            assert isinstance(value, str)


# --- registration macros --------------------------------------------------------------------------------------

TOKENS = [
    "TORCH_LIBRARY_IMPL(aten, CPU, m) {", "TORCH_LIBRARY(quantized, m) {", "TORCH_LIBRARY_FRAGMENT(aten, m) {",
    "m.impl(", "m.def(", '"add.Tensor"', '"aten::mul"', '"foo(Tensor x) -> Tensor"', '"."', '""', "#op", '"."',
    "#overload", "TORCH_FN(", "TORCH_SELECTIVE_NAME(", "&kernel_fn", "ns::impl<T>", "REGISTER_DISPATCH(",
    "REGISTER_ARCH_DISPATCH(", "REGISTER_AVX2_DISPATCH(", "REGISTER_NO_CPU_DISPATCH(", "DECLARE_DISPATCH(",
    "DEFINE_DISPATCH(", "add_stub", "nullptr", ",", "(", ")", "{", "}", "<", ">", ";", "\\\n", "\n", "#define X(op) ",
    "#if 0\n", "#endif\n", "'\"'", '"unterminated', "/*", "*/", "//", "R\"(raw)\"", " ",
]


@FUZZ
@given(code=st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_registration_macros_never_crash_or_invent_operators(code: str):
    facts = FileFacts("aten/src/ATen/native/cpu/Fuzz.cpp", "cpp", "", code.count("\n") + 1)
    extract_registrations(facts.path, code, facts)
    lines = code.count("\n") + 1
    for impl in facts.library_impls:
        assert impl.op and impl.op[0].isalpha() or impl.op.startswith("_"), impl
        assert "." not in impl.op.split(".", 1)[0] and 1 <= impl.line <= lines
    for stub in facts.stub_impls:
        assert stub.stub and stub.impl_name and 1 <= stub.line <= lines


@pytest.fixture(scope="module")
def worker():
    """libclang runs in a worker process, as in a build (its objects outlive no interpreter)."""
    with ProcessPoolExecutor(max_workers=1) as pool:
        yield pool


@SLOW
@given(data=st.one_of(st.binary(max_size=400), st.lists(st.sampled_from(TOKENS), max_size=40).map(
    lambda t: "".join(t).encode())))
def test_the_cpp_extractor_never_raises(worker, data: bytes):
    facts = worker.submit(file_facts, "cpp", "aten/src/ATen/native/cpu/Fuzz.cpp", data).result()
    assert facts.status in ("ok", "warning", "skipped")


# --- the bisect metric ----------------------------------------------------------------------------------------

OUTPUT = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["time: 12.5 ms", "1e400 us", "nan ms", "-3 GB/s", '{"a": {"ms": 1.5}}', "\n",
                              "Forward Execution Time (us) : 7.25", "inf s", "12", "x", "[1, 2]", "ms 3"]),
             max_size=8).map("\n".join),
)
PATTERNS = st.one_of(st.text(max_size=20), st.sampled_from([r"time: ([0-9.]+)", r"(\w+)", r"([", r"(a)|(b)", r"x",
                                                            r"(.*)", r"(\d+)?", r"(?P<v>[-+0-9.e]+) us", "()"]))


@FUZZ
@given(text=OUTPUT, pattern=st.one_of(st.none(), PATTERNS),
       path=st.one_of(st.none(), st.sampled_from(["a.ms", "0", "a", "a.b.c", "-1", ""]), st.text(max_size=8)),
       aggregate=st.sampled_from(AGGREGATES))
def test_the_metric_is_a_finite_number_or_one_line(text: str, pattern, path, aggregate: str):
    spec = MetricSpec(regex=pattern or None, json_path=None if pattern else (path or None), aggregate=aggregate)
    try:
        reading = extract(text, spec)
    except PerfqError as exc:
        _one_line(exc)
        return
    assert isinstance(reading.value, float) and math.isfinite(reading.value)


# --- the facts cache ------------------------------------------------------------------------------------------

CACHE_LINES = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.integers(), max_size=3)),
             max_size=5).map(json.dumps),
    st.tuples(st.text(max_size=8), st.sampled_from(["cpp", "python", "benchmark", "yaml", "trace", "meta", "x"]),
              st.text(max_size=8), VALUES).map(lambda t: json.dumps(list(t))),
)


@FUZZ
@given(lines=st.lists(CACHE_LINES, max_size=8), header=st.booleans())
def test_a_damaged_facts_cache_loads_as_data(tmp_path_factory, lines: list[str], header: bool):
    from indexer.facts_cache import FORMAT, load_cache

    path = tmp_path_factory.mktemp("cache") / "index.duckdb.facts"
    first = [json.dumps({"format": FORMAT, "version": "v"})] if header else []
    path.write_text("\n".join(first + lines) + "\n", encoding="utf-8")
    entries = load_cache(path, "v")
    assert isinstance(entries, dict)
    for key, (kind, digest, _) in entries.items():
        assert isinstance(key, str) and kind in ("cpp", "python", "benchmark", "yaml", "trace", "meta")
        assert isinstance(digest, str)


# --- raw bytes into the readers of files perfq finds on disk (issue 33) ---------------------------------------

NESTING = st.integers(1, 6000).map(lambda n: st.sampled_from([b"[" * n + b"]" * n, b"{a=" * n + b"1" + b"}" * n]))


@FUZZ
@given(name=st.sampled_from(["perfq.toml", "pyproject.toml"]),
       data=st.one_of(st.binary(max_size=300), NESTING.flatmap(lambda s: s).map(lambda d: b"a = " + d),
                      st.binary(max_size=40).map(lambda b: b"[tool.perfq]\nmax_depth = 3\n" + b + b"\nperfq = 1\n")))
def test_config_bytes_give_a_config_or_one_line(tmp_path_factory, name: str, data: bytes):
    repo = tmp_path_factory.mktemp("cfgb")
    (repo / name).write_bytes(data)
    try:
        assert isinstance(load_config(repo), Config)
    except PerfqError as exc:
        _one_line(exc)


YAML_TOKENS = ["- func: ", "foo(Tensor self) -> Tensor", "\n  dispatch:", " [CPU]", " {CPU: k}", "\n    CPU: ",
               "\n  tags: ", "\n  autogen: ", "\n  variants: ", "\n  structured_delegate: ", "&a ", "*a", "[", "]",
               "{", "}", ", ", "x", "1", "null", "\n", " ", ":", "- ", "'", '"', "!!python/object:os.system"]


@FUZZ
@given(text=st.one_of(st.lists(st.sampled_from(YAML_TOKENS), max_size=40).map("".join),
                      st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_native_functions_yaml_gives_operators_or_one_line(tmp_path_factory, text: str):
    from indexer.native_yaml import OpFacts, _plain

    path = tmp_path_factory.mktemp("yaml") / "native_functions.yaml"
    path.write_text(text, encoding="utf-8")
    from common.yaml_text import YAMLError

    try:
        ops = _plain(path)
    except PerfqError as exc:
        _one_line(exc)
        return
    except YAMLError:
        return  # the caller (load_native_functions) turns it into one line: malformed YAML
    assert all(isinstance(op, OpFacts) and isinstance(op.name, str) for op in ops)
    assert all(isinstance(k, str) and isinstance(v, str) for op in ops for k, v in op.kernels)


@FUZZ
@given(tail=st.binary(max_size=400), cut=st.integers(0, 400), keep_header=st.booleans())
def test_any_graph_file_is_read_whole_or_not_at_all(tmp_path_factory, tail: bytes, cut: int, keep_header: bool):
    from schema.graph_file import graph_file, graph_token, read_graph_file, write_graph_file

    db = tmp_path_factory.mktemp("graph") / "index.duckdb"
    rows = [("src", bytes(range(40))), ("dst", b"\x01" * 24)]
    token = graph_token(rows)
    write_graph_file(db, rows, token)
    data = graph_file(db).read_bytes()
    end = data.index(b"\n", data.index(b"\n") + 1) + 1
    damaged = (data[:end] if keep_header else data[: cut % (end + 1)]) + tail
    graph_file(db).write_bytes(damaged)
    parts = read_graph_file(db, token)
    assert parts is None or {p: bytes(v) for p, v in parts.items()} == dict(rows)


@FUZZ
@given(data=st.binary(max_size=400), header=st.booleans())
def test_facts_cache_bytes_load_as_data(tmp_path_factory, data: bytes, header: bool):
    from indexer.facts_cache import FORMAT, load_cache

    path = tmp_path_factory.mktemp("cacheb") / "index.duckdb.facts"
    first = (json.dumps({"format": FORMAT, "version": "v"}) + "\n").encode() if header else b""
    path.write_bytes(first + data)
    assert isinstance(load_cache(path, "v"), dict)
