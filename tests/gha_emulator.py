"""Just enough of GitHub Actions to run perfq's generated workflows on a local repository.

Jobs run in ``needs`` order with their ``if:``, matrix and outputs; ``run:`` steps run in bash
exactly as written (``-eo pipefail``, ``$GITHUB_OUTPUT``, ``$RUNNER_TEMP``, the step's ``env:``);
the actions perfq uses are emulated: checkout (a fresh shallow, partial clone of the origin
at the event's commit, submodules left to the repository), setup-python (one venv), cache/restore and
cache/save (a directory per key, restore-keys by prefix), upload/download-artifact (directories per
run), hendrikmuhs/ccache-action (the newest ``ccache-<key>-*`` cache restored into ``.ccache``, the
real ccache in front of gcc/g++/cc/c++ through a directory of symlinks first on PATH, the cache saved
under a new ``ccache-<key>-<n>`` key when the job ends, as the action's post step does). Expressions support what the
workflows use: contexts, literals, ``== != && || !``, ``fromJSON``, ``always``, ``success``.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|\[|\]|,|\.)"
                    r"|(?P<id>[A-Za-z_][A-Za-z0-9_-]*|\*))")


class Expr:
    """A recursive-descent evaluator of GitHub expressions over a context dict."""

    def __init__(self, text: str, ctx: dict[str, Any]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"cannot parse expression at {text[pos:]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0
        self.ctx = ctx

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.tokens[self.i]
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def value(self) -> Any:
        out = self.or_()
        if self.peek() is not None:
            raise ValueError(f"trailing tokens: {self.tokens[self.i:]}")
        return out

    def or_(self) -> Any:
        left = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            left = left if truthy(left) else right
        return left

    def and_(self) -> Any:
        left = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.cmp()
            left = right if truthy(left) else left
        return left

    def cmp(self) -> Any:
        left = self.unary()
        if self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.unary()
            same = _norm(left) == _norm(right)
            return same if op == "==" else not same
        return left

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if text == "(":
            out = self.or_()
            self.take(")")
            return out
        if kind != "id":
            raise ValueError(f"unexpected {text!r}")
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self.peek() == ("op", "("):
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            return self.call(text, args)
        value: Any = self.ctx.get(text)
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            value = _get(value, key)
        return value

    def call(self, name: str, args: list[Any]) -> Any:
        status = self.ctx.get("__status__", "success")
        if name == "fromJSON":
            return json.loads(args[0])
        if name == "toJSON":
            return json.dumps(args[0])
        if name == "always":
            return True
        if name == "success":
            return status == "success"
        if name == "failure":
            return status == "failure"
        if name == "cancelled":
            return False
        raise ValueError(f"function {name} is not emulated")


def _get(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            if str(k).lower() == str(key).lower():
                return v
        return None
    if isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
        return value[key]
    return None


def _norm(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "", 0.0)


def render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def evaluate(text: Any, ctx: dict[str, Any]) -> Any:
    """A value with ``${{ }}`` expressions replaced (a whole-string expression keeps its type)."""
    if not isinstance(text, str):
        return text
    whole = re.fullmatch(r"\s*\$\{\{(.*?)\}\}\s*", text, re.S)
    if whole:
        return Expr(whole.group(1), ctx).value()
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: render(Expr(m.group(1), ctx).value()), text, flags=re.S)


def condition(text: Any, ctx: dict[str, Any]) -> bool:
    if text is None:
        return ctx.get("__status__", "success") == "success"
    if isinstance(text, bool):
        return text
    text = str(text).strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    return truthy(Expr(m.group(1) if m else text, ctx).value())


@dataclass
class StepResult:
    name: str
    outcome: str  # success | failure | skipped
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""


@dataclass
class JobResult:
    name: str
    result: str  # success | failure | skipped
    outputs: dict[str, str] = field(default_factory=dict)
    steps: list[StepResult] = field(default_factory=list)


@dataclass
class Emulator:
    """Runs workflows of one repository: ``origin`` (a local git repository) with shared caches and artifacts."""

    origin: Path
    work: Path
    python_spec_venv: Path
    repository: str = "org/repo"
    api_url: str = ""
    artifacts: dict[int, dict[str, Path]] = field(default_factory=dict)
    caches: dict[str, Path] = field(default_factory=dict)
    runs: itertools.count = field(default_factory=lambda: itertools.count(1000))
    stamps: itertools.count = field(default_factory=lambda: itertools.count(1))  # ccache-action's key timestamps

    def run_workflow(self, path: Path, event_name: str, event: dict[str, Any], sha: str, ref: str
                     ) -> tuple[int, dict[str, JobResult]]:
        """Run every job of the workflow file at ``path`` for one event; (run id, job results)."""
        flow = yaml.safe_load(path.read_text(encoding="utf-8"))
        run_id = next(self.runs)
        self.artifacts[run_id] = {}
        github = {"event_name": event_name, "event": event, "sha": sha, "ref": ref, "repository": self.repository,
                  "token": "fake-token", "run_id": run_id, "run_attempt": 1, "server_url": "https://github.test",
                  "api_url": self.api_url}
        results: dict[str, JobResult] = {}
        pending = dict(flow["jobs"])
        while pending:
            ready = [j for j, spec in pending.items() if all(n in results for n in _needs(spec))]
            assert ready, f"cycle in needs: {list(pending)}"
            for job_id in ready:
                spec = pending.pop(job_id)
                results[job_id] = self._job(job_id, spec, flow, github, results, run_id)
        return run_id, results

    def _job(self, job_id: str, spec: dict[str, Any], flow: dict[str, Any], github: dict[str, Any],
             done: dict[str, JobResult], run_id: int) -> JobResult:
        needs = {n: {"result": done[n].result, "outputs": done[n].outputs} for n in _needs(spec)}
        status = "success" if all(n["result"] == "success" for n in needs.values()) else "failure"
        ctx = {"github": github, "needs": needs, "vars": {}, "runner": {"os": "Linux"}, "__status__": status}
        ctx["env"] = {k: render(evaluate(v, ctx)) for k, v in (flow.get("env") or {}).items()}
        if not condition(spec.get("if"), ctx):
            return JobResult(job_id, "skipped")
        matrix = evaluate((spec.get("strategy") or {}).get("matrix"), ctx)
        entries = _matrix_entries(matrix) if isinstance(matrix, dict) else [{}]
        outcome = JobResult(job_id, "success")
        for i, entry in enumerate(entries):
            one = self._steps(f"{job_id}-{i}", spec, dict(ctx, matrix=entry), run_id)
            outcome.steps += one.steps
            outcome.outputs.update(one.outputs)
            if one.result != "success":
                outcome.result = "failure"
        return outcome

    def _steps(self, name: str, spec: dict[str, Any], ctx: dict[str, Any], run_id: int) -> JobResult:
        ws = self.work / f"run{run_id}" / name / "ws"
        temp = ws.parent / "tmp"
        ws.mkdir(parents=True)
        temp.mkdir()
        ctx = dict(ctx, steps={}, runner={"os": "Linux", "temp": str(temp)}, __status__="success",
                   github={**ctx["github"], "workspace": str(ws)})
        ctx["env"] = {**ctx["env"], **{k: render(evaluate(v, ctx)) for k, v in (spec.get("env") or {}).items()}}
        job = JobResult(name, "success")
        post: list[Any] = []  # the actions' post steps, run when the job ends
        for i, step in enumerate(spec.get("steps") or []):
            sid = step.get("id") or f"step{i}"
            if not condition(step.get("if"), ctx):
                result = StepResult(sid, "skipped")
            elif step.get("uses", "").startswith("hendrikmuhs/ccache-action@"):
                result = self._ccache(sid, step, ctx, ws, post)
            elif "uses" in step:
                result = self._action(sid, step, ctx, ws, run_id)
            else:
                result = self._run(sid, step, ctx, ws, temp)
            job.steps.append(result)
            ctx["steps"][sid] = {"outputs": result.outputs, "outcome": result.outcome, "conclusion": result.outcome}
            if result.outcome == "failure":
                ctx["__status__"] = "failure"
                job.result = "failure"
        for finish in reversed(post):
            finish()
        job.outputs = {k: render(evaluate(v, ctx)) for k, v in (spec.get("outputs") or {}).items()}
        return job

    def _ccache(self, sid: str, step: dict[str, Any], ctx: dict[str, Any], ws: Path, post: list[Any]) -> StepResult:
        """hendrikmuhs/ccache-action: restore, put ccache in front of the compilers, save when the job ends."""
        args = {k: render(evaluate(v, ctx)) for k, v in (step.get("with") or {}).items()}
        prefix = f"ccache-{args.get('key', '')}-"
        cache_dir = ws / ".ccache"
        matched = next((k for k in reversed(list(self.caches)) if k.startswith(prefix)), None)
        if matched is not None:
            shutil.copytree(self.caches[matched], cache_dir, dirs_exist_ok=True)
        ctx["env"] = {**ctx["env"], "CCACHE_DIR": str(cache_dir), "CCACHE_MAXSIZE": args.get("max-size", "500M")}
        if args.get("create-symlink") == "true":
            links = ws.parent / "ccache-bin"
            links.mkdir(exist_ok=True)
            for compiler in ("gcc", "g++", "cc", "c++"):
                (links / compiler).symlink_to(shutil.which("ccache") or "ccache")
            ctx["env"]["PATH"] = f"{links}{os.pathsep}{ctx['env'].get('PATH', os.environ.get('PATH', ''))}"

        def save() -> None:
            if cache_dir.is_dir():
                key = f"{prefix}{next(self.stamps)}"
                store = self.work / "caches" / re.sub(r"[^A-Za-z0-9._-]", "_", key)
                shutil.copytree(cache_dir, store)
                self.caches[key] = store

        post.append(save)
        return StepResult(sid, "success", log=f"restored {matched or 'nothing'}")

    def _env(self, ctx: dict[str, Any], step: dict[str, Any], ws: Path, temp: Path, output: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PERFQ_", "CI"))}
        env.update(ctx["env"])
        env.update({k: render(evaluate(v, ctx)) for k, v in (step.get("env") or {}).items()})
        env.update(CI="true", GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output), GITHUB_WORKSPACE=str(ws),
                   GITHUB_STEP_SUMMARY=str(temp / "summary.md"), RUNNER_TEMP=str(temp),
                   GITHUB_REPOSITORY=self.repository, GITHUB_RUN_ID=str(ctx["github"]["run_id"]),
                   GITHUB_SERVER_URL="https://github.test", GITHUB_API_URL=self.api_url,
                   PATH=f"{self.python_spec_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
        env.pop("VIRTUAL_ENV", None)
        return env

    def _run(self, sid: str, step: dict[str, Any], ctx: dict[str, Any], ws: Path, temp: Path) -> StepResult:
        output = temp / f"{sid}.output"
        output.touch()
        script = temp / f"{sid}.sh"
        script.write_text(step["run"], encoding="utf-8")
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=ws,
                              env=self._env(ctx, step, ws, temp, output), capture_output=True, text=True,
                              timeout=900)
        outputs = parse_outputs(output.read_text())
        log = f"$ {step['run']}\n{proc.stdout}{proc.stderr}"
        return StepResult(sid, "success" if proc.returncode == 0 else "failure", outputs, log)

    def _action(self, sid: str, step: dict[str, Any], ctx: dict[str, Any], ws: Path, run_id: int) -> StepResult:
        action = step["uses"].split("@")[0]
        args = {k: render(evaluate(v, ctx)) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            self._checkout(ws, ctx["github"]["sha"], args)
        elif action == "actions/setup-python":
            pass  # one venv for every job: python_spec_venv, first on PATH
        elif action == "actions/cache/restore":
            key = args["key"]
            matched = key if key in self.caches else next(  # each restore key in order, its newest entry
                (k for prefix in args.get("restore-keys", "").split() for k in reversed(list(self.caches))
                 if k.startswith(prefix)), None)
            if matched is not None:
                shutil.copytree(self.caches[matched], ws / args["path"], dirs_exist_ok=True)
            return StepResult(sid, "success", {"cache-hit": render(key in self.caches),
                                               "cache-matched-key": render(matched)})
        elif action == "actions/cache/save":
            store = self.work / "caches" / re.sub(r"[^A-Za-z0-9._-]", "_", args["key"])
            shutil.copytree(ws / args["path"], store, dirs_exist_ok=True)
            self.caches[args["key"]] = store
        elif action == "actions/upload-artifact":
            src = ws / args["path"]
            files = [p for p in src.rglob("*") if p.is_file()] if src.is_dir() else ([src] if src.exists() else [])
            if not files:
                return StepResult(sid, "success" if args.get("if-no-files-found") == "ignore" else "failure")
            dest = self.work / "artifacts" / str(run_id) / args["name"]
            hidden = args.get("include-hidden-files") == "true"
            if not hidden and any(part.startswith(".") for part in Path(args["path"]).parts):
                return StepResult(sid, "failure", log=f"{args['path']}: hidden files need include-hidden-files")
            if src.is_dir():
                shutil.copytree(src, dest, dirs_exist_ok=True)
            else:
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / src.name)
            self.artifacts[run_id][args["name"]] = dest
        elif action == "actions/download-artifact":
            source = self.artifacts[int(args.get("run-id") or run_id)]
            names = [args["name"]] if args.get("name") else fnmatch.filter(source, args["pattern"])
            if args.get("name") and args["name"] not in source:
                return StepResult(sid, "failure", log=f"no artifact {args['name']}")
            target = ws / args.get("path", ".")
            for n in names:
                merge = args.get("name") or args.get("merge-multiple") == "true"
                shutil.copytree(source[n], target if merge else target / n, dirs_exist_ok=True)
        else:
            raise AssertionError(f"action {action} is not emulated")
        return StepResult(sid, "success")

    def _checkout(self, ws: Path, sha: str, args: dict[str, str]) -> None:
        def git(*a: str) -> None:
            subprocess.run(["git", *a], cwd=ws, check=True, capture_output=True, text=True)

        git("init", "-q")
        git("remote", "add", "origin", f"file://{self.origin}")
        depth = args.get("fetch-depth", "1")
        fetch = ["fetch", "-q", "--no-tags", *([f"--depth={depth}"] if depth != "0" else [])]  # 0: all history
        if args.get("filter"):
            fetch.append(f"--filter={args['filter']}")
        git(*fetch, "origin", args.get("ref") or sha)
        if args.get("sparse-checkout"):
            git("sparse-checkout", "set", "--no-cone", *args["sparse-checkout"].split())
        git("checkout", "-q", "--detach", "FETCH_HEAD")


def _matrix_entries(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs of a matrix: the product of its lists, then its ``include`` entries (no product: only those)."""
    axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    product = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] if axes else []
    return product + list(matrix.get("include", []))


def parse_outputs(text: str) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` lines: ``name=value`` and multi-line ``name<<DELIMITER`` ... ``DELIMITER``."""
    outputs: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            outputs[name] = "\n".join(itertools.takewhile(lambda v, d=delimiter: v != d, lines))
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def _needs(spec: dict[str, Any]) -> list[str]:
    needs = spec.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def job_log(result: JobResult) -> str:
    return "\n".join(f"--- {s.name} ({s.outcome})\n{s.log}" for s in result.steps)


def python_venv(path: Path) -> Path:
    """A venv that sees the running test environment's packages (perfq's dependencies, pip, setuptools).

    Not ``--system-site-packages``: run from a venv, ``venv`` makes the new one from the *base*
    interpreter, whose site-packages lack what the test environment installed. A ``.pth`` file lists
    this environment's site directories instead; packages the workflow installs go first.
    """
    if not (path / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        purelib = subprocess.run([str(path / "bin" / "python"), "-c", where], check=True, capture_output=True,
                                 text=True).stdout.strip()
        dirs = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
        (Path(purelib) / "test-environment.pth").write_text("".join(f"{d}\n" for d in dirs if Path(d).is_dir()))
    return path


def perfq_wheel(source: Path, python: Path, dest: Path) -> Path:
    """A wheel of the perfq at ``source``, built from a copy of its files.

    Offline with the environment's setuptools when it can build wheels (setuptools >= 70.1, or
    older with ``wheel``: the dev extras); otherwise with pip's build isolation, which fetches
    setuptools from the index pip is configured with (a venv's own setuptools 65 from ensurepip
    shadows a newer one of the interpreter it was made from).
    """
    copy = dest / "src"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                                  ".venv*"))
    argv = [str(python), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest / "dist"), str(copy)]
    built = subprocess.run([*argv, "--no-build-isolation"], capture_output=True, text=True)
    if built.returncode != 0 and "invalid command 'bdist_wheel'" in built.stdout + built.stderr:
        built = subprocess.run(argv, capture_output=True, text=True)
    assert built.returncode == 0, f"cannot build a perfq wheel:\n{built.stderr[-2000:]}"
    return next((dest / "dist").glob("perfq-*.whl"))
