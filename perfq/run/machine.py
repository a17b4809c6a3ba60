"""What a run ran on: the machine (CPU, cores, governor, SMT, load, memory), the interpreter and
torch build of each side, and the repository's commit. Stored with every run (``runs.env``, JSON)
so `perfq compare` can show what differs between two sides.

Reads ``/proc`` and ``/sys`` (Linux; other systems give what :mod:`platform` knows) and asks
each side's interpreter about itself in a child process (torch is imported there, never here).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from common import git, proc

ISA_FLAGS = ("avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "avx2", "fma", "neon", "sve")

_PROBE = r"""
import json, sys
info = {"python_version": sys.version.split()[0], "python_executable": sys.executable}
try:
    from importlib.metadata import version
    info["torch_version"] = version("torch")
except Exception:
    info["torch_version"] = ""
if info["torch_version"]:
    try:
        import torch
        info["torch_file"] = str(torch.__file__)
        info["torch_config"] = torch.__config__.show().strip()
        info["torch_threads"] = str(torch.get_num_threads())
        info["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except Exception as exc:
        info["torch_config"] = f"torch does not import: {type(exc).__name__}: {exc}"
print("PERFQ-ENV " + json.dumps(info))
"""


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def cpu_info() -> dict[str, str]:
    """CPU model, family/model/stepping, logical CPUs, physical cores, ISA flags, hypervisor."""
    fields: dict[str, str] = {}
    cores: set[tuple[str, str]] = set()
    physical = core = ""
    for line in _read("/proc/cpuinfo").splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "physical id":
            physical = value
        elif key == "core id":
            core = value
            cores.add((physical, core))
        elif key in ("model name", "cpu family", "model", "stepping", "flags", "vendor_id", "Features") \
                and key not in fields:
            fields[key] = value
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    parts = ("cpu family", "model", "stepping")
    family = " ".join(f"{k.replace('cpu ', '')} {fields[k]}" for k in parts if k in fields)
    return {
        "cpu_model": fields.get("model name") or platform.processor() or platform.machine(),
        "cpu_vendor": fields.get("vendor_id", ""),
        "cpu_family": family,
        "cpu_isa": " ".join(f for f in ISA_FLAGS if f in flags),
        "logical_cpus": str(os.cpu_count() or ""),
        "physical_cores": str(len(cores)) if cores else "",
        "hypervisor": "yes" if "hypervisor" in flags else ("no" if flags else ""),
    }


def machine_info() -> dict[str, str]:
    """The machine as it is now: CPU, SMT, frequency governor, load average, memory, kernel, host."""
    info = {"host": socket.gethostname(), **cpu_info()}
    smt = _read("/sys/devices/system/cpu/smt/active")
    info["smt"] = {"1": "on", "0": "off"}.get(smt, "n/a")
    info["governor"] = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") or "n/a"
    info["turbo"] = {"0": "on", "1": "off"}.get(_read("/sys/devices/system/cpu/intel_pstate/no_turbo"), "n/a")
    try:
        info["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        info["load_average"] = "n/a"
    mem = dict(line.split(":", 1) for line in _read("/proc/meminfo").splitlines() if ":" in line)
    for key, name in (("MemTotal", "memory_total"), ("MemAvailable", "memory_available")):
        kib = mem.get(key, "").split()
        info[name] = f"{int(kib[0]) / 2**20:.1f} GiB" if kib and kib[0].isdigit() else "n/a"
    info["kernel"] = f"{platform.system()} {platform.release()}"
    return info


@functools.lru_cache(maxsize=16)
def _probe(python: str, stamp: float) -> tuple[tuple[str, str], ...]:
    # run from an empty directory: `python -c` puts its working directory first on sys.path, and the
    # `torch/` source folder of a PyTorch checkout would shadow the installed torch
    with tempfile.TemporaryDirectory(prefix="perfq-probe-") as empty:
        res = proc.run([python, "-c", _PROBE], cwd=Path(empty), timeout=300)
    for line in res.stdout.splitlines():
        if line.startswith("PERFQ-ENV "):
            try:
                return tuple((k, str(v)) for k, v in json.loads(line[len("PERFQ-ENV "):]).items())
            except ValueError:
                break
    return (("python_executable", python), ("torch_version", ""), ("probe_error", res.error or res.last_line()))


def interpreter_info(python: str) -> dict[str, str]:
    """The interpreter's Python and torch versions, torch's build config (``torch.__config__.show()``).

    Asked once per interpreter and process (again when the interpreter file changes).
    """
    try:
        stamp = Path(python).stat().st_mtime
    except OSError:
        stamp = 0.0
    return dict(_probe(python, stamp))


def interpreters_info(pythons: list[str]) -> list[dict[str, str]]:
    """:func:`interpreter_info` of several interpreters, asked in parallel (each imports torch)."""
    with ThreadPoolExecutor(max_workers=max(len(pythons), 1)) as pool:
        return list(pool.map(interpreter_info, pythons))


def repo_info(repo: Path) -> dict[str, str]:
    """The repository's commit (``-dirty`` when the tree has changes), or nothing outside git."""
    if git.common_dir(repo) is None:
        return {}
    return {"git_commit": git.head_with_state(repo)}


def side_env(machine: dict[str, str], interpreter: dict[str, str], repo: dict[str, str],
             overrides: dict[str, str], provenance: dict[str, str] | None = None) -> str:
    """One side's environment as stored (JSON text).

    ``provenance`` says what the side ran when it is not the checkout (perfq.run.sides: ref,
    commit, build command or wheel and its sha256, worktree, interpreter); its keys win.
    """
    env = {**machine, **repo, **interpreter, **(provenance or {})}
    env.update({f"env {k}": v for k, v in sorted(overrides.items())})
    return json.dumps(env, sort_keys=True)


# ----------------------------------------------------------------------------- contention per invocation


PRESSURES = ("cpu", "memory", "io")


@dataclass(frozen=True)
class MachineSnapshot:
    """Counters of the machine at one instant: PSI stall totals (µs), CPU jiffies, the run queue."""

    at: float  # time.monotonic()
    stall_us: tuple[int, ...]  # "some" total of /proc/pressure/{cpu,memory,io} (-1: not available)
    steal: int  # jiffies of /proc/stat's cpu line
    jiffies: int
    running: int  # procs_running: runnable tasks now (this one included)


def _some_total(kind: str) -> int:
    for line in _read(f"/proc/pressure/{kind}").splitlines():
        if line.startswith("some "):
            fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
            return int(fields.get("total", "-1"))
    return -1


def snapshot() -> MachineSnapshot:
    """The machine's contention counters now (Linux ``/proc``; zeros elsewhere)."""
    steal = jiffies = running = 0
    for line in _read("/proc/stat").splitlines():
        if line.startswith("cpu "):
            ticks = [int(x) for x in line.split()[1:]]
            jiffies, steal = sum(ticks[:8]), ticks[7] if len(ticks) > 7 else 0
        elif line.startswith("procs_running "):
            running = int(line.split()[1])
    return MachineSnapshot(time.monotonic(), tuple(_some_total(k) for k in PRESSURES), steal, jiffies, running)


CONTENDED_CPU_SHARE = 0.80  # a one-thread benchmark process on the CPU less than this share of its wall time
CONTENDED_PRESSURE = 0.10  # or memory/io stalls ("some") over this share of its wall time


@dataclass(frozen=True)
class Contention:
    """What the machine did while one invocation ran, next to its wall time (docs/run.md "Contention")."""

    wall_s: float
    cpu_pressure: float | None  # share of the wall some task waited for a CPU (/proc/pressure/cpu "some")
    memory_pressure: float | None  # ... waited for memory (reclaim, faults)
    io_pressure: float | None
    steal: float  # share of the CPU time the hypervisor gave to other guests
    run_queue: float  # runnable tasks (procs_running, mean of before and after, this process's own excluded)
    child_cpu: float | None  # the benchmark process's own CPU time / wall (rusage): below 1, it waited
    major_faults: int = 0
    minor_faults: int = 0
    involuntary_switches: int = 0  # times it was preempted
    voluntary_switches: int = 0

    @classmethod
    def between(cls, before: MachineSnapshot, after: MachineSnapshot, usage: proc.ChildUsage | None) -> Contention:
        wall = max(after.at - before.at, 1e-9)
        shares = [None if b < 0 or a < 0 else min(max((a - b) / 1e6 / wall, 0.0), 1.0)
                  for b, a in zip(before.stall_us, after.stall_us, strict=True)]
        ticks = after.jiffies - before.jiffies
        steal = (after.steal - before.steal) / ticks if ticks > 0 else 0.0
        queue = max((before.running + after.running) / 2 - 1, 0.0)
        if usage is None:
            return cls(wall, *shares, steal, queue, None)
        return cls(wall, *shares, steal, queue, (usage.user_s + usage.system_s) / wall, usage.major_faults,
                   usage.minor_faults, usage.involuntary_switches, usage.voluntary_switches)

    @property
    def contended(self) -> bool:
        """The invocation shared its machine: it got too little CPU, or memory or I/O stalled it."""
        starved = self.child_cpu is not None and self.child_cpu < CONTENDED_CPU_SHARE
        stalled = any(p is not None and p > CONTENDED_PRESSURE for p in (self.memory_pressure, self.io_pressure))
        return starved or stalled or self.steal > CONTENDED_PRESSURE
