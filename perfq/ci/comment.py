"""The sticky PR comment: its hidden marker, its body, and which existing comment is ours.

Pure. The body is made by the unprivileged benchmarks workflow (`perfq ci report`) and is
data to the commenting workflow: the marker is added there, after removing any copy of it
the body may carry, and only a comment written by a bot account with the marker is updated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.render import GITHUB_COMMENT_BUDGET, md_code

MARKER = "<!-- perfq:sticky-comment -->"
COMMENT_FILE = "comment.md"
PR_FILE = "pr.json"
_TRUNCATED = "\n\n… (cut to fit a GitHub comment; the full report is in the workflow's perfq-comment artifact)\n"


@dataclass(frozen=True)
class PullRequestRef:
    """Which PR a prepared comment is for, as the benchmarks run saw it."""

    number: int
    head_sha: str

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "head_sha": self.head_sha}


def parse_pr(text: str) -> PullRequestRef:
    """The ``pr.json`` of a prepared comment; ValueError unless it is a positive number and a hex sha."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{PR_FILE} is not JSON ({exc})") from None
    number = data.get("number") if isinstance(data, dict) else None
    sha = data.get("head_sha") if isinstance(data, dict) else None
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise ValueError(f"{PR_FILE}: 'number' must be a positive integer, got {number!r}")
    if not isinstance(sha, str) or not 7 <= len(sha) <= 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ValueError(f"{PR_FILE}: 'head_sha' must be a hex commit id, got {sha!r}")
    return PullRequestRef(number, sha)


def fit(text: str, budget: int = GITHUB_COMMENT_BUDGET) -> str:
    """``text`` cut at a line boundary to fit ``budget`` characters (with a note saying so)."""
    if len(text) <= budget:
        return text
    cut = text[: budget - len(_TRUNCATED)]
    return cut[: cut.rfind("\n")] + _TRUNCATED if "\n" in cut else cut + _TRUNCATED


def sticky_body(prepared: str) -> str:
    """The comment to post: the marker, then the prepared body (any marker inside it removed)."""
    return fit(f"{MARKER}\n{prepared.replace(MARKER, '').strip()}\n")


def find_sticky(comments: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first comment that carries the marker and was written by a bot (the workflow's token)."""
    for c in comments:
        user = c.get("user") or {}
        if MARKER in str(c.get("body") or "") and user.get("type") == "Bot":
            return c
    return None


def _code(name: str) -> str:
    """``name`` as an inline code span (no HTML, markdown, control or bidirectional character in it renders)."""
    return md_code(name)


def config_note(changed: list[str]) -> str:
    """The comment's line for a PR that changes perfq's config files ``changed`` ('' for none)."""
    if not changed:
        return ""
    return (f"**This PR changes {', '.join(_code(name) for name in changed)}**: perfq read the base branch's "
            "config for this run; the change takes effect after merge.")


def report_body(affected_md: str | None, verdicts_md: str | None, selected: int | None, run_url: str,
                missing: tuple[str, ...] = (), note: str = "") -> str:
    """The prepared comment: ``note`` (a config change), the affected summary, then the compare verdicts
    (or why there are none), then the selected benchmarks that produced no result."""
    lines = ["## perfq: benchmarks this PR can slow down", "", *([note, ""] if note else [])]
    lines.append(affected_md.strip() if affected_md else "_No affected summary: the select job did not finish._")
    lines += ["", "### Base vs head", ""]
    if verdicts_md:
        lines.append(verdicts_md.strip())
    elif selected == 0:
        lines.append("Nothing to run: no benchmark can see this change.")
    else:
        lines.append("_No results: the benchmark jobs did not produce any (see the run's logs)._")
    if missing:
        lines += ["", f"**No result for {len(missing)} selected benchmark(s)** (their job failed or was cancelled "
                  f"before writing one): {', '.join(_code(name) for name in missing)}"]
    if run_url:
        lines += ["", f"<sub>[workflow run]({run_url})</sub>"]
    return "\n".join(lines) + "\n"
