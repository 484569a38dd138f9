"""The input and output types of a ``saga.App`` step, read from its annotations, and
the check that a compensation's annotated types accept the step's."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from saga.api.app_types import accepts, describe
from saga.api.pipeline import AppError, CompensateFn


def io_types(step: str, fn: Callable[..., Any]) -> tuple[type, type]:
    """The input and output Structs of ``async def fn(ctx, inp: In) -> Out``."""
    hints = _hints(step, fn)
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    shape = f"`async def {step}(ctx, inp: In) -> Out` with msgspec Structs In and Out"
    if len(params) < 2:
        raise AppError(f"step {step!r} must take (ctx, input): {shape}")
    found = (hints.get(params[1].name), hints.get("return"))
    for what, tp in zip(("input", "output"), found, strict=True):
        if not is_struct_or_list(tp):
            got = "no annotation" if tp is None else describe(tp)
            raise AppError(f"step {step!r}: its {what} type is {got}; write {shape}")
    return typing.cast(tuple[type, type], found)


def is_struct_or_list(tp: Any) -> bool:
    """A Struct (generic ones too: ``saga.MapResults[Out]``), or a list of Structs (a map's
    parent returns its items, the step after a map takes their outputs)."""
    origin = typing.get_origin(tp)
    if origin is list:
        return all(_struct(a) for a in typing.get_args(tp))
    return _struct(tp)


def _struct(tp: Any) -> bool:
    base = typing.get_origin(tp) or tp
    return isinstance(base, type) and issubclass(base, msgspec.Struct)


def _hints(step: str, fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # a name the annotations use is not importable where fn is
        raise AppError(
            f"step {step!r}: its annotations cannot be read ({type(exc).__name__}: {exc}); "
            "define the types at module level"
        ) from None


def check_compensate_types(step: str, fn: CompensateFn, inp: type, out: type) -> None:
    """An annotated compensation must accept what it will get: the step's input and output."""
    hints = _hints(step, fn)
    names = list(inspect.signature(fn).parameters)[1:3]
    for what, given, name in zip(("input", "output"), (inp, out), names, strict=False):
        wanted = hints.get(name)
        if not (isinstance(wanted, type) and issubclass(wanted, msgspec.Struct)):
            continue  # not annotated with a Struct: nothing to check
        if (why := accepts(wanted, given)) is not None:
            raise AppError(
                f"step {step!r}: compensate= takes {describe(wanted)} as the step's {what}, "
                f"which is {describe(given)}: {why}"
            )
