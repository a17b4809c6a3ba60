"""The environment the benches run perfq in: as a user's shell runs it, with bytecode cached
(a PYTHONDONTWRITEBYTECODE sandbox would compile every perfq module on every call, ~0.1 s)."""

from __future__ import annotations

import os

CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
