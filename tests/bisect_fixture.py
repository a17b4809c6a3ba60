"""Small git repositories for the bisect tests: a benchmark script whose time changes at a
known commit, with seeded noise, broken commits and (optionally) a merge."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import git as conftest_git

BENCH = '''\
import os, random, sys
from pathlib import Path
if Path("broken.txt").exists():
    sys.exit("broken build")
base = float(Path("speed.txt").read_text())
seed = os.environ.get("PERFQ_BISECT_COMMIT", "") + os.environ.get("PERFQ_BISECT_RUN", "")
rng = random.Random(seed)
noise = float(os.environ.get("BENCH_NOISE", "0.03"))
stop_at = os.environ.get("BENCH_INTERRUPT_AT")
marker = os.environ.get("BENCH_INTERRUPT_MARKER")
if stop_at and marker and os.environ.get("PERFQ_BISECT_COMMIT", "").startswith(stop_at) \\
        and not Path(marker).exists():
    Path(marker).write_text("interrupted once")
    import signal
    os.kill(os.getppid(), signal.SIGINT)
print("warming up")
print(f"time: {base * rng.uniform(1 - noise, 1 + noise):.4f} ms")
'''


FIXED_DATE = "2026-01-01T00:00:00+00:00"  # the same commits every run: their shas seed the benchmark's noise


def git(repo: Path, *args: str) -> str:
    return conftest_git(repo, *args, date=FIXED_DATE).strip()


@dataclass
class Repo:
    path: Path
    commits: list[str] = field(default_factory=list)  # first-parent line, oldest first
    culprit: str = ""
    side: list[str] = field(default_factory=list)
    merge: str = ""

    def head_branch(self) -> str:
        return git(self.path, "symbolic-ref", "--short", "HEAD")


def make_repo(root: Path, n: int = 16, culprit: int = 11, broken: tuple[int, ...] = (),
              slow: float = 13.0, merge_at: int | None = None, culprit_on_side: bool = False,
              files: dict[str, str] | None = None) -> Repo:
    """A repo with commits c0..c<n> on ``main``; c<culprit> changes speed 10 -> ``slow`` ms.

    ``broken``: commits where the benchmark fails (fixed by the next commit). ``merge_at``:
    commit index that is a --no-ff merge of a 3-commit side branch (the culprit can sit on
    the side branch with ``culprit_on_side``). ``files``: extra files of the first commit.
    """
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "bench.py").write_text(BENCH)
    (repo / "speed.txt").write_text("10.0\n")
    (repo / "n.txt").write_text("0\n")
    for name, text in (files or {}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c0: start")
    r = Repo(repo, [git(repo, "rev-parse", "HEAD")])
    for i in range(1, n + 1):
        if merge_at == i:
            base = git(repo, "rev-parse", "HEAD")
            git(repo, "checkout", "-q", "-b", "side")
            for k in range(3):
                (repo / f"side{k}.txt").write_text(f"{k}\n")
                if culprit_on_side and k == 1:
                    (repo / "speed.txt").write_text(f"{slow}\n")
                    (repo / "kernel.py").write_text(
                        "for i in range(0, n, BLOCK):\n    acc += tl.load(p + i)\n")
                git(repo, "add", "-A")
                git(repo, "commit", "-qm", f"side{k}")
                r.side.append(git(repo, "rev-parse", "HEAD"))
            if culprit_on_side:
                r.culprit = r.side[1]
            git(repo, "checkout", "-q", "main")
            assert git(repo, "rev-parse", "HEAD") == base
            git(repo, "merge", "-q", "--no-ff", "-m", f"c{i}: merge side", "side")
            r.merge = git(repo, "rev-parse", "HEAD")
            r.commits.append(r.merge)
            continue
        (repo / "n.txt").write_text(f"{i}\n")
        if i == culprit and not culprit_on_side:
            (repo / "speed.txt").write_text(f"{slow}\n")
            (repo / "kernel.py").write_text("for i in range(0, n, BLOCK):\n    acc += tl.load(p + i)\n"
                                            "    tl.debug_barrier()\n")
        if i in broken:
            (repo / "broken.txt").write_text("x\n")
        elif (repo / "broken.txt").exists():
            (repo / "broken.txt").unlink()
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{i}: change {i}")
        r.commits.append(git(repo, "rev-parse", "HEAD"))
        if i == culprit and not culprit_on_side:
            r.culprit = r.commits[-1]
    return r
