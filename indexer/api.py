"""The indexer's parsers as the query layer calls them: function extents of one file version and
its code tokens, for a change the index has not seen (an import-linter contract keeps ``query``
from importing the parsers, or libclang, any other way).

Importing this module loads libclang: the query layer imports it where a file needs parsing.
"""

from __future__ import annotations

from indexer.extract import file_facts
from indexer.tokens import CodeTokens, code_tokens

__all__ = ["CodeTokens", "code_tokens", "file_facts"]
