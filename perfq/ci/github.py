"""The few GitHub REST calls the sticky comment needs (standard library HTTP, token from the environment)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from common.errors import PerfqError
from perfq.ci.comment import PullRequestRef, find_sticky, sticky_body

DEFAULT_API = "https://api.github.com"
_PAGE = 100
_MAX_PAGES = 30  # 3,000 comments: far more than a PR has


@dataclass(frozen=True)
class GitHub:
    """One repository's REST API with a token."""

    api: str
    repository: str
    token: str

    @classmethod
    def from_env(cls, repository: str, api: str | None = None) -> GitHub:
        token = os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN") or ""
        if not token:
            raise PerfqError("no GitHub token: set GH_TOKEN (the workflow's ${{ github.token }})")
        if repository.count("/") != 1 or not all(repository.split("/")):
            raise PerfqError(f"--repository {repository!r}: expected OWNER/NAME")
        return cls((api or os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/"), repository, token)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer of one request; HTTP and network errors are PerfqErrors."""
        req = urllib.request.Request(
            f"{self.api}/repos/{self.repository}{path}",
            data=None if body is None else json.dumps(body).encode("utf-8"),
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json",
                     "User-Agent": "perfq-ci"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read().decode("utf-8") or "null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise PerfqError(f"GitHub {method} {path}: HTTP {exc.code} {detail}") from None
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise PerfqError(f"GitHub {method} {path}: {exc}") from None

    def comments(self, number: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, _MAX_PAGES + 1):
            batch = self.call("GET", f"/issues/{number}/comments?per_page={_PAGE}&page={page}")
            found += batch
            if len(batch) < _PAGE:
                break
        return found


@dataclass(frozen=True)
class Posted:
    """What `perfq ci comment` did."""

    action: str  # created | updated | skipped
    url: str
    reason: str = ""


def post_sticky(gh: GitHub, pr: PullRequestRef, head_sha: str, prepared: str) -> Posted:
    """Create or update the PR's sticky comment, unless the PR's head is not the commit that ran."""
    if pr.head_sha != head_sha:
        raise PerfqError(f"the prepared comment is for commit {pr.head_sha[:12]}, but {head_sha[:12]} ran: refused")
    current = gh.call("GET", f"/pulls/{pr.number}")
    current_sha = str((current.get("head") or {}).get("sha") or "")
    if current_sha != head_sha:
        why = (f"PR #{pr.number} is at {current_sha[:12] or '?'}, not {head_sha[:12]} (the commit that ran): "
               "a newer run will comment")
        return Posted("skipped", "", why)
    body = sticky_body(prepared)
    mine = find_sticky(gh.comments(pr.number))
    if mine is None:
        made = gh.call("POST", f"/issues/{pr.number}/comments", {"body": body})
        return Posted("created", str(made.get("html_url", "")))
    made = gh.call("PATCH", f"/issues/comments/{mine['id']}", {"body": body})
    return Posted("updated", str(made.get("html_url", "")))
