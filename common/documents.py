"""Typed JSON documents: frozen dataclasses in, JSON values and JSON Schemas out.

A document type is a (frozen) dataclass whose fields are JSON-able types: ``str``, ``int``,
``float``, ``bool``, ``None``, Enums (their values), ``list``/``tuple``/``dict[str, ...]`` of
those, unions (``X | None``), ``Literal``, ``Any``, nested document dataclasses and named rows
(``NamedTuple``, written as objects). A class with ``JSON_AS_TEXT = True`` (a ClassVar) is
written as ``str(value)``, a string in the schema.

- :func:`to_json` turns an instance into plain JSON values (field order kept; Enums become
  their values; tuples become lists). A document's ``to_json()`` is usually just ``to_json(self)``.
- :func:`json_schema` generates a draft 2020-12 JSON Schema from the type hints: every
  field is a property, fields without a default are ``required``, nested dataclasses go to
  ``$defs``. ``field(metadata={"json": "name"})`` renames a field in the JSON;
  ``field(default=None, metadata={"omit_if_none": True})`` leaves the key out when it is None;
  ``metadata={"internal": True}`` keeps a field out of the JSON and the schema.

Example::

    @dataclass(frozen=True)
    class Hit:
        name: str
        score: float | None = None

    json_schema(Hit)  # {"$schema": ..., "$ref": "#/$defs/Hit", "$defs": {"Hit": {...}}}
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from pathlib import Path
from typing import Any

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_PRIMITIVES: dict[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
    Path: {"type": "string"},
}


def json_name(f: dataclasses.Field) -> str:
    """The key of field ``f`` in the JSON (``metadata={"json": ...}`` or its name)."""
    return f.metadata.get("json", f.name)


def to_json(value: Any) -> Any:
    """``value`` as plain JSON values (dataclasses by field, Enums by value, tuples as lists)."""
    if getattr(type(value), "JSON_AS_TEXT", False):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            json_name(f): to_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.metadata.get("internal")
            and not (f.metadata.get("omit_if_none") and getattr(value, f.name) is None)
        }
    if isinstance(value, enum.Enum):
        return value.value
    if _is_named_tuple(type(value)):
        return {k: to_json(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(to_json(k)): to_json(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def json_schema(tp: type) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) for documents of dataclass type ``tp``."""
    defs: dict[str, Any] = {}
    root = _schema(tp, defs)
    return {"$schema": SCHEMA_DIALECT, **root, "$defs": defs}


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if getattr(tp, "JSON_AS_TEXT", False):
        return {"type": "string"}
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, defs)
    if _is_named_tuple(tp):
        return _named_tuple(tp, defs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema(a, defs) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, set, frozenset) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return {"type": "array", "items": _schema(args[0], defs)} if args else {"type": "array"}
    if origin is tuple:
        return {"type": "array", "prefixItems": [_schema(a, defs) for a in args], "items": False}
    if origin is dict or tp is dict:
        return {"type": "object", "additionalProperties": _schema(args[1], defs) if args else {}}
    if tp in (list, tuple):
        return {"type": "array"}
    raise TypeError(f"no JSON Schema for type {tp!r}")


def _dataclass(tp: type, defs: dict[str, Any]) -> dict[str, Any]:
    name = tp.__name__
    if name not in defs:
        defs[name] = {}  # placeholder: recursive types refer to it
        hints = typing.get_type_hints(tp)
        props, required = {}, []
        for f in (f for f in dataclasses.fields(tp) if not f.metadata.get("internal")):
            props[json_name(f)] = _schema(hints[f.name], defs)
            if (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                    and not f.metadata.get("omit_if_none")):
                required.append(json_name(f))
        doc = (tp.__doc__ or "").strip().splitlines()
        defs[name] = {
            "type": "object",
            **({"description": doc[0]} if doc and not doc[0].startswith(f"{name}(") else {}),
            "properties": props,
            "required": required,
        }
    return {"$ref": f"#/$defs/{name}"}


def _is_named_tuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def _named_tuple(tp: type, defs: dict[str, Any]) -> dict[str, Any]:
    """A named row is an object of its fields (``to_json`` writes it as one)."""
    name = tp.__name__
    if name not in defs:
        defs[name] = {}
        hints = typing.get_type_hints(tp)
        defs[name] = {
            "type": "object",
            "properties": {f: _schema(hints[f], defs) for f in tp._fields},
            "required": [f for f in tp._fields if f not in tp._field_defaults],
        }
    return {"$ref": f"#/$defs/{name}"}
