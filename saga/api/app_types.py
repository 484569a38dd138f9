"""Whether a step's input type accepts the previous step's output, decided from types.

A step's output is encoded to JSON when it commits and decoded with the next step's
input type when that step is claimed. So the question is the decoder's: can every
value of the output type be decoded as the input type? It can when

- the types are the same, or the output is a subclass of the input (more fields);
- or, Struct against Struct, every field the input requires is in the output, and
  each field both have passes the same test (nested Structs, lists, dicts and
  unions recurse; an int fits a float; a union fits when each of its members fits);
- and the output's extra fields are allowed (the input does not forbid unknown
  fields), a tagged input gets its own tag, and array-like Structs are one class.

Constraints (``Meta(ge=0)`` and the like) must be the same on both sides: the
output may hold a value the input's constraint refuses. ``accepts`` returns None
when the input accepts the output, else the reason, as words for one sentence.
"""

from __future__ import annotations

from typing import Any

import msgspec.inspect as mi

_ARRAYS = (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)
_CONSTRAINTS = (
    "ge", "gt", "le", "lt", "multiple_of", "pattern", "min_length", "max_length", "tz",
)  # fmt: skip


def accepts(input_type: type, output_type: type) -> str | None:
    """None when values of ``output_type``, JSON-encoded, decode as ``input_type``."""
    if input_type is output_type:
        return None
    try:
        dst, src = mi.type_info(input_type), mi.type_info(output_type)
    except (TypeError, ValueError) as exc:
        return f"msgspec cannot read the types ({exc})"
    return _fits(dst, src, "", set())


def describe(tp: Any) -> str:
    """A type as people write it: ``list[str]``, ``Pages``, ``int | None``."""
    if isinstance(tp, type) and not getattr(tp, "__args__", None):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _fits(dst: mi.Type, src: mi.Type, path: str, seen: set[tuple[int, int]]) -> str | None:
    if isinstance(dst, mi.AnyType | mi.RawType) or dst == src:
        return None
    if isinstance(src, mi.UnionType):
        for member in src.types:
            if (why := _fits(dst, member, path, seen)) is not None:
                return why
        return None
    if isinstance(dst, mi.UnionType):
        if any(_fits(member, src, path, seen) is None for member in dst.types):
            return None
        return _mismatch(dst, src, path)
    if isinstance(dst, mi.StructType) and isinstance(src, mi.StructType):
        if (id(dst), id(src)) in seen:  # a recursive type: assumed to fit while checked
            return None
        return _struct_fits(dst, src, path, seen | {(id(dst), id(src))})
    if isinstance(dst, _ARRAYS) and isinstance(src, _ARRAYS):
        return _fits(dst.item_type, src.item_type, f"{path}[]", seen)
    if isinstance(dst, mi.DictType) and isinstance(src, mi.DictType):
        return _fits(dst.key_type, src.key_type, f"{path}{{}}", seen) or _fits(
            dst.value_type, src.value_type, f"{path}{{}}", seen
        )
    if isinstance(dst, mi.TupleType) and isinstance(src, mi.TupleType):
        if len(dst.item_types) != len(src.item_types):
            return _mismatch(dst, src, path)
        for i, (d, s) in enumerate(zip(dst.item_types, src.item_types, strict=True)):
            if (why := _fits(d, s, f"{path}[{i}]", seen)) is not None:
                return why
        return None
    if isinstance(dst, mi.LiteralType) and isinstance(src, mi.LiteralType):
        return None if set(src.values) <= set(dst.values) else _mismatch(dst, src, path)
    if isinstance(dst, mi.FloatType) and isinstance(src, mi.IntType):
        return _constraints(dst, src, path)
    if type(dst) is type(src) and not hasattr(dst, "cls"):
        return _constraints(dst, src, path)
    return _mismatch(dst, src, path)


def _struct_fits(
    dst: mi.StructType, src: mi.StructType, path: str, seen: set[tuple[int, int]]
) -> str | None:
    if dst.array_like or src.array_like:
        if src.cls is dst.cls:
            return None
        return f"{_at(path)}array-like Structs fit only their own class"
    if dst.tag_field is not None and (src.tag_field, src.tag) != (dst.tag_field, dst.tag):
        return f"{_at(path)}{dst.cls.__name__} is tagged {dst.tag_field}={dst.tag!r}"
    theirs = {f.encode_name: f for f in src.fields}
    omits = src.cls.__struct_config__.omit_defaults
    for field in dst.fields:
        name = f"{path}.{field.encode_name}" if path else field.encode_name
        other = theirs.get(field.encode_name)
        if other is None or (field.required and omits and not other.required):
            if field.required:
                return f"{dst.cls.__name__} requires field {name!r}, which {src.cls.__name__} " + (
                    "does not have" if other is None else "omits when it is its default"
                )
            continue
        if (why := _fits(field.type, other.type, name, seen)) is not None:
            return why
    extra = sorted(set(theirs) - {f.encode_name for f in dst.fields})
    if dst.forbid_unknown_fields and extra:
        return f"{dst.cls.__name__} forbids unknown fields and would get {extra[0]!r}"
    return None


def _constraints(dst: mi.Type, src: mi.Type, path: str) -> str | None:
    for name in _CONSTRAINTS:
        want = getattr(dst, name, None)
        if want is not None and getattr(src, name, None) != want:
            return f"{_at(path)}the input requires {name}={want!r}, which the output does not"
    return None


def _mismatch(dst: mi.Type, src: mi.Type, path: str) -> str:
    return f"{_at(path)}the output has {_name(src)} where the input wants {_name(dst)}"


def _at(path: str) -> str:
    return f"field {path!r}: " if path else ""


def _name(t: mi.Type) -> str:
    if isinstance(t, mi.StructType | mi.EnumType | mi.DataclassType | mi.NamedTupleType):
        return t.cls.__name__
    if isinstance(t, mi.UnionType):
        return " | ".join(_name(m) for m in t.types)
    if isinstance(t, mi.LiteralType):
        return f"Literal{list(t.values)!r}"
    return type(t).__name__.removesuffix("Type").lower()
