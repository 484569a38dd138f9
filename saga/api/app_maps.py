"""Maps (fan-out / fan-in) of a ``saga.App``: ``@app.map(over=step)`` runs its function
once per item of the list ``step`` returned, each item its own attempts, retries,
history rows, lease and fencing token, at most ``concurrency`` at once per saga; the
step after it takes their outputs in item order. The spawn, each item's claim, commit
and failure, and the fan-in (decided in the last item's commit) are Lua transitions
(``state/lua/claim_items.lua``, ``commit_items.lua``, ``fail_items.lua``).

::

    @app.step()
    async def split(ctx, doc: Doc) -> list[Chunk]: ...

    @app.map(over=split, concurrency=4)
    async def parse(ctx, chunk: Chunk) -> Parsed: ...

    @app.step(after=parse)
    async def merge(ctx, parsed: list[Parsed]) -> Report: ...

With ``on_failure="partial"`` an item that fails for good does not fail the saga: the
step after takes ``saga.MapResults[Parsed]`` (``results`` with ``None`` at the failed
items, ``partial``, ``failed``: their indexes).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

import msgspec

from saga.api.app_types import accepts, describe
from saga.api.pipeline import AppError, MapSpec, StepSpec, lanes_of
from saga.state.map_calls import MAX_CONCURRENCY

__all__ = ["MapResults", "MapSpec", "declare_map", "map_spec", "settle_maps"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

ON_FAILURE = ("fail", "partial")


class MapResults(msgspec.Struct, Generic[T], frozen=True):
    """The fan-in of a map with ``on_failure="partial"``: the items' outputs in item
    order (``None`` for a failed item), whether any failed, and which (indexes)."""

    results: list[T | None]
    partial: bool = False
    failed: list[int] = []


def declare_map(
    app: Any,
    *,
    over: str | Callable[..., Any],
    concurrency: int = 10,
    on_failure: str = "fail",
    name: str | None = None,
    retries: int | None = None,
    timeout: float | None = None,
    lease: float | None = None,
    backoff: float | None = None,
    loads_pages: bool = False,
    compensate: Callable[..., Any] | None = None,
) -> Callable[[F], F]:
    """``@app.map``: declare ``async def fn(ctx, item: In) -> Out`` a map over the list that
    step ``over`` returns: one attempt per item, at most ``concurrency`` (1 to 100) per saga
    at once; the step ``after=`` it takes ``list[Out]`` in item order, or
    ``saga.MapResults[Out]`` with ``on_failure="partial"`` (an item that fails for good
    does not fail the saga). At most 1,000 items; ``retries``, ``timeout``, ``lease`` and
    ``backoff`` are each item's, as ``@app.step``'s are a step's; ``loads_pages``: each
    item's attempt reads the record's pages blob into ``ctx.pages`` (one GET after its
    claim; the blob stays for the steps after the map). ``compensate``,
    an ``async def undo(ctx, item: In, output: Out, idempotency_key)``, undoes each item
    that committed, once, latest first, when the saga compensates (docs/sagas.md, Maps)."""

    def register(fn: F) -> F:
        label = name or str(getattr(fn, "__name__", ""))
        spec = map_spec(f"map {label!r}", "", concurrency, on_failure)
        step = app.step(name=name, after=over, retries=retries, timeout=timeout, lease=lease,
                        backoff=backoff, loads_pages=loads_pages,
                        compensate=compensate)(fn)  # fmt: skip
        app._declared[-1] = replace(app._declared[-1], map=spec)
        return typing.cast(F, step)

    return register


def map_spec(owner: str, over: str, concurrency: int, on_failure: str) -> MapSpec:
    """The checked settings of ``@app.map``; AppError in one sentence otherwise."""
    if on_failure not in ON_FAILURE:
        raise AppError(f"{owner}: on_failure= must be 'fail' or 'partial', not {on_failure!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise AppError(f"{owner}: concurrency= must be a whole number, not {concurrency!r}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise AppError(f"{owner}: concurrency= must be 1 to {MAX_CONCURRENCY}, not {concurrency}")
    return MapSpec(over=over, concurrency=concurrency, on_failure=on_failure)


def settle_maps(specs: list[StepSpec], parents: Mapping[str, Sequence[str]]) -> list[StepSpec]:
    """The specs with each map's fan-in type set as its ``output_type``; AppError when a
    map stands where it cannot (after one step, outside branches, before at most one
    step that is no join) or its parent does not return a list of what it takes."""
    by_name = {s.name: s for s in specs}
    lanes = lanes_of([s.name for s in specs], parents)
    out = []
    for declared in specs:
        spec = declared
        if spec.map is not None:
            if spec.name in lanes:
                raise AppError(f"map {spec.name!r} cannot run in a branch; put it before the fork")
            spec = by_name[spec.name] = _settled(spec, by_name, parents)
        out.append(spec)
    return out


def _settled(
    spec: StepSpec, by_name: Mapping[str, StepSpec], parents: Mapping[str, Sequence[str]]
) -> StepSpec:
    assert spec.map is not None
    where = f"map {spec.name!r}"
    ps = parents.get(spec.name, ())
    kids = [s for s, p in parents.items() if spec.name in p]
    fork = [s for s, p in parents.items() if spec.map.over in p]
    if list(ps) != [spec.map.over] or len(kids) > 1 or fork != [spec.name]:
        raise AppError(
            f"{where} must run after its over= step alone and before at most one step, "
            "outside branches (put a step between it and a fork or join)"
        )
    if kids and len(parents[kids[0]]) > 1:
        raise AppError(f"{where} cannot be a parent of the join {kids[0]!r}; put a step between")
    over = by_name[spec.map.over]
    if typing.get_origin(over.output_type) is not list:
        raise AppError(
            f"{where} runs over step {over.name!r}, which returns "
            f"{describe(over.output_type)}; it must return list[{spec.input_type.__name__}]"
        )
    (item,) = typing.get_args(over.output_type)
    if (why := accepts(spec.input_type, item)) is not None:
        raise AppError(
            f"{where} cannot take the items of {over.name!r} ({describe(item)} into "
            f"{describe(spec.input_type)}): {why}"
        )
    result: Any = list[spec.output_type]  # type: ignore[name-defined]
    if spec.map.on_failure == "partial":
        result = MapResults[spec.output_type]  # type: ignore[name-defined]
    return replace(spec, output_type=result, map=replace(spec.map, item_output=spec.output_type))
