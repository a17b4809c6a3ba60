"""perfq's benchmark tracer: which operators each benchmark test's timed region executes.

Run by ``perfq index`` (indexer/trace.py) with the Python that has torch; not imported by
perfq itself. It reads a JSON request on stdin::

    {"jobs": [{"path": "benchmarks/operator_benchmark/pt/add_test.py", "kind": "operator_benchmark",
               "root": "/abs/benchmarks/operator_benchmark", "module": "pt.add_test"},
              {"path": "test/microbench/cdist.py", "kind": "script", "file": "/abs/test/microbench/cdist.py"}],
     "parallel": 2, "timeout": 120, "memory_mb": 3072, "real_tags": ["short"], "remap": ["cuda", "xpu", "mps"]}

and prints one line per job, ``PERFQ-TRACE {"path", "tests": [...], "errors": [...], "seconds",
"max_rss_mb", "status", "reason"}``, as each job finishes. A test's ``ops`` are ``ns::name``,
with ``@quantized`` appended when the operator ran on quantized tensors; its ``dtypes`` are
``ns::name[@quantized]|dtype``, the torch dtypes of its calls' tensor arguments.

How a test is traced:

- torch is imported and warmed up once, then ``PERFQ-READY`` is printed and the benchmark
  harness of each root is imported (stopped past ``warmup_seconds``: every job then fails);
  every job runs in a forked child (dies with its parent, killed past ``timeout`` seconds or
  ``memory_mb``), so one benchmark cannot take the others down. Result files go to the request's
  ``scratch`` directory (perfq runs the driver contained and removes it).
- operator_benchmark files: each config is built and run on its own (the framework would build
  the inputs of every config up front). Configs tagged ``real_tags`` on the CPU run for real, one
  iteration, so the profiler also sees the operators kernels call inside them (``stack`` runs
  ``cat``, quantized modules run aten ops). Every other config (long, other tags, other devices)
  runs under ``FakeTensorMode``: no compute, no memory. Devices in ``remap`` (cuda, xpu...) run
  as CPU, and keep their own test names. A config that fails under fake tensors runs for real.
  Configs of one benchmark that differ only in sizes form a group: its smallest and largest
  configs run, and when they dispatch the same operators the others take them unrun
  (``sampled``; ``"sample_sizes": false`` in the request runs them all).
- A backward test's timed region is its backward pass only, as in the framework.
- Operators come from one ``torch.profiler`` session per job, split by a marker per test. Under
  fake tensors, what runs inside a non-composite operator is the fake kernel's own work and is
  dropped; CompositeImplicitAutograd operators keep their decomposition.
- scripts: the whole script runs on the meta device with devices remapped (under
  ``FakeTensorMode`` when that fails, real when fake fails); its timed region is every
  ``with torch.profiler.profile(...)`` block, or the whole run when it has none. What it runs on
  host tensors there (``torch.randn(n).to(device)`` draws on the CPU) is a second test of it on the
  CPU, ``stem[host]`` (see ``_DeviceRemap``): a change to a device's kernel does not select the
  script for operators it runs only on the host.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import ctypes
import gc
import importlib
import json
import math
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
import warnings
import weakref

_OP_NAME = re.compile(r"^([A-Za-z_]\w*)::([A-Za-z_]\w*)$")
_NOT_OP_NAMESPACES = {"autograd", "torch", "perfq", "profiler", "c10d"}
_MARK = "perfq-test-"
_HOST = "perfq-host"  # around a script's call on host tensors (_DeviceRemap)
_ON_HOST = "|host"  # the name of a part of a timed region inside _HOST markers
_HOST_TEST = "[host]"  # a script's test of the operators it runs on host tensors, on the CPU
_READY = "PERFQ-READY"  # printed once torch is warmed up, before any code of the repository runs
_PYTHON_DISPATCH = {"PythonDispatchMode", "PythonSubclass", "PythonTLSSnapshot"}


# ----------------------------------------------------------------------------- Python line truth

# torch's own machinery for shapes-only runs: what runs there and below (fake tensors, meta
# kernels in Python, the references they decompose to) is not what a real run executes, so
# shapes-only tests record no line of it nor of what it calls
_SHAPES_ONLY_MACHINERY = ("torch/_subclasses/", "torch/_prims", "torch/_refs/", "torch/_decomp/",
                          "torch/_meta_registrations.py", "torch/utils/_python_dispatch.py", "torch/fx/",
                          "torch/_library/", "torch/_dynamo/", "torch/_guards.py")
# the tracer's own instruments (the profiler and its markers), never the benchmark's
_INSTRUMENTS = ("torch/profiler/", "torch/autograd/profiler")
_MACHINERY = object()  # a file of _SHAPES_ONLY_MACHINERY
_UNSEEN = object()


class _LineRecorder:
    """Per-test Python line coverage with ``sys.settrace``: the lines a test runs in the benchmark
    tree's shared modules (harness, configs: its build and its timed region, as the build decides
    the test) and in torch's own Python (its timed region only, as its operators: what the
    benchmark's ``init`` runs there, ``nn.Linear.reset_parameters``, is setup the benchmark does
    not time), as repository-relative paths (torch's as ``torch/...``, the module-relative path that
    maps the installed torch onto the indexed sources). What the cyclic garbage collector runs
    (finalizers, weakref callbacks) is no test's: it collects earlier tests' garbage whenever
    allocations reach a threshold, so its lines would land on a test by chance."""

    def __init__(self, tree: str, tree_rel: str, own: str) -> None:
        import torch

        torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        self.prefixes = ((os.path.abspath(tree) + os.sep, tree_rel), (torch_dir + os.sep, "torch/"))
        self.own = os.path.abspath(own)  # the benchmark file itself: its changes select it whole
        # co_filename -> its line tracer (None: not recorded; _MACHINERY: shapes-only machinery)
        self.tracers: dict[str, object] = {}
        self.hits: dict[str, set[int]] = {}  # per file, kept across tests (take() empties them)
        self.shapes_only = self.tree_only = False
        self.below = 0  # machinery frames entered and not left (shapes-only runs record nothing there)
        self.collecting = False  # inside a garbage collection: nothing is recorded
        gc.callbacks.append(self._collection)

    def _collection(self, phase: str, info: dict) -> None:
        self.collecting = phase == "start"

    def _relative(self, filename: str) -> str | None:
        found = os.path.abspath(filename) if filename.endswith(".py") and os.path.isabs(filename) else ""
        rel = next((prefix + found[len(root):] for root, prefix in self.prefixes
                    if found.startswith(root) and found != self.own), None)
        return None if rel is None or rel.startswith(_INSTRUMENTS) else rel

    def _tracer_of(self, filename: str) -> object:
        """The line tracer of a file (made once: this runs on every call)."""
        rel = self._relative(filename)
        if rel is None:
            tracer = None
        elif rel.startswith(_SHAPES_ONLY_MACHINERY):
            tracer = _MACHINERY
        else:
            add = self.hits.setdefault(rel, set()).add

            def tracer(frame, event, arg):
                if event == "line":
                    add(frame.f_lineno)
                return tracer

            tracer.path, tracer.add = rel, add  # type: ignore[attr-defined]
        self.tracers[filename] = tracer
        return tracer

    def _call(self, frame, event, arg):
        if self.below or self.collecting:
            return None
        code = frame.f_code
        tracer = self.tracers.get(code.co_filename, _UNSEEN)
        if tracer is _UNSEEN:
            tracer = self._tracer_of(code.co_filename)
        if self.shapes_only and (tracer is _MACHINERY or code.co_name == "__torch_dispatch__"):
            self.below += 1
            return self._leave
        if tracer is None or tracer is _MACHINERY or (self.tree_only and tracer.path.startswith("torch/")):
            return None
        tracer.add(frame.f_lineno)
        return tracer

    def _leave(self, frame, event, arg):
        """The local tracer of a machinery frame: recording resumes when it returns."""
        if event == "return":
            self.below -= 1
        return self._leave

    @contextlib.contextmanager
    def recording(self, shapes_only: bool, tree_only: bool = False):
        """Record while in the block; ``tree_only``: the benchmark tree's files only (an import
        runs torch's module-level code, which no test tells apart)."""
        self.shapes_only, self.tree_only, self.below = shapes_only, tree_only, 0
        previous = sys.gettrace()
        sys.settrace(self._call)
        try:
            yield
        finally:
            sys.settrace(previous)

    @contextlib.contextmanager
    def timed(self):
        """The test's timed region, inside a ``recording(tree_only=True)``: torch's lines count
        here too (no torch frame outlives its bounds: the tracer's own code enters and leaves it)."""
        saved, self.tree_only = self.tree_only, False
        try:
            yield
        finally:
            self.tree_only = saved

    def take(self) -> dict[str, list[int]]:
        """The lines recorded since the last take, per file."""
        out = {path: sorted(lines) for path, lines in sorted(self.hits.items()) if lines}
        for lines in self.hits.values():
            lines.clear()
        return out

    def torch_line_digests(self, tests: list[dict]) -> dict[str, list[int]]:
        """Per torch file a test ran, a digest of each of its lines (stripped text): the installed
        torch is not the indexed source, and a line is trusted only where its text matches."""
        import zlib

        out = {}
        torch_root = self.prefixes[1][0]
        for path in sorted({p for t in tests for p in t.get("lines", {}) if p.startswith("torch/")}):
            try:
                with open(torch_root + path[len("torch/"):], "rb") as fh:
                    out[path] = [zlib.crc32(row.strip()) & 0x7FFFFFFF for row in fh.read().splitlines()]
            except OSError:
                continue
        return out


def _tree_of(job: dict) -> str:
    """The repository-relative folder of a benchmark root (``benchmarks/operator_benchmark/``)."""
    own = job["module"].replace(".", "/") + ".py"
    return job["path"][: -len(own)] if job["path"].endswith(own) else ""


# ----------------------------------------------------------------------------- child side


def _die_with_parent() -> None:
    """Linux: the child gets SIGKILL when the tracer dies (a killed ``perfq index``)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _DeviceRemap:
    """Runs ``device=cuda/xpu/...`` requests on ``target`` (the CPU, or ``meta`` for shapes
    only): a TorchFunctionMode for tensor functions, and patches for modules, generators and
    the backends' synchronize/is_available helpers.

    For a script (``host=True``) the mode also tells the calls the real script makes on the
    host apart: a remapped run puts every tensor on the target, but ``torch.randn(n).to(device)``
    draws on the CPU, not on the device. Tensors are tagged host-made: a factory asked for no
    device (the real default is the CPU, unless the script set a remapped default device), for
    the CPU, or a call whose tensor arguments are all host-made and that asks for no remapped
    device. ``.to(device)``, ``.xpu()``, a remapped ``device=`` make device tensors; untagged
    tensors (module parameters, what autograd makes) count as device ones. Each host call runs
    inside a ``_HOST`` marker, so the profile tells its operators (and those inside them)
    apart."""

    def __init__(self, remap: set[str], host: bool = False) -> None:
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.profiler import record_function

        self.target = "cpu"
        self.seen: set[str] = set()
        self.host: dict[int, weakref.ref] = {}  # id -> tensor made on the host
        self.default_on_device = False  # the script set a remapped default device
        remapper = self

        def fix(value):
            if isinstance(value, str) and value.split(":")[0] in remap:
                remapper.seen.add(value.split(":")[0])
                return remapper.target
            if isinstance(value, torch.device) and value.type in remap:
                remapper.seen.add(value.type)
                return torch.device(remapper.target)
            return value

        def on_host(device) -> bool:
            """Whether a device request names the host: ``"cpu"``; a ``torch.device("cpu")``
            only where the target is not the CPU (a remapped tensor's ``.device`` is the target)."""
            if isinstance(device, str):
                return device.split(":")[0] == "cpu"
            return isinstance(device, torch.device) and device.type == "cpu" and remapper.target != "cpu"

        def is_host(value) -> bool:
            ref = remapper.host.get(id(value))
            return ref is not None and ref() is value

        def tensors(values) -> list:
            out = []
            for v in values:
                if isinstance(v, torch.Tensor):
                    out.append(v)
                elif isinstance(v, list | tuple):
                    out += [t for t in v if isinstance(t, torch.Tensor)]
            return out

        def tag(result, made_on_host: bool) -> None:
            for t in tensors([result]):
                if made_on_host:
                    key = id(t)
                    remapper.host[key] = weakref.ref(t, lambda ref, key=key: remapper.host.get(key) is ref
                                                     and remapper.host.pop(key))
                else:
                    remapper.host.pop(id(t), None)

        self.fix, self.is_host = fix, is_host

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                name = getattr(func, "__name__", "")
                asked = kwargs.get("device")  # the device the call asks for (None: none)
                if "device" in kwargs:
                    kwargs["device"] = fix(kwargs["device"])
                if name in ("to", "cuda", "xpu") and args:
                    if name != "to":
                        if host:
                            tag(args[0], False)
                        return args[0]
                    asked = next((a for a in args[1:] if isinstance(a, str | torch.device)), asked)
                    args = (args[0], *[fix(a) for a in args[1:]])
                if not host:
                    return func(*args, **kwargs)
                if asked is not None or name == "cpu":
                    on = name == "cpu" or on_host(asked)
                else:
                    inputs = tensors([*args, *kwargs.values()])
                    on = all(map(is_host, inputs)) if inputs else not remapper.default_on_device
                if not on:
                    result = func(*args, **kwargs)
                else:
                    with record_function(_HOST):
                        result = func(*args, **kwargs)
                tag(result, on)
                return result

        self.mode = Mode()
        module_to = torch.nn.Module.to

        def to(module, *args, **kwargs):
            """``module.to(device)`` onto the device it is already on: nothing to do (fake
            parameters cannot be swapped by ``Module._apply``); its tensors are device ones."""
            target = kwargs.get("device", args[0] if args else None)
            same = isinstance(target, str | torch.device) and str(fix(target)).split(":")[0] == remapper.target
            if len(args) + len(kwargs) == 1 and same:
                if host and not on_host(target):
                    for t in [*module.parameters(), *module.buffers()]:
                        tag(t, False)
                return module
            return module_to(module, *args, **kwargs)

        torch.nn.Module.to = to
        generator = torch.Generator

        class Generator(generator):  # a device generator on a CPU-only build: a CPU one
            def __new__(cls, device="cpu"):
                return generator("cpu")

        torch.Generator = Generator
        if host:
            set_default_device = torch.set_default_device

            def set_default(device) -> None:
                """A remapped default device: factories then make device tensors (on the target,
                the tracer's own default)."""
                remapper.default_on_device = fix(device) is not device
                if not remapper.default_on_device:
                    set_default_device(device)

            torch.set_default_device = set_default
        for name in remap:
            backend = getattr(torch, name, None)
            if backend is not None:
                for attr in ("synchronize", "empty_cache", "reset_peak_memory_stats", "manual_seed"):
                    if hasattr(backend, attr):
                        setattr(backend, attr, lambda *a, **k: None)
                if hasattr(backend, "is_available"):
                    backend.is_available = lambda: True
                if hasattr(backend, "device_count"):
                    backend.device_count = lambda: 1


def _layout(event) -> str:
    """'@quantized' when the operator ran on quantized tensors (its kernels are others)."""
    try:
        dtypes = event.dtypes()
    except Exception:
        return ""
    return "@quantized" if dtypes and str(dtypes[0]).startswith("c10::q") else ""


# the profiler's C++ type names of tensor arguments -> torch's dtype names
_TORCH_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "int": "int32",
    "long int": "int64", "bool": "bool", "c10::complex<c10::Half>": "complex32",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
    "c10::qint8": "qint8", "c10::quint8": "quint8", "c10::qint32": "qint32",
    "c10::quint4x2": "quint4x2", "c10::quint2x4": "quint2x4",
}


_DTYPE_CALLS = 16  # calls of one operator per test whose argument types are read


def _torch_dtypes(dtypes) -> set[str]:
    """torch's names of the tensor dtypes among a call's argument types (a kernel dispatches on
    one of them: ``iter.dtype()``, a ``where``'s values after its bool mask)."""
    out = set()
    for name in map(str, dtypes):
        if name in _TORCH_DTYPES:
            out.add(_TORCH_DTYPES[name])
        elif name.startswith("c10::Float8_"):
            out.add("float8_" + name[len("c10::Float8_") :])
    return out


def _dtypes_per_marker(events, markers: list[tuple[int, int, str]], ops: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per marker, ``ns::op@layout|dtype`` of the calls of the operators ``ops`` records for it
    (the dtypes of each call's tensor arguments; calls that took none are left out). One look at
    each event's name; argument types are read for those operators only, and for the first
    ``_DTYPE_CALLS`` calls of each in a test (a loop repeats its calls: reading every call's
    types costs half the operators' own pass)."""
    starts = [m[0] for m in markers]
    names = {marker: {entry.partition("@")[0] for entry in entries} for marker, entries in ops.items()}
    wanted = set().union(*names.values()) if names else set()
    out: dict[str, set[str]] = {}
    read: dict[tuple[str, str], int] = {}
    for e in events:
        name = e.name()
        if name not in wanted:
            continue
        k = bisect.bisect_right(starts, e.start_ns()) - 1
        if k < 0 or e.start_ns() >= markers[k][1] or name not in names[markers[k][2]]:
            continue
        seen = read.get((markers[k][2], name), 0)
        if seen >= _DTYPE_CALLS:
            continue
        read[(markers[k][2], name)] = seen + 1
        try:
            dtypes = e.dtypes() or []
        except Exception:
            continue
        entry = name + ("@quantized" if dtypes and str(dtypes[0]).startswith("c10::q") else "")  # as _layout
        if entry in ops[markers[k][2]]:
            out.setdefault(markers[k][2], set()).update(f"{entry}|{dtype}" for dtype in _torch_dtypes(dtypes))
    return out


def _op_name(event) -> str | None:
    m = _OP_NAME.match(event.name())
    if m is None or m.group(1) in _NOT_OP_NAMESPACES:
        return None
    return event.name()


def _graph_level(tests: list[dict]) -> set[str]:
    """The operators some of ``tests`` ran at graph level (their ops less their inner ones)."""
    return set().union(*(set(t.get("ops", ())) - set(t.get("inner", ())) for t in tests))


def _markers(events, prefix: str = _MARK) -> list[tuple[int, int, str]]:
    """(start, end, suffix) of the marker events whose name starts with ``prefix``."""
    return sorted((e.start_ns(), e.end_ns(), e.name()[len(prefix) :]) for e in events if e.name().startswith(prefix))


def _ops_per_marker(
    events, markers: list[tuple[int, int, str]], modes: dict[str, str], graph: dict[str, set[str]] | None = None
) -> dict[str, set[str]]:
    """Operator names executed inside each marker (non-overlapping, by time, on any thread);
    ``modes``: marker -> real | fake (see the module docstring for what fakes hide). ``graph``,
    when given, gets per marker those run at least once at graph level: called from Python or
    inside composite (CompositeImplicitAutograd) operators only, not inside another operator's
    kernel (what torch.compile's graph holds and its lowerings replace)."""
    import torch

    composite: dict[str, bool] = {}

    def is_composite(name: str) -> bool:
        """Whether some overload of ``ns::op`` decomposes above autograd (its children are real calls)."""
        if name not in composite:
            namespace, _, op = name.partition("::")
            try:
                packet = getattr(getattr(torch.ops, namespace), op)
                composite[name] = any(
                    torch._C._dispatch_has_kernel_for_dispatch_key(
                        f"{name}.{o}" if o != "default" else name, "CompositeImplicitAutograd"
                    )
                    for o in packet.overloads()
                )
            except Exception:
                composite[name] = False
        return composite[name]

    starts = [m[0] for m in markers]
    out: dict[str, set[str]] = {m[2]: set() for m in markers}
    by_thread: dict[int, list] = {}
    for e in events:
        by_thread.setdefault(e.start_thread_id(), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start_ns(), -e.end_ns()))
        # (end, its children are fake-kernel work, name, its children run inside an operator's kernel)
        stack: list[tuple[int, bool, str, bool]] = []
        for e in evs:
            while stack and stack[-1][0] <= e.start_ns():
                stack.pop()
            hidden = bool(stack) and stack[-1][1]
            inner = bool(stack) and stack[-1][3]
            name = _op_name(e)
            k = bisect.bisect_right(starts, e.start_ns()) - 1
            marker = markers[k][2] if k >= 0 and e.start_ns() < markers[k][1] else None
            if name and marker is not None and not hidden:
                out[marker].add(name + _layout(e))
                if graph is not None and not inner:
                    graph.setdefault(marker, set()).add(name + _layout(e))
            fake = marker is not None and modes.get(marker) == "fake"
            # under fake tensors, what a kernel or a Python decomposition runs is fake-tensor work;
            # a composite calling an overload of its own name calls that overload's kernel
            python_level = e.name() in _PYTHON_DISPATCH
            same_as_parent = bool(stack) and stack[-1][2] == e.name()
            kernel = name is not None and (same_as_parent or not is_composite(name))
            stack.append((e.end_ns(), hidden or (fake and (kernel or python_level)), e.name(), inner or kernel))
    return out


class _Deadline(Exception):
    pass


class _WarmUpDeadline(BaseException):  # not an Exception: the warm-up's own handlers must not swallow it
    pass


def _warm_up_alarm(_signum, _frame):
    raise _WarmUpDeadline


def _alarm(_signum, _frame):
    raise _Deadline("config took too long")


class _OpBenchTracer:
    """Traces the configs of one operator_benchmark module, real pass first (checkpointed)."""

    def __init__(self, job: dict, request: dict, checkpoint: str) -> None:
        import torch

        self.job, self.checkpoint = job, checkpoint
        self.remap = set(request.get("remap", []))
        self.real_tags = set(request.get("real_tags", ["short"]))
        self.fake_allowed = not request.get("no_fake", False)
        self.sample_sizes = request.get("sample_sizes", True)
        self.config_seconds = int(request.get("config_seconds", 20))
        self.real_bytes = int(request.get("real_mb", 256)) * 2**20
        self.tests: list[dict] = []
        self.errors: list[str] = []
        own = os.path.join(job["root"], job["module"].replace(".", "/") + ".py")
        self.lines = _LineRecorder(job["root"], _tree_of(job), own) if request.get("lines", True) else None
        sys.path.insert(0, job["root"])
        os.chdir(job["root"])
        import benchmark_core
        import benchmark_pytorch

        self.core, self.device = benchmark_core, None
        cuda_available = torch.cuda.is_available
        torch.cuda.is_available = lambda: True  # keep cuda configs (they run remapped)
        _DeviceRemap(self.remap)  # stubs torch.cuda/xpu helpers
        test_name = benchmark_pytorch.TorchBenchmarkBase.test_name
        tracer = self

        def named(bench, **kwargs):  # a remapped config keeps its own device in the test name
            if tracer.device and "device" in kwargs:
                kwargs["device"] = tracer.device
            return test_name(bench, **kwargs)

        benchmark_pytorch.TorchBenchmarkBase.test_name = named
        signal.signal(signal.SIGALRM, _alarm)
        self.import_lines: dict[str, list[int]] = {}
        try:
            with self.lines.recording(shapes_only=False, tree_only=True) if self.lines else contextlib.nullcontext():
                importlib.import_module(job["module"])
            self.import_lines = self.lines.take() if self.lines else {}
        except Exception:  # it asked the faked CUDA device for more (torch.testing._internal does)
            # imported as the machine is: the cuda configs it lists still run remapped, those it
            # would add only when CUDA is available are not there (modules that failed are not in
            # sys.modules, so they import again)
            torch.cuda.is_available = cuda_available
            importlib.import_module(job["module"])

    def configs(self) -> list[tuple]:
        """(test metainfo, config, tag, device) for every config of the module."""
        out = []
        for meta in self.core.BENCHMARK_TESTER:
            for config in meta[0]:
                tag = next((a["tags"] for a in config if "tags" in a), "")
                device = next((str(v) for a in config for k, v in a.items() if k == "device"), "cpu")
                out.append((meta, config, tag, device))
        return out

    def run(self) -> dict:
        real, other = [], []
        for item in self.configs():
            (real if item[2] in self.real_tags and item[3] not in self.remap else other).append(item)
        self._pass(real, "real")
        self._save()
        if not self.fake_allowed:
            self._pass(other, "inferred")
        elif self.sample_sizes:
            self._sampled_pass(other)
        else:
            self._pass(other, "fake")
        digests = self.lines.torch_line_digests(self.tests) if self.lines else {}
        return {"tests": self.tests, "errors": self.errors, "line_digests": digests}

    def _sampled_pass(self, items: list[tuple]) -> None:
        """The shapes-only pass, sampled: configs of one benchmark that differ only in sizes
        dispatch the same operators (unless a size decides the path), so the smallest and the
        largest of each such group are traced and, when they agree, the others take their
        operators without running (``sampled``)."""
        groups: dict[tuple, list[tuple]] = {}
        for item in items:
            groups.setdefault(_without_sizes(item), []).append(item)
        groups = {key: sorted(group, key=_size) for key, group in groups.items()}
        ends = [g[0] for g in groups.values()] + [g[-1] for g in groups.values() if len(g) > 1]
        spans = dict(zip(map(id, ends), self._pass(ends, "fake"), strict=True))
        self._save()
        rest = []
        for group in groups.values():
            first, last = (self.tests[slice(*spans[id(end)])] for end in (group[0], group[-1]))
            agree = _same_operators(first, last)
            rest += [item for item in group[1:-1] if not (agree and self._copy(item, first))]
        self._pass(rest, "fake")

    def _copy(self, item: tuple, like: list[dict]) -> bool:
        """Add the tests of config ``item`` (built unrun, to be named) with the operators of
        ``like``, the tests of a config of its group, case by case; False when they do not pair."""
        meta, config, tag, device = item
        self.device = device
        cases = self._cases(meta, config, tag)
        if len(cases) != len(like):
            return False
        for case, entry in zip(cases, like, strict=True):
            mode = "inferred" if entry["mode"] == "inferred" else "sampled"
            self.tests.append({**self._entry(case, device, mode), "ops": entry["ops"], "inner": entry.get("inner", []),
                               "dtypes": entry.get("dtypes", []), "lines": entry.get("lines", {})})
        return True

    def _save(self) -> None:
        with open(self.checkpoint, "w", encoding="utf-8") as fh:
            json.dump({"tests": self.tests, "errors": self.errors}, fh)

    def _pass(self, items: list[tuple], mode: str) -> list[tuple[int, int]]:
        """Run ``items`` in one profiler session; the span of ``self.tests`` each one added."""
        from torch.profiler import ProfilerActivity, profile

        if not items:
            return []

        first = len(self.tests)
        modes: dict[str, str] = {}
        spans = []
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for meta, config, tag, device in items:
                self.device = device
                done = len(self.tests)
                signal.alarm(self.config_seconds)
                try:
                    self._run_config(meta, config, tag, device, mode, modes)
                except Exception as exc:
                    del self.tests[done:]
                    if mode == "real" or not self._infer(meta, config, tag, device):
                        self.errors.append(f"{tag}/{device}: {type(exc).__name__}: {str(exc)[:160]}")
                finally:
                    signal.alarm(0)
                spans.append((done, len(self.tests)))
        events = prof.profiler.kineto_results.events()
        graph: dict[str, set[str]] = {}
        markers = _markers(events)
        ops = _ops_per_marker(events, markers, modes, graph)
        dtypes = _dtypes_per_marker(events, markers, ops)
        for i in range(first, len(self.tests)):
            if self.tests[i]["mode"] != "inferred":
                ran = ops.get(str(i), set())
                self.tests[i]["ops"] = sorted(ran)
                self.tests[i]["inner"] = sorted(ran - graph.get(str(i), set()))
                self.tests[i]["dtypes"] = sorted(dtypes.get(str(i), set()))
        return spans

    def _local(self, config, target: str, remap: set[str]) -> list[dict]:
        """The config with its device values in ``remap`` replaced by ``target``."""
        return [{k: (target if k == "device" and v in remap else v) for k, v in a.items()} for a in config]

    def _run_config(self, meta, config, tag: str, device: str, mode: str, modes: dict[str, str]) -> None:
        """Real configs run on the CPU unless they are too big; the others on the meta device
        (shapes only), else under fake tensors; a config that neither can run raises."""
        if mode == "real":
            local = self._local(config, "cpu", self.remap)
            if self._bytes_needed(meta, local, tag) <= self.real_bytes:
                self._build_and_run(meta, local, tag, device, "real", modes)
                return
        if mode == "inferred":
            raise _Deadline("fake tensors disabled")
        done = len(self.tests)
        try:
            self._build_and_run(meta, self._local(config, "meta", self.remap | {"cpu"}), tag, device, "meta", modes)
        except Exception:
            del self.tests[done:]
            self._build_and_run(meta, self._local(config, "cpu", self.remap), tag, device, "fake", modes)

    def _build_and_run(self, meta, config, tag: str, device: str, mode: str, modes: dict[str, str]) -> None:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.profiler import record_function

        def shapes_only() -> contextlib.ExitStack:
            stack = contextlib.ExitStack()
            if mode == "fake":
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
            elif mode == "meta":
                stack.enter_context(torch.device("meta"))
            if mode != "real":
                stack.enter_context(_no_quantized_tensors())
            return stack

        generated = self.core._build_test([config], *meta[1:])
        built: dict[str, list[int]] = {}  # lines the config's tests ran so far (its generator builds them in turn)
        while True:
            with shapes_only(), self._recording(mode):
                try:
                    _, case = next(generated)
                except StopIteration:
                    break
                marker = str(len(self.tests))
                modes[marker] = "real" if mode == "real" else "fake"
                if case.test_config.run_backward:  # the timed region is the backward pass only
                    case.run_forward(1, False, False)
                    case._output_mean()
                    with record_function(_MARK + marker), self._timed():
                        case.run_backward(1)
                else:
                    with record_function(_MARK + marker), self._timed():
                        case.run_forward(1, False, False)
            built = _union_lines([{"lines": built}, {"lines": self._test_lines()}])
            self.tests.append({**self._entry(case, device, mode), "lines": built})

    def _test_lines(self) -> dict[str, list[int]]:
        """The lines the test just run ran, with those its module's import ran (it builds the
        configs: every test of the file depends on them). The tests of one config take the lines of
        those built before them too: the framework builds a gradient test per input from a copy of
        the first one's benchmark (its ``bench_op()`` ran for them all)."""
        if self.lines is None:
            return {}
        return _union_lines([{"lines": self.lines.take()}, {"lines": self.import_lines}])

    def _recording(self, mode: str) -> contextlib.AbstractContextManager:
        """Line coverage of one test (its build and run: the benchmark tree's lines; torch's in
        ``_timed`` only), when asked for; lines left from a failed test are dropped first."""
        if self.lines is None:
            return contextlib.nullcontext()
        self.lines.take()
        return self.lines.recording(shapes_only=mode != "real", tree_only=True)

    def _timed(self) -> contextlib.AbstractContextManager:
        """The test's timed region, where torch's lines are recorded too."""
        return self.lines.timed() if self.lines is not None else contextlib.nullcontext()

    def _bytes_needed(self, meta, config, tag: str) -> int:
        """Bytes of the tensors a config's first test holds, measured on a build of its cases
        unrun (0 when they cannot be built)."""
        import torch

        def size(value) -> int:
            if isinstance(value, torch.Tensor):
                return value.numel() * value.element_size()
            if isinstance(value, torch.nn.Module):
                return sum(size(t) for t in [*value.parameters(), *value.buffers()])
            if isinstance(value, dict):
                return sum(size(v) for v in value.values())
            if isinstance(value, list | tuple):
                return sum(size(v) for v in value)
            return 0

        return sum(size(v) for v in vars(self._cases(meta, config, tag)[0].op_bench).values())

    @staticmethod
    def _entry(case, device: str, mode: str) -> dict:
        return {
            "name": case.test_config.test_name,
            "module": case.op_bench.module_name(),
            "class": type(case.op_bench).__name__,
            "tag": case.test_config.tag,
            "backward": bool(case.test_config.run_backward),
            "device": device,
            "mode": mode,
        }

    def _infer(self, meta, config, tag: str, device: str) -> bool:
        """A config that cannot run fake (quantized tensors, packed weights...) takes the
        operators of the real tests of its module and direction, without running."""
        added = []
        for case in self._cases(meta, config, tag):
            entry = self._entry(case, device, "inferred")
            same = [
                t
                for t in self.tests
                if t["mode"] == "real" and t["module"] == entry["module"] and t["backward"] == entry["backward"]
            ] or [t for t in self.tests if t["mode"] == "real" and t["class"] == entry["class"]]
            if not same:
                return False
            ran = set().union(*(t.get("ops", ()) for t in same))
            dtypes = set().union(*(t.get("dtypes", ()) for t in same))
            inner = sorted(ran - _graph_level(same))
            added.append({**entry, "ops": sorted(ran), "inner": inner, "dtypes": sorted(dtypes),
                          "lines": _union_lines(same)})
        self.tests += added
        return bool(added)

    def _cases(self, meta, config, tag: str) -> list:
        """The framework's test cases of ``config``, unrun: built on the meta device or under
        fake tensors, so that their names are the framework's (an init may name its module, a
        gradient test has one case per input); named from the config alone when neither builds."""
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        on_meta = self._local(config, "meta", self.remap | {"cpu"})
        for context, local in ((torch.device("meta"), on_meta), (FakeTensorMode(allow_non_fake_inputs=True), config)):
            try:
                with context:
                    return [case for _, case in self.core._build_test([local], *meta[1:])]
            except Exception:
                continue
        bench = meta[1]()
        if len(meta) > 4 and meta[4] is not None:  # op_list benchmarks: the op's name
            bench.set_module_name(meta[4]["op_name"])
        attrs = {k: v for a in config for k, v in a.items() if k != "tags"}
        return [self.core._create_test(bench, attrs, tag, meta[2], meta[3], None)[1]]


def _union_lines(tests: list[dict]) -> dict[str, list[int]]:
    """The lines any of ``tests`` ran, per file."""
    out: dict[str, set[int]] = {}
    for test in tests:
        for path, lines in test.get("lines", {}).items():
            out.setdefault(path, set()).update(lines)
    return {path: sorted(lines) for path, lines in sorted(out.items())}


def _without_sizes(item: tuple) -> tuple:
    """A config's benchmark, device and attributes, with every size (an int, or a shape of
    ints) kept only as its structure: what decides the operators a shapes-only run dispatches."""

    def shape(value):
        if isinstance(value, int) and not isinstance(value, bool):
            return "#"
        if isinstance(value, list | tuple):
            return tuple(map(shape, value))
        return repr(value)

    meta, config, _, device = item
    return (id(meta), device, tuple((k, shape(v)) for a in config for k, v in a.items() if k != "tags"))


def _size(item: tuple) -> int:
    """The product of a config's sizes: how big its tensors are, roughly."""
    return math.prod(n for attr in item[1] for value in attr.values() for n in _ints(value))


def _ints(value) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    return [n for v in value for n in _ints(v)] if isinstance(value, list | tuple) else []


def _same_operators(first: list[dict], last: list[dict]) -> bool:
    """Did two configs of a group trace the same operators, case by case?"""
    return len(first) == len(last) > 0 and all(a["ops"] == b["ops"] for a, b in zip(first, last, strict=True))


def _trace_opbench(job: dict, request: dict, checkpoint: str) -> dict:
    return _OpBenchTracer(job, request, checkpoint).run()


class _FewerLoops(ast.NodeTransformer):
    """``for x in range(...)`` runs at most ``_LOOP_CAP`` times: the same operators, fewer calls."""

    def visit_For(self, node: ast.For) -> ast.For:  # noqa: N802 - ast visitor name
        self.generic_visit(node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it.func = ast.Name(id="__perfq_range__", ctx=ast.Load())
        return node


_LOOP_CAP = 2


def _capped_range(*args):
    r = range(*args)
    return r[:_LOOP_CAP]


def _script_code(path: str):
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    return compile(ast.fix_missing_locations(_FewerLoops().visit(tree)), path, "exec")


_QUANTIZED_FACTORIES = {
    "quantize_per_tensor",
    "quantize_per_tensor_dynamic",
    "quantize_per_channel",
    "_empty_affine_quantized",
    "_empty_per_channel_affine_quantized",
    "_make_per_tensor_quantized_tensor",
    "_make_per_channel_quantized_tensor",
}


def _no_quantized_tensors():
    """A function mode for the shapes-only runs: on the meta device and under fake tensors a
    quantized tensor comes out a plain float one (``quantize_per_tensor`` returns float32), so
    a quantized config would be traced running dense operators. Making one raises instead:
    the config then takes the operators of its module's real tests, or runs for real. (A
    function mode: a dispatch mode would change what the profiler nests under each operator.)"""
    from torch.overrides import TorchFunctionMode

    class NoQuantized(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in _QUANTIZED_FACTORIES:
                raise NotImplementedError(f"{func.__name__}: no quantized tensors in a shapes-only run")
            return func(*args, **(kwargs or {}))

    return NoQuantized()


def _meta_gaps():
    """A dispatch mode for the meta device: an operator with no meta kernel returns empty
    tensors shaped like its first tensor input instead of raising (what follows still runs,
    so the trace goes on; the values were never real anyway)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Gaps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                named = {a.name: v for a, v in zip(func._schema.arguments, args, strict=False)} | kwargs
                tensors = [v for v in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
                like = next((named[n] for n in ("self", "input") if isinstance(named.get(n), torch.Tensor)), None)
                like = like if like is not None else max(tensors, key=lambda t: t.numel())
                outs = [torch.empty_like(like) for r in func._schema.returns if str(r.type) == "Tensor"]
                if not outs:
                    raise
                return outs[0] if len(func._schema.returns) == 1 else tuple(outs)

    return Gaps()


_SMALL = 4  # the largest dimension of a tensor the small real run creates
_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "randperm", "empty_strided"}


def _small_tensors():
    """A TorchFunctionMode that creates tensors with every dimension cut to ``_SMALL``: the
    script's operators run for real on the CPU, cheaply, so what their kernels call shows.
    ``empty`` tensors are zeroed and ints written into integer tensors taken modulo ``_SMALL``,
    so indices the script makes in Python still fall inside the cut tensors they index."""
    import torch
    from torch.overrides import TorchFunctionMode

    def cut(value):
        if isinstance(value, int) and not isinstance(value, bool):
            return min(value, _SMALL)
        if isinstance(value, tuple | list | torch.Size) and value and all(isinstance(v, int) for v in value):
            return type(value)(min(v, _SMALL) for v in value) if not isinstance(value, torch.Size) else [
                min(v, _SMALL) for v in value
            ]
        return value

    def is_index(tensor, value) -> bool:  # idx[i] = random.randint(0, n): a non-negative int, integer tensor
        return (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0 and isinstance(tensor, torch.Tensor)
            and not (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool)
        )

    class Small(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name == "__setitem__" and len(args) == 3 and is_index(args[0], args[2]):
                args = (args[0], args[1], args[2] % _SMALL)  # an index into a cut dimension, likely
            if name in _FACTORIES:
                if name == "randint":  # (high, size) or (low, high, size): only the size
                    args = (*args[:-1], cut(args[-1])) if args and not isinstance(args[-1], int) else args
                elif name == "full":
                    args = (cut(args[0]), *args[1:]) if args else args
                else:
                    args = tuple(cut(a) for a in args)
                if "size" in kwargs:
                    kwargs["size"] = cut(kwargs["size"])
                if name == "empty":  # what the script leaves unset must index the cut tensors too
                    return func(*args, **kwargs).zero_()
            return func(*args, **kwargs)

    return Small()


def _add_small_real(found: list[tuple[dict, bool | None]], attempt, parts, budgets: dict) -> None:
    """Run the script once more for real on the CPU with small tensors and record what ran
    inside other operators there (an index with a boolean mask runs nonzero; a loss's mean):
    ``nested`` pairs (parent, child), as far as the run got. perfq keeps a pair for a test on
    another device only where the parent's kernel for that device is not the backend's own.
    ``found``: the script's tests, each with the parts of the timed region it takes (see
    ``_on_side``)."""
    prof, _failure = attempt("small", budgets.get("small", 20))
    events = prof.profiler.kineto_results.events()
    cut = parts(events)
    for test, side in found:
        top = set(test["ops"])
        markers = [m for m in cut if _on_side(m[2], side)]
        test["nested"] = sorted([p, c] for p, c in _nested_pairs(events, markers) if c not in top and p != c)


def _host_parts(regions: list[tuple[int, int, str]], hosts: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The timed ``regions`` (start, end, name) cut by the ``_HOST`` markers in them: the parts
    inside a marker are named ``name + _ON_HOST``, the others keep ``name`` (non-overlapping)."""
    starts = [h[0] for h in hosts]
    out = []
    for start, end, name in regions:
        cursor = start
        for host_start, host_end, _ in hosts[bisect.bisect_left(starts, start) : bisect.bisect_left(starts, end)]:
            if host_start < cursor:  # inside the one before
                continue
            if host_start > cursor:
                out.append((cursor, host_start, name))
            cursor = min(host_end, end)
            out.append((host_start, cursor, name + _ON_HOST))
        if cursor < end:
            out.append((cursor, end, name))
    return out


def _on_side(part: str, side: bool | None) -> bool:
    """Whether a part of the timed region belongs to a test of ``side``: the host's (True), the
    device's (False) or both (None: nothing ran remapped, the whole script ran on the CPU)."""
    return side is None or part.endswith(_ON_HOST) == side


def _nested_pairs(events, markers: list[tuple[int, int, str]]) -> set[tuple[str, str]]:
    """(parent op, child op) for every operator called inside another within ``markers``."""
    starts = [m[0] for m in markers]
    out: set[tuple[str, str]] = set()
    by_thread: dict[int, list] = {}
    for e in events:
        by_thread.setdefault(e.start_thread_id(), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start_ns(), -e.end_ns()))
        stack: list[tuple[int, str | None]] = []
        for e in evs:
            while stack and stack[-1][0] <= e.start_ns():
                stack.pop()
            name = _op_name(e)
            k = bisect.bisect_right(starts, e.start_ns()) - 1
            inside = k >= 0 and e.start_ns() < markers[k][1]
            parent = next((n for _, n in reversed(stack) if n), None)
            if name and parent and inside:
                out.add((parent, name + _layout(e)))
            stack.append((e.end_ns(), name))
    return out


class _Table(list):
    def table(self, *args, **kwargs) -> str:
        return ""


def _trace_script(job: dict, request: dict, checkpoint: str) -> dict:
    """Run a script benchmark until one way works: on the meta device (shapes only, fast),
    under fake tensors with symbolic shapes (data-dependent ops), for real on the CPU."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.profiler import ProfilerActivity, profile, record_function

    remapping = _DeviceRemap(set(request.get("remap", [])), host=True)
    timed: list[int] = []

    class TimedRegion:
        """Stands in for the script's own ``torch.profiler.profile``: marks its timed region."""

        def __init__(self, *args, **kwargs) -> None:
            self._mark = None

        def __enter__(self):
            self._mark = record_function(f"{_MARK}{len(timed)}")
            timed.append(len(timed))
            self._mark.__enter__()
            return self

        def __exit__(self, *exc):
            self._mark.__exit__(*exc)
            return False

        def step(self) -> None:
            pass

        def key_averages(self, *args, **kwargs):
            return _Table()

        def export_chrome_trace(self, *args, **kwargs) -> None:
            pass

    script = job["file"]
    os.chdir(os.path.dirname(script))
    sys.path.insert(0, os.path.dirname(script))
    sys.argv = [script]
    budget = 30

    def contexts(mode: str):
        if mode == "small":
            remapping.target = "cpu"
            return [remapping.mode, _small_tensors()]
        if mode in ("meta", "meta-gaps"):
            remapping.target = "meta"
            gaps = [_meta_gaps()] if mode == "meta-gaps" else []
            return [torch.device("meta"), remapping.mode, *gaps, _no_quantized_tensors()]
        remapping.target = "cpu"
        if mode == "fake":
            fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
            return [fake, remapping.mode, _no_quantized_tensors()]
        return [remapping.mode]

    code = _script_code(script)

    def attempt(mode: str, seconds: int | None = None):
        """The profile of one run, and the exception that ended it early (or None)."""
        timed.clear()
        remapping.host.clear()
        remapping.default_on_device = False
        real = torch.profiler.profile
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(seconds or budget)
        failure = None
        try:
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, record_function(
                f"{_MARK}whole"
            ):
                torch.profiler.profile = TimedRegion  # the script's own profiler marks its timed region
                try:
                    with contextlib.ExitStack() as stack:
                        for ctx in contexts(mode):
                            stack.enter_context(ctx)
                        exec(code, {"__name__": "__main__", "__file__": script, "__perfq_range__": _capped_range})
                except SystemExit:
                    pass
                except BaseException as exc:  # noqa: BLE001 - whatever the script raises, keep what ran
                    failure = exc
                signal.alarm(0)  # the time limit is the script's, not the profiler's
                torch.profiler.profile = real
            return prof, failure
        finally:
            signal.alarm(0)
            torch.profiler.profile = real

    def timed_regions(events) -> list[tuple[int, int, str]]:
        markers = _markers(events)
        return [m for m in markers if m[2] != "whole"] or [m for m in markers if m[2] == "whole"]

    def parts(events) -> list[tuple[int, int, str]]:
        """The timed regions, cut where the script ran calls on host tensors."""
        return _host_parts(timed_regions(events), _markers(events, _HOST))

    def entry(prof, mode: str) -> list[tuple[dict, bool | None]]:
        """The script's tests: its device's, and the host's when it ran operators on host tensors
        (a test on the CPU, named ``stem[host]``); each with its side (``_on_side``)."""
        events = prof.profiler.kineto_results.events()
        cut = parts(events)
        graph: dict[str, set[str]] = {}
        ops = _ops_per_marker(events, cut, {m[2]: "real" if mode == "real" else "fake" for m in cut}, graph)
        dtypes = _dtypes_per_marker(events, cut, ops)
        stem = os.path.splitext(os.path.basename(script))[0]
        device = ",".join(sorted(remapping.seen)) or "cpu"

        def test(name: str, on: str, side: bool | None) -> dict:
            mine = [part for part in ops if _on_side(part, side)]
            ran = set().union(*(ops[part] for part in mine))
            return {
                "name": name,
                "module": stem,
                "class": "",
                "tag": "",
                "backward": False,
                "device": on,
                "mode": {"meta-gaps": "meta"}.get(mode, mode),
                "ops": sorted(ran),
                "inner": sorted(ran - set().union(*(graph.get(part, set()) for part in mine))),
                "dtypes": sorted(set().union(*(dtypes.get(part, set()) for part in mine))),
            }

        if device == "cpu":
            return [(test(stem, device, None), None)]
        host = test(stem + _HOST_TEST, "cpu", True)
        return [(test(stem, device, False), False)] + ([(host, True)] if host["ops"] else [])

    errors: list[str] = []
    partial: dict | None = None
    budgets = {"meta": 8, "meta-gaps": 8, "fake": 40, "real": 30, **request.get("script_seconds", {})}
    slow = False
    for mode in request.get("script_modes", ["meta", "meta-gaps", "fake", "real"]):
        if mode == "meta-gaps" and slow:
            continue  # the meta device ran out of time, not into a missing kernel
        budget = budgets.get(mode, 30)
        prof, failure = attempt(mode)
        slow = isinstance(failure, _Deadline)
        found = entry(prof, mode)
        if failure is None:
            if mode != "real" and request.get("small_real", True):
                _add_small_real(found, attempt, parts, budgets)
            return {"tests": [test for test, _ in found], "errors": []}
        text = str(failure).splitlines()[0][:160] if str(failure) else ""
        errors.append(f"{mode}: {type(failure).__name__}: {text}")
        if timed and any(test["ops"] for test, _ in found):  # it got into its timed region: what ran until the failure
            partial = _merged(partial, [test for test, _ in found])
            with open(checkpoint, "w", encoding="utf-8") as fh:
                json.dump({"tests": partial, "errors": errors}, fh)
    return {"tests": partial or [], "errors": errors}


def _merged(partial: list[dict] | None, found: list[dict]) -> list[dict]:
    """The tests of the runs that failed so far (``partial``) with those of one more (``found``):
    a test's operators are those any run saw (by test name)."""
    if partial is None:
        return found
    by_name = {test["name"]: test for test in partial}
    for test in found:
        kept = by_name.setdefault(test["name"], test)
        if kept is not test:
            graph = _graph_level([kept, test])
            kept["ops"] = sorted(set(kept["ops"]) | set(test["ops"]))
            kept["inner"] = sorted(set(kept["ops"]) - graph)
    return list(by_name.values())


def _child(job: dict, request: dict, out_path: str) -> None:
    _die_with_parent()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the benchmark's (and the profiler's) output must not mix with the result lines
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    try:
        import torch

        torch.set_num_threads(1)
        if job["kind"] == "script":
            result = _trace_script(job, request, out_path + ".ckpt")
        else:
            result = _trace_opbench(job, request, out_path + ".ckpt")
        result["status"] = "partial" if result["errors"] and result["tests"] else "ok" if result["tests"] else "failed"
        result["reason"] = result["errors"][0] if result["errors"] else ""
    except BaseException as exc:  # a benchmark can raise anything; report it, never hang
        tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        result = {"tests": [], "errors": [tail], "status": "failed", "reason": tail[:200]}
    result["seconds"] = round(time.perf_counter() - started, 2)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)


# ----------------------------------------------------------------------------- parent side


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _emit(job: dict, result: dict) -> None:
    result["path"] = job["path"]
    sys.stdout.write("PERFQ-TRACE " + json.dumps(result) + "\n")
    sys.stdout.flush()


def _warm_up() -> None:
    """Pay torch's one-time costs (FakeTensorMode's first use, the profiler's) before forking."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.profiler import ProfilerActivity, profile

    with FakeTensorMode():
        x = torch.ones(2, 2)
        (x @ x).sum()
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(1).add(1)


def _import_harnesses(jobs: list[dict]) -> None:
    """Import the benchmark framework of each operator_benchmark root once, before forking (the
    repository's own code: perfq limits its time)."""
    for root in sorted({j["root"] for j in jobs if j["kind"] == "operator_benchmark"}):
        sys.path.insert(0, root)
        with contextlib.suppress(Exception), contextlib.redirect_stdout(open(os.devnull, "w")):
            importlib.import_module("benchmark_core")
            importlib.import_module("benchmark_pytorch")
        sys.path.remove(root)


def _partial(out_path: str, reason: str) -> dict | None:
    """What a killed or crashed child saved before (its checkpoint), as a partial result."""
    try:
        with open(out_path + ".ckpt", encoding="utf-8") as fh:
            saved = json.load(fh)
    except (OSError, ValueError):
        return None
    if not saved.get("tests"):
        return None
    errors = [reason, *saved.get("errors", [])]
    return {"tests": saved["tests"], "errors": errors, "status": "partial", "reason": reason, "seconds": 0.0}


def _failure(reason: str, started: float, peak: float) -> dict:
    return {
        "tests": [],
        "errors": [reason],
        "status": "failed",
        "reason": reason,
        "seconds": round(time.monotonic() - started, 2),
        "max_rss_mb": round(peak),
    }


def main() -> int:
    request = json.load(sys.stdin)
    jobs = list(request["jobs"])
    parallel = max(1, int(request.get("parallel", 1)))
    timeout = float(request.get("timeout", 120))
    memory_mb = float(request.get("memory_mb", 3072))
    warnings.filterwarnings("ignore")
    warmup = int(request.get("warmup_seconds", 120))
    _warm_up()
    sys.stdout.write(_READY + "\n")  # what follows runs the repository's code
    sys.stdout.flush()
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _warm_up_alarm)
    signal.alarm(warmup)
    try:
        _import_harnesses(jobs)
    except _WarmUpDeadline:
        reason = f"the warm-up (importing the benchmark harness) took more than {warmup} s"
        for job in jobs:
            _emit(job, _failure(reason, started, 0.0))
        return 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    tmp = request.get("scratch") or tempfile.mkdtemp(prefix="perfq-trace-")  # perfq gives (and removes) one
    running: dict[int, tuple[dict, dict, str, float, float]] = {}  # pid -> job, request, out, start, peak MB
    queue = [(job, request, os.path.join(tmp, f"{i}.json")) for i, job in enumerate(jobs)]
    while queue or running:
        while queue and len(running) < parallel:
            job, req, out_path = queue.pop(0)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    _child(job, req, out_path)
                finally:
                    os._exit(0)
            running[pid] = (job, req, out_path, time.monotonic(), 0.0)
        time.sleep(0.02)
        for pid, (job, req, out_path, started, peak) in list(running.items()):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done == 0:
                rss = _rss_mb(pid)
                running[pid] = (job, req, out_path, started, max(peak, rss))
                reason = ""
                if time.monotonic() - started > timeout:
                    reason = f"timed out after {timeout:.0f} s"
                elif rss > memory_mb:
                    reason = f"used more than {memory_mb:.0f} MB"
                if reason:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    del running[pid]
                    _emit(job, _partial(out_path, reason) or _failure(reason, started, max(peak, rss)))
                continue
            del running[pid]
            peak = max(peak, usage.ru_maxrss / 1024)
            try:
                with open(out_path, encoding="utf-8") as fh:
                    result = json.load(fh)
            except (OSError, ValueError):
                crash = f"crashed (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else "died"
                if job["kind"] == "script" and os.path.exists(out_path + ".ckpt"):
                    result = _partial(out_path, f"tracer child {crash}") or {}
                    result["max_rss_mb"] = round(peak)
                    _emit(job, result)
                    continue
                if os.path.exists(out_path + ".ckpt") and not req.get("no_fake"):
                    # it crashed under fake tensors (packed weights...): again, real pass only
                    queue.insert(0, (job, {**req, "no_fake": True, "crash": crash}, out_path + ".again"))
                    continue
                result = _failure(f"tracer child {crash}", started, peak)
            if req.get("crash"):
                result["errors"].insert(0, f"{req['crash']} under fake tensors; other configs inferred")
                result["status"], result["reason"] = "partial", result["errors"][0]
            result["max_rss_mb"] = round(peak)
            _emit(job, result)
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
