"""A local stand-in for the GitHub REST endpoints `perfq ci comment` calls (pulls, issue comments)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

TOKEN = "fake-token"


@dataclass
class FakeGitHub:
    """PR heads and issue comments of one repository, served over HTTP on localhost."""

    repository: str = "org/repo"
    heads: dict[int, str] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    _next_id: int = 100

    def add_comment(self, number: int, body: str, login: str, kind: str) -> dict[str, Any]:
        self._next_id += 1
        comment = {"id": self._next_id, "body": body, "user": {"login": login, "type": kind},
                   "html_url": f"https://github.test/{self.repository}/pull/{number}#issuecomment-{self._next_id}"}
        self.comments.setdefault(number, []).append(comment)
        return comment

    def bot_comments(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.get(number, []) if c["user"]["type"] == "Bot"]

    def handle(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        self.requests.append((method, path))
        url = urlparse(path)
        prefix = f"/repos/{self.repository}"
        if not url.path.startswith(prefix):
            return 404, {"message": "Not Found"}
        parts = url.path[len(prefix):].strip("/").split("/")
        if method == "GET" and parts[0] == "pulls" and int(parts[1]) in self.heads:
            return 200, {"number": int(parts[1]), "head": {"sha": self.heads[int(parts[1])]}}
        if parts[:1] == ["issues"] and len(parts) == 3 and parts[2] == "comments":
            number = int(parts[1])
            if method == "GET":
                q = parse_qs(url.query)
                per, page = int(q.get("per_page", ["30"])[0]), int(q.get("page", ["1"])[0])
                return 200, self.comments.get(number, [])[(page - 1) * per: page * per]
            if method == "POST" and body:
                return 201, self.add_comment(number, body["body"], "github-actions[bot]", "Bot")
        if method == "PATCH" and parts[:2] == ["issues", "comments"] and body:
            for c in (c for cs in self.comments.values() for c in cs):
                if c["id"] == int(parts[2]):
                    c["body"] = body["body"]
                    return 200, c
        return 404, {"message": "Not Found"}

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code, data = 401, {"message": "Bad credentials"}
                else:
                    size = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(size)) if size else None
                    code, data = fake.handle(self.command, self.path, body)
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PATCH = _reply

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"
