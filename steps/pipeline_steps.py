"""The document pipeline, router -> parser -> grouper, for the runtime to register."""

from __future__ import annotations

from saga.steps.definition import AnyStepDef, StepDef
from saga.steps.grouper import group
from saga.steps.models import GrouperOutput, ParserOutput, RouterInput, RouterOutput
from saga.steps.parser import parse
from saga.steps.router import route

STEPS: tuple[AnyStepDef, ...] = (
    StepDef("router", route, RouterInput, RouterOutput),
    StepDef("parser", parse, RouterOutput, ParserOutput, loads_pages=True, deletes_pages=True),
    StepDef("grouper", group, ParserOutput, GrouperOutput),
)
