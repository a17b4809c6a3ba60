"""Running a checkout's own code (benchmark tracing, a PR's benchmarks in CI) contained.

Always: a scrubbed environment (an allowlist: no token, key or secret reaches the child), its own
HOME and TMPDIR inside a scratch directory, and (common.proc) its own process group, killed
on every way out. Where bubblewrap works (``bwrap``, an existing sandbox; perfq builds none of its
own): no network, the whole file system read-only with ``/tmp``, ``/var/tmp``, ``/run``, ``/home``,
``/root`` and the user's home (``$HOME`` and the password database's) hidden, the paths the child
must read (the repository, the interpreter) bound back read-only, the scratch directory the only
writable place, and a pid namespace that dies with perfq (nothing it starts outlives it). Against
root (issue 37): a user namespace where the child is ``nobody`` with no capability at all and no
way to gain one (no new privileges, no nested user namespace), and a seccomp filter refusing the
calls that would undo the rest (mounts, device nodes, ptrace, namespaces, real-time priority).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

try:
    import pyseccomp
except (ImportError, OSError) as _missing:  # the library loads libseccomp.so.2 when imported
    pyseccomp = None
    SECCOMP_PROBLEM = f"the seccomp library cannot be loaded ({_missing})"
else:
    SECCOMP_PROBLEM = ""

# environment variables a contained child keeps (besides HOME and TMPDIR, which are its own)
ENV_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
    "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED", "PYTHONHASHSEED",
})
ENV_ALLOWED_PREFIXES = ("LC_",)
HIDDEN = ("/tmp", "/var/tmp", "/run", "/home", "/root")  # replaced by empty directories inside the sandbox
NOBODY = 65534  # the child's uid and gid inside its user namespace

# calls refused with EPERM inside the sandbox: each would undo a wall (mounts, devices, another
# process's memory, namespaces, kernel keys and modules, real-time priority above perfq's timers)
DENIED_CALLS = (
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "mknod", "mknodat", "ptrace", "process_vm_readv", "process_vm_writev",
    "setns", "unshare", "sched_setscheduler", "sched_setparam", "sched_setattr", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "bpf",
)
# clone() flags that make a namespace: refused too (clone3 hides its flags in memory: ENOSYS, so
# the C library falls back to clone)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x80)

BWRAP = "bwrap"
ENV_ONLY = "env"


class Launch(NamedTuple):
    """A contained command: its argv and the descriptors it must inherit (the seccomp program)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()


def scrubbed_env(env: Mapping[str, str], scratch: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of ``env``, HOME and TMPDIR in ``scratch``, then ``extra``."""
    kept = {k: v for k, v in env.items() if k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)}
    kept.setdefault("PATH", os.defpath)
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {**kept, "HOME": str(home), "TMPDIR": str(tmp), **(extra or {})}


@functools.cache
def seccomp_program() -> bytes:
    """The BPF program of the sandbox's seccomp filter: :data:`DENIED_CALLS` and namespace-making
    ``clone`` calls fail with EPERM, ``clone3`` with ENOSYS, everything else is allowed."""
    assert pyseccomp is not None, SECCOMP_PROBLEM
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for call in DENIED_CALLS:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), call)
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    read, write = os.pipe()
    with os.fdopen(read, "rb") as source, os.fdopen(write, "wb") as sink:
        rules.export_bpf(sink)
        sink.close()
        return source.read()


@contextlib.contextmanager
def _seccomp_fd() -> Iterator[int]:
    """A descriptor holding :func:`seccomp_program` from its start (bwrap reads it to the end)."""
    fd = os.memfd_create("perfq-seccomp", 0)
    try:
        os.write(fd, seccomp_program())
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


@functools.cache
def bwrap_problem() -> str:
    """Why bubblewrap cannot contain a child here ('' when it can): not installed, no seccomp
    library, or it cannot create its namespaces (a container without the privilege, user
    namespaces disabled)."""
    tool = shutil.which("bwrap")
    if tool is None:
        return "bubblewrap (bwrap) is not installed"
    if SECCOMP_PROBLEM:
        return SECCOMP_PROBLEM
    try:
        with _seccomp_fd() as fd:
            probe = subprocess.run([tool, *_bwrap_args(Path("/"), (), fd), "true"], capture_output=True, text=True,
                                   timeout=30, check=False, pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not run: {exc}"
    if probe.returncode != 0:
        return f"bwrap cannot create its namespaces: {(probe.stderr.strip().splitlines() or ['?'])[-1][:160]}"
    return ""


def hidden_paths() -> list[str]:
    """The directories the sandbox replaces by empty ones: :data:`HIDDEN`, ``$HOME`` and the
    user's home in the password database (the one a child finds when ``$HOME`` is its own)."""
    homes = [os.environ.get("HOME", "")]
    with contextlib.suppress(KeyError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    found = [*HIDDEN, *(home for home in homes if home not in ("", "/"))]
    return [path for path in dict.fromkeys(found) if os.path.isdir(path)]


def _bwrap_args(scratch: Path, readable: Iterable[Path], seccomp_fd: int) -> list[str]:
    """bwrap's options: the file system (hidden directories stay hidden under a readable path bound
    back over them: a repository that is the home directory's parent re-exposed it), namespaces,
    no capability, the seccomp program at ``seccomp_fd``."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    hidden = hidden_paths()
    for path in hidden:
        args += ["--tmpfs", path]
    # bwrap takes absolute paths (a relative 'bench' on sys.path is not found); ancestors are bound first
    for path in sorted({str(p.absolute()) for p in readable if p.exists()}, key=len):
        args += ["--ro-bind", path, path]
        args += [arg for inner in hidden if inner.startswith(path.rstrip("/") + "/") for arg in ("--tmpfs", inner)]
    if scratch != Path("/"):
        args += ["--bind", str(scratch), str(scratch)]
    return [*args, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns", "--cap-drop", "ALL",
            "--seccomp", str(seccomp_fd), "--die-with-parent", "--new-session"]


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

    @contextlib.contextmanager
    def launch(self, argv: list[str]) -> Iterator[Launch]:
        """``argv`` run inside the sandbox (unchanged without bubblewrap), for the block that
        starts it: the seccomp program's descriptor is open until the block ends."""
        if self.mode != BWRAP:
            yield Launch(argv)
            return
        readable = [*self.readable, *interpreter_paths()]
        with _seccomp_fd() as fd:
            yield Launch([shutil.which("bwrap") or "bwrap", *_bwrap_args(self.scratch, readable, fd), "--", *argv],
                         (fd,))

    def env(self, env: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return scrubbed_env(env, self.scratch, extra)
