"""The index schema version, derived from index.sql (readers refuse others): a number from the
digest of its statements, comments and layout left out, so that a change of any table changes
it and a comment's edit keeps every index readable."""

import hashlib
import re
from importlib import resources


def schema_version(ddl: str) -> int:
    """The schema version of the DDL text ``ddl``."""
    statements = " ".join(re.sub(r"--[^\n]*", "", ddl).split())
    return int.from_bytes(hashlib.sha256(statements.encode()).digest()[:4], "big")


SCHEMA_VERSION = schema_version(resources.files("schema").joinpath("index.sql").read_text(encoding="utf-8"))
