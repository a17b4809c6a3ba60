"""The C++ class hierarchy, by what the text says (classes with bases or virtual methods): a
virtual call of a method reaches its overrides in the subclasses of the receiver's class."""

from __future__ import annotations

from indexer.link_cpp import ClassHierarchy
from indexer.rules.base import LinkContext, PatchContext, PatchPhase, Phase, Rule
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


def read_class_hierarchy(ctx: PatchContext) -> None:
    """(file id, class, its bases, its virtual methods) of every class the index records (a
    change of them is re-linked: registration_signature)."""
    classes: dict[tuple[int, str], tuple[list[str], list[str]]] = {}
    for file_id, qualname, base in ctx.store.rows("class_bases"):
        classes.setdefault((file_id, qualname), ([], []))[0].append(base)
    for file_id, qualname, name in ctx.store.rows("virtual_methods"):
        classes.setdefault((file_id, qualname), ([], []))[1].append(name)
    ctx.classes = [(f, q, tuple(b), tuple(v)) for (f, q), (b, v) in sorted(classes.items())]


RULE = Rule(
    "classes",
    writes=(ClassBaseRow, VirtualMethodRow),
    reads=(),
    link={Phase.DECLARE: add_class_hierarchy},
    patch={PatchPhase.PREPARE: read_class_hierarchy},
    place=30,
)
