"""Canary sets: the shared-infrastructure sets of the config (paths, functions, and the
benchmarks that signal a change to them)."""

from __future__ import annotations

import json

from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import CanarySetRow


def add_canary_sets(ctx: LinkContext) -> None:
    out = ctx.out(CanarySetRow)
    for c in ctx.canaries:
        out.append(
            (
                c["name"],
                c.get("description", ""),
                json.dumps(c.get("paths", [])),
                json.dumps(c.get("functions", [])),
                json.dumps(c.get("benchmarks", [])),
            )
        )


RULE = Rule("canaries", writes=(CanarySetRow,), reads=(), link={Phase.PACK: add_canary_sets}, place=110)
