"""Running a checkout's own code (benchmark tracing, a PR's benchmarks in CI) contained.

Always: a scrubbed environment (an allowlist: no token, key or secret reaches the child), its own
HOME and TMPDIR inside a scratch directory, and (perfq.common.proc) its own process group, killed
on every way out. Where bubblewrap works (``bwrap``, an existing sandbox; perfq builds none of its
own): no network, the whole file system read-only with ``/tmp``, ``/var/tmp``, ``/run`` and the
user's home hidden, the paths the child must read (the repository, the interpreter) bound back
read-only, the scratch directory the only writable place, and a pid namespace that dies with
perfq (nothing it starts outlives it).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# environment variables a contained child keeps (besides HOME and TMPDIR, which are its own)
ENV_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
    "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED", "PYTHONHASHSEED",
})
ENV_ALLOWED_PREFIXES = ("LC_",)
HIDDEN = ("/tmp", "/var/tmp", "/run")  # replaced by empty directories inside the sandbox


BWRAP = "bwrap"
ENV_ONLY = "env"


def scrubbed_env(env: Mapping[str, str], scratch: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of ``env``, HOME and TMPDIR in ``scratch``, then ``extra``."""
    kept = {k: v for k, v in env.items() if k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)}
    kept.setdefault("PATH", os.defpath)
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {**kept, "HOME": str(home), "TMPDIR": str(tmp), **(extra or {})}


@functools.cache
def bwrap_problem() -> str:
    """Why bubblewrap cannot contain a child here ('' when it can): not installed, or it cannot
    create its namespaces (a container without the privilege, user namespaces disabled)."""
    tool = shutil.which("bwrap")
    if tool is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        probe = subprocess.run([tool, *_bwrap_args(Path("/"), ()), "true"], capture_output=True, text=True,
                               timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not run: {exc}"
    if probe.returncode != 0:
        return f"bwrap cannot create its namespaces: {(probe.stderr.strip().splitlines() or ['?'])[-1][:160]}"
    return ""


def _bwrap_args(scratch: Path, readable: Iterable[Path]) -> list[str]:
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    home = os.environ.get("HOME", "")
    for hidden in (*HIDDEN, *([home] if home not in ("", "/") else [])):
        if os.path.isdir(hidden):
            args += ["--tmpfs", hidden]
    for path in readable:
        path = path.absolute()  # bwrap takes absolute paths: a relative one (a 'bench' on sys.path) is not found
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    if scratch != Path("/"):
        args += ["--bind", str(scratch), str(scratch)]
    return [*args, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]


def interpreter_paths() -> list[Path]:
    """What perfq's Python needs to read: its prefixes and the directories on its path."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    paths |= {Path(p).absolute() for p in sys.path if p and Path(p).is_dir()}
    return sorted(paths)


@dataclass(frozen=True)
class Sandbox:
    """A contained child's place: ``scratch`` (its HOME, TMPDIR and only writable place) and the
    ``readable`` paths it sees read-only."""

    scratch: Path
    readable: tuple[Path, ...] = ()
    use_bwrap: bool = True

    @property
    def mode(self) -> str:
        """``bwrap`` when the full sandbox contains the child, else ``env``."""
        return BWRAP if self.use_bwrap and not bwrap_problem() else ENV_ONLY

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the sandbox (unchanged without bubblewrap)."""
        if self.mode != BWRAP:
            return argv
        readable = [*self.readable, *interpreter_paths()]
        return [shutil.which("bwrap") or "bwrap", *_bwrap_args(self.scratch, readable), "--", *argv]

    def env(self, env: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return scrubbed_env(env, self.scratch, extra)
