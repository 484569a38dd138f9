"""How a step is described to the runtime: a name, a function and its typed input/output."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from saga.steps.context import StepContext

In = TypeVar("In", bound=msgspec.Struct)
Out = TypeVar("Out", bound=msgspec.Struct)


@dataclass(frozen=True, slots=True)
class StepDef(Generic[In, Out]):
    """One step of the pipeline, as the runtime registers it.

    The runtime decodes the input with ``input_type``, calls ``fn(ctx, input)``
    and encodes the result (an ``output_type``) as the checkpoint that becomes
    the next step's input. An output with a non-empty ``review: str`` field flags
    the saga for review: the step succeeded, but a person should look before its
    result is trusted (the saga ends "completed, needs review").
    """

    name: str
    fn: Callable[[StepContext, In], Awaitable[Out]]
    input_type: type[In]
    output_type: type[Out]
    loads_pages: bool = False
    """The claim loads the pages blob into ``ctx.pages``."""
    deletes_pages: bool = False
    """The commit of this step deletes the pages blob."""


AnyStepDef = StepDef[Any, Any]
