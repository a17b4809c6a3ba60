"""Two refs for real: each side of `perfq run --ab --base-ref A --head-ref B` runs its ref's code.

A side with a ref gets a git worktree at its commit (its benchmark files come from there) and,
when it is built (``--build ARGV``) or given a wheel (``--base-wheel``/``--head-wheel``: a path
or a URL, ``{commit}`` standing for the side's full commit), its own virtualenv. The virtualenv
sees the packages of the interpreter it was made from (a ``.pth`` file adds that interpreter's
site directories after its own), so a build with ``--no-build-isolation`` finds torch and
setuptools, and what the side installs shadows them without touching them.

Prepared sides are cached by what they hold (commit, interpreter, build command or wheel
digest) under ``<git common dir>/perfq/sides/`` (``--sides-dir``): a second run with the same
commits reuses the worktree and the built virtualenv. A directory is ready only once its
``side.json`` is written; a build that failed or was interrupted is redone from scratch.

Two sides that would run the same code with the same interpreter are refused: that is an A/A
under two names (an explicit A/A is ``--ab --base-python P --head-python P`` without refs).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from common import git, proc
from common.build import build_text, run_build, with_python
from common.errors import PerfqError
from common.paths import state_dir
from perfq.run.execute import SideSetup

READY_FILE = "side.json"
PTH_FILE = "_perfq_base_site.pth"

Log = Callable[[str], None]


class Install(str, Enum):
    """What a side's interpreter runs: what is installed already, its own build, or a wheel."""

    installed = "installed"
    build = "build"
    wheel = "wheel"


@dataclass(frozen=True)
class SourceOptions:
    """The command line's say on where the sides' code comes from."""

    build: tuple[str, ...] = ()  # argv template, ``{python}`` = the side's interpreter
    base_wheel: str | None = None
    head_wheel: str | None = None
    cache_dir: Path | None = None  # default: <git common dir>/perfq/sides

    def wheel(self, side: str) -> str | None:
        return self.base_wheel if side == "base" else self.head_wheel

    @property
    def wanted(self) -> bool:
        return bool(self.build or self.base_wheel or self.head_wheel)


@dataclass(frozen=True)
class SideSpec:
    """What one side will run, decided before anything is built."""

    name: str
    ref: str
    commit: str
    python: str  # the interpreter the side's venv is made from (or runs, when nothing is installed)
    install: Install
    build: tuple[str, ...] = ()
    wheel: str = ""  # path or URL, {commit} filled in

    def identity(self, wheel_sha256: str = "") -> tuple[str, ...]:
        """Equal for two sides that run the same code with the same interpreter."""
        if self.install == Install.build:
            return (self.python, "build", self.commit, *self.build)
        if self.install == Install.wheel:
            return (self.python, "wheel", wheel_sha256 or self.wheel)
        return (self.python, "installed")

    def describe(self) -> str:
        if self.install == Install.build:
            return f"commit {self.commit[:12]} built with {build_text(list(self.build))}"
        if self.install == Install.wheel:
            return f"wheel {self.wheel}"
        return f"the packages installed for {self.python} (no --build or wheel)"


@dataclass(frozen=True)
class PreparedSide:
    """A side ready to run: its worktree, interpreter and what was installed into it."""

    spec: SideSpec
    source: Path  # worktree at the side's commit
    python: str
    wheel_sha256: str = ""
    reused: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """What the side ran, as recorded in ``runs.env`` (``side_*`` keys) and in ``side.json``."""
        p = self.spec
        return {
            **({"git_commit": p.commit} if p.ref else {}),  # the worktree's commit, not the checkout's
            "side_ref": p.ref,
            "side_commit": p.commit,
            "side_install": p.install.value,
            "side_build": build_text(list(p.build)) if p.install == Install.build else "",
            "side_wheel": p.wheel,
            "side_wheel_sha256": self.wheel_sha256,
            "side_source": str(self.source),
            "side_python": self.python,
            "side_base_python": p.python,
        }


def side_specs(repo: Path, sides: list[SideSetup], opts: SourceOptions) -> list[SideSpec]:
    """The sides' specs; PerfqError for a ref that is no commit, a build without refs, or two same sides."""
    if opts.build and not all(s.ref for s in sides):
        raise PerfqError("--build needs --base-ref and --head-ref (each side is built in its own worktree)")
    specs = []
    for side in sides:
        commit = git.resolve_ref(repo, side.ref or "HEAD")
        wheel = opts.wheel(side.name)
        install = Install.wheel if wheel else Install.build if opts.build else Install.installed
        specs.append(SideSpec(side.name, side.ref, commit, os.path.abspath(side.python), install,
                              opts.build if install == Install.build else (),
                              wheel.replace("{commit}", commit) if wheel else ""))
    if len(specs) == 2:
        refuse_same_code(specs[0], specs[1])
    return specs


def refuse_same_code(base: SideSpec, head: SideSpec, base_sha: str = "", head_sha: str = "") -> None:
    """PerfqError when both sides would run the same code with the same interpreter."""
    if base.identity(base_sha) != head.identity(head_sha):
        return
    if base.install == Install.installed:
        fix = "give --build or --base-wheel/--head-wheel so that each side runs its ref's code"
    elif base.install == Install.build:
        fix = "both refs name that commit"
    else:
        fix = "both wheels are the same file" if base_sha else "both sides name the same wheel"
    raise PerfqError(
        f"base ({base.ref or base.commit[:12]}) and head ({head.ref or head.commit[:12]}) would run the same code "
        f"with the same interpreter ({base.describe()}; {base.python}): {fix}; for an A/A use "
        "--ab --base-python P --head-python P without refs"
    )


def prepare_sides(repo: Path, sides: list[SideSetup], opts: SourceOptions, bench_root: Path,
                  log: Log = lambda _: None) -> list[SideSetup]:
    """The sides, each running its ref's code: a worktree per ref, a venv per build or wheel.

    Sides without refs, build or wheel are returned as they are.
    """
    if not opts.wanted and not any(s.ref for s in sides):
        return sides
    specs = side_specs(repo, sides, opts)
    cache = (opts.cache_dir or state_dir(repo) / "sides").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    wheels = [fetch_wheel(p.wheel, cache / "wheels") if p.install == Install.wheel else None for p in specs]
    digests = [sha256_of(w) if w else "" for w in wheels]
    if len(specs) == 2:
        refuse_same_code(specs[0], specs[1], digests[0], digests[1])
    out = []
    for side, spec, wheel, digest in zip(sides, specs, wheels, digests, strict=True):
        ready = prepare_side(repo, spec, cache, wheel, digest, log)
        out.append(replace(side, python=ready.python, source=ready.source,
                           bench_root=side_bench_root(repo, bench_root, ready.source),
                           provenance=tuple(ready.to_json().items())))
    return out


def side_bench_root(repo: Path, bench_root: Path, source: Path) -> Path:
    """The benchmark root inside the side's worktree (an explicit root outside the repo stays as is)."""
    try:
        return source / bench_root.resolve().relative_to(repo.resolve())
    except ValueError:
        return bench_root


def cache_key(spec: SideSpec, wheel_sha256: str) -> str:
    """The directory name of a prepared side: its commit and a digest of what it holds."""
    what = json.dumps([spec.commit, bool(spec.ref), spec.python, spec.install.value, list(spec.build), wheel_sha256])
    return f"{spec.commit[:12]}-{spec.install.value}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (another perfq preparing the same side waits)."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare_side(repo: Path, spec: SideSpec, cache: Path, wheel: Path | None, wheel_sha256: str,
                 log: Log) -> PreparedSide:
    """The side's cached directory (worktree ``src``, ``venv``), made unless it is ready."""
    home = cache / cache_key(spec, wheel_sha256)
    with _locked(cache / f"{home.name}.lock"):
        marker = home / READY_FILE
        if marker.is_file():
            stored = json.loads(marker.read_text(encoding="utf-8"))
            log(f"{spec.name}: {spec.commit[:12]} ready in {home} (reused)")
            return PreparedSide(spec, Path(stored["side_source"]), stored["side_python"], wheel_sha256, reused=True)
        started = time.monotonic()
        _discard(repo, home)
        home.mkdir(parents=True)
        src = home / "src" if spec.ref else repo.resolve()  # a side without a ref runs the checkout's files
        if spec.ref:
            git.git(repo, "worktree", "add", "--detach", str(src), spec.commit)
        python = spec.python
        if spec.install != Install.installed:
            python = str(make_venv(spec.python, home / "venv"))
            log(f"{spec.name}: {spec.commit[:12]}: installing into its venv: {spec.describe()}")
            error = run_build(install_argv(spec, python, wheel), src, None, venv_env(home / "venv"), lines=15)
            if error:
                raise PerfqError(f"{spec.name}: {spec.describe()} failed in {src}: {error}")
        ready = PreparedSide(spec, src, python, wheel_sha256, seconds=time.monotonic() - started)
        marker.write_text(json.dumps(ready.to_json(), indent=1) + "\n", encoding="utf-8")
        log(f"{spec.name}: {spec.commit[:12]} ready in {home} ({ready.seconds:.0f} s)")
        return ready


def _discard(repo: Path, home: Path) -> None:
    """Remove what a failed or interrupted preparation left (its worktree too)."""
    if (home / "src").exists():
        git.git(repo, "worktree", "remove", "--force", str(home / "src"), check=False)
    shutil.rmtree(home, ignore_errors=True)
    git.git(repo, "worktree", "prune", check=False)


def install_argv(spec: SideSpec, python: str, wheel: Path | None) -> list[str]:
    """The command that puts the side's code into its venv."""
    if spec.install == Install.wheel:
        assert wheel is not None
        # --force-reinstall: a wheel whose version the base interpreter has already is still installed
        return [python, "-m", "pip", "install", "--no-input", "--no-deps", "--force-reinstall", str(wheel)]
    return with_python(list(spec.build), python)


def venv_env(venv: Path) -> dict[str, str]:
    """The environment of a command run "inside" ``venv``."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONHOME", None)
    return env


_SITE_PROBE = (
    "import importlib.util, json, sys; print(json.dumps({'site': [p for p in sys.path "
    "if p.rstrip('/').endswith(('site-packages', 'dist-packages'))], "
    "'pip': importlib.util.find_spec('pip') is not None}))"
)


def make_venv(base_python: str, venv: Path) -> Path:
    """A virtualenv made from ``base_python`` that also sees its packages (after its own); its python."""
    probe = proc.run([base_python, "-c", _SITE_PROBE], timeout=120)
    try:
        info = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PerfqError(f"cannot ask {base_python} for its site directories: {probe.error or probe.last_line()}"
                         ) from None
    argv = [base_python, "-m", "venv", *(["--without-pip"] if info["pip"] else []), str(venv)]
    res = proc.run(argv, timeout=600)
    if not res.ok:
        raise PerfqError(f"cannot create a venv in {venv}: {res.error or res.last_line()}")
    python = venv / "bin" / "python"
    res = proc.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=120)
    if not res.ok:
        raise PerfqError(f"the venv in {venv} does not run: {res.error or res.last_line()}")
    lines = [f"import site; site.addsitedir({path!r})" for path in info["site"]]
    (Path(res.stdout.strip()) / PTH_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return python


def fetch_wheel(location: str, into: Path) -> Path:
    """The wheel at ``location`` (a path, or an http(s)/file URL downloaded once into ``into``)."""
    scheme = urllib.parse.urlparse(location).scheme
    if scheme not in ("http", "https", "file"):
        path = Path(location).expanduser()
        if not path.is_file():
            raise PerfqError(f"wheel {location} does not exist")
        return path.resolve()
    name = Path(urllib.parse.unquote(urllib.parse.urlparse(location).path)).name
    if not name.endswith(".whl"):
        raise PerfqError(f"wheel URL {location} does not name a .whl file")
    target = into / hashlib.sha256(location.encode()).hexdigest()[:16] / name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    try:
        with urllib.request.urlopen(location, timeout=300) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise PerfqError(f"cannot download wheel {location}: {exc}") from None
    partial.replace(target)
    return target


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
