"""Scaffold an operator_benchmark-style benchmark file from an operator's schema (pure text -> text).

The schema is parsed by torchgen's ``FunctionSchema``
(``add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor``).
Required arguments get values built from their type and name (tensors of configurable
shapes and dtype, scalars, int lists, bool flags...); arguments with defaults are left to
their defaults; optional ones without a default get ``None``. The benchmark calls the exact
overload through ``torch.ops.<namespace>.<name>.<overload>`` and has short and long configs.
Values come from heuristics: the generated file is a start, to be tuned by a person.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import PerfqError


@dataclass(frozen=True)
class Arg:
    """One argument of a schema."""

    name: str
    type: str  # without alias annotations: Tensor, Tensor?, int[2], Tensor?[] ...
    default: str | None
    kwarg_only: bool
    mutable: bool = False  # Tensor(a!)

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def base(self) -> str:
        """Element type without list/optional markers: Tensor, int, SymInt, Scalar..."""
        return re.sub(r"[?]|\[\d*\]", "", self.type)

    @property
    def is_list(self) -> bool:
        return "[" in self.type

    @property
    def list_len(self) -> int | None:
        m = re.search(r"\[(\d+)\]", self.type)
        return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Schema:
    """A parsed operator schema."""

    name: str
    overload: str
    args: tuple[Arg, ...]
    returns: str

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


def _arg(a, kwarg_only: bool) -> Arg:
    return Arg(name=a.name, type=str(a.type), default=a.default, kwarg_only=kwarg_only,
               mutable=bool(a.annotation is not None and a.annotation.is_write))


def parse_schema(schema: str) -> Schema:
    """Parse an operator schema with torchgen's ``FunctionSchema`` (a ``namespace::`` prefix is
    allowed); PerfqError when it is not one or torchgen (the torch wheel) is missing."""
    try:
        from torchgen.model import FunctionSchema
    except ImportError:
        raise PerfqError("scaffolding needs torchgen, which ships with torch: pip install 'perfq[torch]'") from None
    text = schema.strip()
    head, sep, _ = text.partition("(")
    if "::" in head:
        text = head.split("::", 1)[1] + sep + text[len(head) + len(sep):]
    try:
        fs = FunctionSchema.parse(text)
    except Exception:  # torchgen asserts on malformed schemas
        raise PerfqError(f"cannot parse operator schema: {schema!r}") from None
    args = [_arg(a, False) for a in fs.arguments.flat_positional]
    args += [_arg(a, True) for a in (*fs.arguments.flat_kwarg_only, *fs.arguments.out)]
    return Schema(name=str(fs.name.name), overload=fs.name.overload_name, args=tuple(args),
                  returns=str(fs).rpartition(" -> ")[2])


UNSUPPORTED = {"Dimname", "Storage", "Stream", "Any", "QScheme", "DeviceIndex", "complex", "GraphModule"}


def pick_overload(schemas: Sequence[str]) -> str:
    """Among the schemas of one operator group, the one a scaffold should target.

    Prefers the default overload, then functional ones without named-tensor (Dimname),
    out= or other unsupported arguments, then the fewest required arguments.
    """
    if not schemas:
        raise PerfqError("no overload to choose from")

    def score(text: str) -> tuple[int, int, int, int, str]:
        try:
            s = parse_schema(text)
        except PerfqError:
            return (9, 9, 9, 99, text)
        unsupported = any(a.base in UNSUPPORTED for a in s.args if a.default is None)
        out = (
            s.overload.startswith("out")
            or s.overload.endswith("_out")
            or any(a.mutable and a.kwarg_only for a in s.args)
        )
        required = sum(1 for a in s.args if a.default is None)
        rank = 0 if s.overload == "" else 1 if s.overload == "Tensor" else 2
        return (int(unsupported), int(out), rank, required, text)

    return min(schemas, key=score)


# --- heuristics ------------------------------------------------------------------------

MATRIX_OPS = re.compile(
    r"^(mm|addmm|matmul|mv|addmv|addbmm|chain_matmul|linalg_|cholesky|inverse|det|logdet|slogdet|lu|qr|svd|"
    r"eig|symeig|triangular_solve|trace|tril|triu|matrix_|pinverse|kron|_linalg|geqrf|orgqr|ormqr|"
    r"lstsq|solve|diag|cov|corrcoef|cdist|pdist|frobenius|nuclear|mat|einsum)"
)
VECTOR_OPS = re.compile(r"^(dot|vdot|ger|outer|inner|histc|bincount|cumulative_trapezoid|trapz|trapezoid)")
BATCH_OPS = re.compile(r"^(bmm|baddbmm|_?bmm)")
INT_OPS = re.compile(
    r"^(bitwise_|gcd|lcm|__[lr]shift__|__i[lr]shift__|__and__|__or__|__xor__|__iand__|"
    r"__ior__|__ixor__|bincount|_bincount)"
)
SPD_OPS = re.compile(r"^(cholesky|linalg_cholesky|_cholesky|linalg_eigh|linalg_eigvalsh|symeig|_linalg_eigh)")
# optional arguments of which at least one must be given
FORCED = {r"^(clamp|clip)": {"min"}, r"^stft": {"return_complex"}}
# bool arguments the operator needs true (stft: real input without return_complex is an error)
TRUE_FLAGS = {"return_complex": "True"}
# per-channel tensors: given even when optional (batch norm without running stats is not inference)
CHANNEL_TENSORS = ("weight", "bias", "running_mean", "running_var")
# inputs a schema cannot tell: complex spectra, complex tensors (op base, argument) -> expression
RECIPES = {
    ("istft", "self"): "torch.stft(torch.rand(M * N, device=device, dtype=dtype), 8, return_complex=True)",
    ("view_as_real", "self"): "torch.rand({shape}, device=device, dtype=torch.complex64)",
}
# operators that need (N, C, H, W) inputs although their name has no "2d"
IMAGE_OPS = re.compile(
    r"^(dsplit|channel_shuffle|native_channel_shuffle|pixel_shuffle|pixel_unshuffle|"
    r"group_norm|native_group_norm|instance_norm|batch_norm|native_batch_norm|"
    r"_native_batch_norm|grid_sampler|affine_grid|im2col|col2im)"
)
SPATIAL = re.compile(r"([123])d")


@dataclass(frozen=True)
class Layout:
    """How the benchmark's tensors are shaped from its config attributes."""

    kind: str  # plain | mat | vec | batch | spatial
    attrs: tuple[str, ...]
    short: tuple[tuple[int, ...], ...]
    long: tuple[tuple[int, ...], ...]
    spatial: int = 0

    def shape(self, rank: int | None = None) -> str:
        """Python expression of the main tensor shape (over the config attribute names)."""
        if self.kind == "plain":
            return "(M, N)"
        if self.kind == "vec":
            return "(N,)"
        if self.kind == "batch":
            return "(B, N, N)"
        if self.kind == "spatial":
            return "(2, C, " + ", ".join(["N"] * self.spatial) + ")"
        return "(N, N)"

    @property
    def ndim(self) -> int:
        return {"plain": 2, "vec": 1, "batch": 3, "spatial": 2 + self.spatial}.get(self.kind, 2)


def choose_layout(schema: Schema) -> Layout:
    """Pick the tensor layout from the operator name."""
    base = schema.name.lstrip("_")
    if BATCH_OPS.match(base):
        return Layout("batch", ("B", "N"), ((2, 16), (4, 64)), ((8, 128), (16, 256)))
    if VECTOR_OPS.match(base):
        return Layout("vec", ("N",), ((64,), (1024,)), ((65536,), (1048576,)))
    if MATRIX_OPS.match(base):
        return Layout("mat", ("N",), ((16,), (64,)), ((256,), (512,)))
    m = SPATIAL.search(schema.name)
    image = IMAGE_OPS.match(base)
    if (m or image) and not base.startswith(("view", "atleast", "fft")):
        k = int(m.group(1)) if m else 2
        short = ((3, 8), (8, 16)) if k < 3 else ((3, 4), (4, 8))
        long = ((16, 32), (32, 64)) if k < 3 else ((8, 16), (16, 16))
        return Layout("spatial", ("C", "N"), short, long, spatial=k)
    return Layout("plain", ("M", "N"), ((8, 16), (64, 64)), ((256, 256), (1024, 512)))


def _pyname(name: str) -> str:
    if name == "self":
        return "self_"
    if keyword.iskeyword(name):
        return name + "_"
    return name


def _dtype(schema: Schema) -> tuple[str, str]:
    """(short dtypes, long dtypes) as Python list expressions."""
    if INT_OPS.match(schema.name):
        return "[torch.int64]", "[torch.int32, torch.int64]"
    return "[torch.float32]", "[torch.float32, torch.float64]"


class _Builder:
    """Turns schema arguments into init/forward code for one layout."""

    def __init__(self, schema: Schema, layout: Layout) -> None:
        self.schema = schema
        self.layout = layout
        self.base = schema.name.lstrip("_")
        self.integer = bool(INT_OPS.match(schema.name))
        self.tensors: list[tuple[str, str]] = []  # (python name, expression) -> self.inputs
        self.consts: list[tuple[str, str]] = []  # (attribute, expression) set in init

    # tensors
    def _rand(self, shape: str) -> str:
        if self.integer:
            return f"torch.randint(1, 100, {shape}, device=device, dtype=dtype)"
        if SPD_OPS.match(self.schema.name):
            return f"_spd({shape}, device, dtype)"
        return f"torch.rand({shape}, device=device, dtype=dtype)"

    def _last(self) -> str:
        return {"spatial": "N", "vec": "N", "batch": "N", "mat": "N"}.get(self.layout.kind, "N")

    def numel(self) -> str:
        """Python expression of the main tensor's number of elements."""
        return {"plain": "M * N", "vec": "N", "batch": "B * N * N", "spatial": "2 * C * N"}.get(
            self.layout.kind, "N * N"
        )

    def _first(self) -> str:
        return {"plain": "M", "batch": "B", "spatial": "2"}.get(self.layout.kind, "N")

    def tensor(self, arg: Arg) -> str:
        name, lay = arg.name, self.layout
        main = lay.shape()
        recipe = RECIPES.get((self.base, name))
        if recipe:
            return recipe.format(shape=main)
        if name == "target" and re.match(r"(nll_loss|cross_entropy|multi_margin|multilabel_margin)", self.base):
            return f"torch.randint(0, N, ({self._first()},), device=device)"
        if name in ("index", "indices", "idx"):
            if arg.type.startswith("Tensor?"):  # advanced indexing along the first dim
                return f"torch.randint(0, {self._first()}, (N,), device=device)"
            if re.match(r"index_|_index_", self.base) or self.base in ("index_select", "take", "put", "put_"):
                return f"torch.randint(0, {self._last()}, ({self._last()},), device=device)"
            return f"torch.randint(0, {self._last()}, {main}, device=device)"
        if name == "value" and not arg.is_list:  # masked_fill.Tensor, index_fill.int_Tensor: 0-dim
            return "torch.tensor(0.5, device=device, dtype=dtype)"
        if name in ("mask", "condition"):
            return f"torch.rand({main}, device=device) > 0.5"
        if name in ("vec", "vec1", "vec2") or (lay.kind == "mat" and name == "tensor" and self.base == "dot"):
            return self._rand("(N,)")
        if name == "self" and self.base.startswith("addmv"):
            return self._rand("(N,)")
        if name in ("batch1", "batch2") and lay.kind != "batch":
            return self._rand("(2, N, N)")
        if name == "weight" and lay.kind == "spatial" and "conv" in self.base:
            return self._rand("(C, C, " + ", ".join(["3"] * lay.spatial) + ")")
        if name in CHANNEL_TENSORS and lay.kind == "spatial":
            return self._rand("(C,)")
        if name in CHANNEL_TENSORS and lay.kind == "plain":
            return self._rand("(N,)")
        return self._rand(main)

    # scalars and lists
    def int_value(self, arg: Arg) -> str:
        n = arg.name
        table = {
            "dim": "-1",
            "dim0": "0",
            "dim1": "1",
            "dim2": "1",
            "source": "0",
            "destination": "1",
            "start": "0",
            "end": "1",
            "length": "1",
            "index": "0",
            "k": "1",
            "diagonal": "0",
            "offset": "0",
            "chunks": "2",
            "sections": "2",
            "split_size": "1",
            "groups": "1",
            "repeats": "2",
            "n": "2",
            "size": "N",
            "num_classes": "N",
            "step": "1",
            "bins": "10",
            "minlength": "0",
            "upscale_factor": "1",
            "downscale_factor": "1",
            "group": "1",
            "ndims": "1",
            "correction": "1",
            "steps": self.numel(),
            "n_fft": "8",
        }
        if self.layout.kind == "spatial":  # native_group_norm(input, ..., N, C, HxW, group, eps)
            table.update({"N": "2", "C": "C", "HxW": " * ".join(["N"] * self.layout.spatial)})
        return table.get(n, "1")

    def int_list(self, arg: Arg) -> str:
        n, k, nd = arg.name, arg.list_len, self.layout.ndim
        if n in ("size", "sizes", "shape", "stride") and self.layout.kind != "spatial":
            shape = self.layout.shape()
            if n == "stride":
                return {
                    "(M, N)": "[N, 1]",
                    "(N,)": "[1]",
                    "(N, N)": "[N, 1]",
                    "(B, N, N)": "[N * N, N, 1]",
                }.get(shape, "[1]")
            return "[" + shape.strip("()").rstrip(",") + "]"
        if n in ("dims", "permutation", "perm"):
            return str(list(reversed(range(nd))))
        if n in ("dim", "dims") or n.startswith("dim"):
            return "[-1]"
        if n in ("repeats",):
            return str([2] * nd)
        if n in ("normalized_shape",):
            return "[N]"
        if n in ("split_sizes", "split_size"):
            return "[1, N - 1]"
        if n in ("pad",):
            return "[1, 1]"
        if n in ("output_size",):
            return str([4] * (k or self.layout.spatial or 1))
        if n in ("kernel_size",):
            return str([3 if "conv" in self.base else 2] * (k or self.layout.spatial or 1))
        if n in ("padding",):
            return str([1] * (k or 1))
        if n in ("shifts",):
            return "[1]"
        return str([1] * (k or 1))

    def value(self, arg: Arg) -> tuple[str, bool] | None:
        """(expression, is a tensor input) for a required argument; None when unsupported."""
        base = arg.base
        if base in UNSUPPORTED:
            return None
        if arg.optional and not arg.is_list and not (base == "Tensor" and arg.name in CHANNEL_TENSORS):
            return ("None", False)
        if base == "Tensor":
            if arg.is_list:
                if arg.type.startswith("Tensor?"):
                    return ("[" + self.tensor(Arg("indices", "Tensor?", None, False)) + "]", True)
                return ("[" + ", ".join([self.tensor(arg)] * 2) + "]", True)
            if arg.mutable and arg.kwarg_only:
                return (f"torch.empty(0, device=device, dtype={self._out_dtype()})", True)
            return (self.tensor(arg), True)
        if base in ("int", "SymInt"):
            return (self.int_list(arg), False) if arg.is_list else (self.int_value(arg), False)
        if base == "Scalar":
            named = {"min": "0.25", "max": "0.75", "start": "0", "end": self.numel()}
            return ("[2, 2]" if arg.is_list else named.get(arg.name, "2"), False)
        if base == "float":
            if arg.is_list:
                return ("[1.0]", False)
            return (
                {
                    "eps": "1e-5",
                    "momentum": "0.1",
                    "p": "0.5",
                    "beta": "1.0",
                    "threshold": "0.5",
                    "negative_slope": "0.01",
                    "lambd": "0.5",
                }.get(arg.name, "0.5"),
                False,
            )
        if base == "bool":
            return (str([False] * (arg.list_len or 1)) if arg.is_list else TRUE_FLAGS.get(arg.name, "False"), False)
        if base == "str":
            return (
                {
                    "reduce": '"sum"',
                    "reduction": '"mean"',
                    "equation": '"ij,jk->ik"',
                    "approximate": '"none"',
                    "side": '"left"',
                    "mode": '"reflect"',
                    "padding_mode": '"zeros"',
                    "interpolation": '"linear"',
                    "UPLO": '"L"',
                    "ord": '"fro"',
                }.get(arg.name, '""'),
                False,
            )
        if base == "ScalarType":
            return ("torch.float32", False)
        if base == "Layout":
            return ("torch.strided", False)
        if base == "Device":
            return ("device", False)
        if base == "MemoryFormat":
            return ("torch.contiguous_format", False)
        if base == "Generator":
            return ("None", False)
        return None

    def _out_dtype(self) -> str:
        return "dtype"


@dataclass(frozen=True)
class Scaffold:
    """A generated benchmark file and what it calls."""

    filename: str
    text: str
    op: str
    call: str


def _class_name(schema: Schema) -> str:
    words = re.split(r"[_.]+", schema.full_name)
    return "".join(w[:1].upper() + w[1:] for w in words if w) + "Benchmark"


def scaffold(schema_text: str, namespace: str = "aten") -> Scaffold:
    """Generate an operator_benchmark file for the operator whose schema is ``schema_text``."""
    schema = parse_schema(schema_text)
    layout = choose_layout(schema)
    builder = _Builder(schema, layout)
    ident = re.sub(r"\W", "_", schema.full_name)
    positional: list[str] = []
    keywords: list[str] = []
    forced = next((names for pattern, names in FORCED.items() if re.match(pattern, schema.name)), set())
    # a factory (no tensor argument) builds its result on the config's device and dtype
    factory = not any(a.base == "Tensor" for a in schema.args)
    skipped = False  # a positional argument was left to its default: later ones go by keyword
    for arg in schema.args:
        if arg.name in forced:  # optional, but the op fails when all of them are left out
            arg = Arg(arg.name, arg.type.rstrip("?"), None, arg.kwarg_only, arg.mutable)
        elif factory and arg.name in ("device", "dtype") and arg.base in ("Device", "ScalarType"):
            keywords.append(f"{arg.name}=self.{arg.name}")
            builder.consts.append((arg.name, arg.name))
            continue
        elif arg.default is not None:
            skipped = True
            continue
        built = builder.value(arg)
        if built is None:
            raise PerfqError(f"cannot scaffold {schema.full_name}: argument '{arg.type} {arg.name}' has no generator")
        expr, is_tensor = built
        py = _pyname(arg.name)
        if is_tensor:
            builder.tensors.append((py, expr))
            ref = py
        elif re.search(r"\b(M|N|B|C|device|dtype)\b", expr):
            builder.consts.append((py, expr))
            ref = f"self.{py}"
        else:
            ref = expr
        if arg.kwarg_only or skipped:
            kw = f"**{{'{arg.name}': {ref}}}" if keyword.iskeyword(arg.name) else f"{arg.name}={ref}"
            keywords.append(kw)
        else:
            positional.append(ref)
    overload = schema.overload or "default"
    call = f"torch.ops.{namespace}.{schema.name}.{overload}"
    call_args = ", ".join(positional + keywords)
    short_dtypes, long_dtypes = _dtype(schema)
    attrs = list(layout.attrs)
    params = ", ".join(attrs + ["device", "dtype"])
    tensor_names = [t for t, _ in builder.tensors]
    lines = [
        f'"""Microbenchmark for {namespace}::{schema.full_name} (scaffolded by `perfq coverage --scaffold`).',
        "",
        f"Schema: {schema_text.strip()}",
        "",
        "Inputs are built from the schema by heuristics: tune shapes, dtypes and argument values",
        "to the sizes this operator sees in practice before relying on the numbers.",
        '"""',
        "",
        "import operator_benchmark as op_bench",
        "",
        "import torch",
        "",
    ]
    if SPD_OPS.match(schema.name):
        lines += [
            "",
            "def _spd(shape, device, dtype):",
            '    """A symmetric positive-definite (batch of) matrix."""',
            "    a = torch.rand(shape, device=device, dtype=dtype)",
            "    n = shape[-1]",
            "    return a @ a.mT + n * torch.eye(n, device=device, dtype=dtype)",
            "",
        ]
    short_attrs = ",\n".join(f"        {list(v)}" for v in layout.short)
    lines += [
        f"{ident}_short_configs = op_bench.config_list(",
        f"    attr_names={attrs!r},",
        "    attrs=[",
        short_attrs + ",",
        "    ],",
        "    cross_product_configs={",
        '        "device": ["cpu", "cuda"],',
        f'        "dtype": {short_dtypes},',
        "    },",
        '    tags=["short"],',
        ")",
        "",
        f"{ident}_long_configs = op_bench.cross_product_configs(",
    ]
    for i, name in enumerate(attrs):
        lines.append(f"    {name}={sorted({v[i] for v in layout.long})},")
    lines += [
        '    device=["cpu", "cuda"],',
        f"    dtype={long_dtypes},",
        '    tags=["long"],',
        ")",
        "",
        "",
        f"class {_class_name(schema)}(op_bench.TorchBenchmarkBase):",
        f"    def init(self, {params}):",
    ]
    for name, expr in builder.consts:
        lines.append(f"        self.{name} = {expr}")
    lines.append("        self.inputs = {")
    for name, expr in builder.tensors:
        lines.append(f'            "{name}": {expr},')
    lines += [
        "        }",
        f'        self.set_module_name("{ident}")',
        "",
        f"    def forward(self{''.join(', ' + t for t in tensor_names)}):",
        f"        return {call}({call_args})",
        "",
        "",
        f"op_bench.generate_pt_test({ident}_short_configs + {ident}_long_configs, {_class_name(schema)})",
        "",
        'if __name__ == "__main__":',
        "    op_bench.benchmark_runner.main()",
    ]
    return Scaffold(
        filename=f"{ident.strip('_') or ident}_test.py",
        text="\n".join(lines) + "\n",
        op=schema.full_name,
        call=call,
    )
