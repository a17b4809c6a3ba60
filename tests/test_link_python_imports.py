"""Python references follow imports the way Python binds names: ``from m import *`` brings m's
public names only (no ``_private`` ones), through chains and cycles of star imports."""

from __future__ import annotations

import textwrap

from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link

MODULES = {
    "pkg/__init__.py": """
        from pkg.impl import *
        from pkg.more import *
    """,
    "pkg/impl.py": """
        from pkg import *
        from pkg.more import *

        def helper(x):
            return x

        def _private_fn(x):
            return x
    """,
    "pkg/more.py": """
        from pkg import *
        from pkg.impl import *

        def other(x):
            return helper(x)
    """,
    "pkg/use.py": """
        import pkg

        def run(x):
            pkg.helper(x)
            pkg.other(x)
            pkg._private_fn(x)
            pkg._C._VariableFunctions.add(x)
    """,
}


def facts(path: str, source: str) -> FileFacts:
    out = file_facts("python", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_star_imports_bring_public_names_through_cycles_and_never_private_ones():
    tables = link([facts(p, s) for p, s in MODULES.items()], [], [], [], {}, [])
    qualname = {row[0]: row[2] for row in tables.rows["functions"]}
    called = {qualname[callee] for caller, callee, *_ in tables.rows["call_edges"] if qualname[caller] == "pkg.use.run"}
    assert called == {"pkg.impl.helper", "pkg.more.other"}
