"""The C++ class hierarchy, by what the text says (classes with bases or virtual methods): a
virtual call of a method reaches its overrides in the subclasses of the receiver's class."""

from __future__ import annotations

from indexer.link_cpp import ClassHierarchy
from indexer.rules.base import LinkContext, Phase, Rule
from schema.model import ClassBaseRow, VirtualMethodRow


def add_class_hierarchy(ctx: LinkContext) -> None:
    """The class hierarchy's rows, and the hierarchy (where virtual calls dispatch)."""
    files, bases, virtuals = ctx.files, ctx.out(ClassBaseRow), ctx.out(VirtualMethodRow)
    for file_id, f in enumerate(files):
        for c in f.classes:
            bases += [(file_id, c.qualname, base, c.line) for base in c.bases]
            virtuals += [(file_id, c.qualname, name, c.line) for name in c.virtuals]
    ctx.hierarchy = ClassHierarchy(
        (file_id, c.qualname, c.bases, c.virtuals) for file_id, f in enumerate(files) for c in f.classes
    )


RULE = Rule(
    "classes",
    writes=(ClassBaseRow, VirtualMethodRow),
    reads=(),
    link={Phase.DECLARE: add_class_hierarchy},
)
