"""The index's constructs as rules, one module per family (see base.py), each with its ``RULE``:
found here, not listed, so a new family is its one module. The link and the patch run the phases
in order and, inside each, these rules in the order of their places (``Rule.place``: the order of
their nodes, so of node ids, and of their edges, the first of which wins)."""

import importlib
import pkgutil

from indexer.rules.base import Rule


def _rules() -> tuple[Rule, ...]:
    """The ``RULE`` of every module of this package (but base), in the order of their places."""
    modules = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)]
    return tuple(sorted((m.RULE for m in modules if hasattr(m, "RULE")), key=lambda rule: rule.place))


RULES = _rules()
