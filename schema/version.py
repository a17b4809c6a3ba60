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


_DDL = resources.files("schema").joinpath("index.sql").read_text(encoding="utf-8")
SCHEMA_VERSION = schema_version(_DDL)
INDEX_TABLES = tuple(re.findall(r"^CREATE TABLE (\w+)", _DDL, flags=re.MULTILINE))  # in index.sql's order
