"""When a step's input type accepts the previous step's output: the table of decisions,
each checked against what msgspec really decodes."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from saga.api.app_types import accepts


class Base(msgspec.Struct):
    a: int
    b: str = ""


class Child(Base):
    c: float = 0.0


class Narrow(msgspec.Struct):
    a: int


class Wide(msgspec.Struct):
    a: int
    b: str
    extra: list[int] = []


class AsFloat(msgspec.Struct):
    a: float


class MaybeA(msgspec.Struct):
    a: int | None = None


class Strict(msgspec.Struct, forbid_unknown_fields=True):
    a: int


class Positive(msgspec.Struct):
    a: Annotated[int, msgspec.Meta(ge=0)]


class Tagged(msgspec.Struct, tag=True):
    a: int


class TaggedChild(Tagged, tag=True):
    pass


class Omits(msgspec.Struct, omit_defaults=True):
    a: int = 0


class Inner(msgspec.Struct):
    v: int


class Outer(msgspec.Struct):
    items: list[Inner]


class InnerText(msgspec.Struct):
    v: str


class OuterText(msgspec.Struct):
    items: list[InnerText]


class Mode(msgspec.Struct):
    mode: Literal["a", "b", "c"]


class ModeAB(msgspec.Struct):
    mode: Literal["a", "b"]


SAMPLES: dict[type, object] = {
    Base: Base(a=1, b="x"),
    Child: Child(a=1, b="x", c=2.5),
    Wide: Wide(a=-1, b="x", extra=[1]),
    MaybeA: MaybeA(a=None),
    Tagged: Tagged(a=1),
    TaggedChild: TaggedChild(a=1),
    Omits: Omits(),
    Outer: Outer(items=[Inner(v=1)]),
    Narrow: Narrow(a=-5),
    Mode: Mode(mode="c"),
    ModeAB: ModeAB(mode="a"),
}


@pytest.mark.parametrize(
    ("input_type", "output_type", "fits"),
    [
        (Base, Base, True),
        (Base, Child, True),  # a subclass: more fields
        (Narrow, Wide, True),  # a Struct whose required fields the output has
        (Base, Narrow, True),  # b has a default
        (Wide, Narrow, False),  # b is required and missing
        (AsFloat, Narrow, True),  # an int fits a float
        (Narrow, AsFloat, False),
        (Narrow, MaybeA, False),  # None does not fit int
        (MaybeA, Narrow, True),
        (Strict, Wide, False),  # forbids the output's extra fields
        (Positive, Narrow, False),  # the constraint is not guaranteed
        (Tagged, TaggedChild, False),  # another tag value
        (Narrow, Omits, False),  # a is left out when it is its default
        (Outer, Outer, True),
        (OuterText, Outer, False),  # nested: int where str is wanted
        (Mode, ModeAB, True),
        (ModeAB, Mode, False),
    ],
)
def test_accepts_agrees_with_msgspec(input_type: type, output_type: type, fits: bool) -> None:
    """accepts() says fit exactly when the output's sample decodes as the input type."""
    assert (accepts(input_type, output_type) is None) is fits, accepts(input_type, output_type)
    sample = SAMPLES.get(output_type)
    if sample is not None:
        raw = msgspec.json.encode(sample)
        try:
            msgspec.json.decode(raw, type=input_type)
            decoded = True
        except msgspec.ValidationError:
            decoded = False
        assert decoded is fits, "msgspec disagrees on the sample"
