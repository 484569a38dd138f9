"""saga.App: what a decorated step becomes, and each mistake refused with one sentence
when the app is built (or, when it can be told at once, when the step is declared)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

import saga
from saga.api.pipeline import Pipeline
from saga.config.settings import load_settings
from tests.app import apps


class A(msgspec.Struct):
    x: int


class B(msgspec.Struct):
    y: str


async def a_to_b(ctx: saga.StepContext, inp: A) -> B:
    return B(y=str(inp.x))


async def b_to_a(ctx: saga.StepContext, inp: B) -> A:
    return A(x=int(inp.y))


async def a_to_a(ctx: saga.StepContext, inp: A) -> A:
    return inp


async def undo(ctx: saga.StepContext, inp: A, out: B, key: str) -> None:
    return None


def refused(app: saga.App, sentence: str) -> None:
    """Building ``app`` raises AppError with exactly ``sentence``."""
    with pytest.raises(saga.AppError) as info:
        app.build()
    assert str(info.value) == sentence


def test_steps_become_a_pipeline_with_types_from_annotations() -> None:
    """Order from after=, input/output types from annotations, settings from the decorator."""
    pipeline = apps.orders.build()
    assert isinstance(pipeline, Pipeline) and pipeline.name == "orders"
    assert pipeline.names == ("router", "charge", "ship")
    router, charge, ship = pipeline.steps
    assert (router.input_type, router.output_type) == (apps.Order, apps.Routed)
    assert (ship.input_type, ship.output_type) == (apps.Parcel, apps.Shipment)
    assert (router.retry.max_attempts, router.retry.base_s) == (3, 0.05)  # retries=2
    assert charge.compensate is apps.refund_charge and router.compensate is None
    assert router.fn is apps.route_order  # the decorator returns the function unchanged


def test_environment_overrides_the_decorator() -> None:
    """SAGA_<STEP>_* win over the decorator's values, as for the document pipeline."""
    env = {"SAGA_DATA_DIR": "/t", "SAGA_ROUTER_MAX_ATTEMPTS": "9", "SAGA_CHARGE_TIMEOUT": "7"}
    pipeline = apps.orders.pipeline(load_settings(env))
    assert pipeline.get("router").retry.max_attempts == 9
    assert pipeline.get("charge").timeout_s == 7
    assert pipeline.get("ship").timeout_s == 300.0  # StepSpec's default


def test_a_type_mismatch_is_refused() -> None:
    """A step whose input cannot be decoded from the previous output fails the build."""
    app = saga.App("mismatch")
    first = app.step()(a_to_b)
    app.step(after=first)(a_to_a)
    refused(
        app,
        "step 'a_to_a' cannot take the output of 'a_to_b' (B into A): "
        "A requires field 'x', which B does not have",
    )


def test_a_field_of_another_type_is_refused() -> None:
    """Same field name, incompatible type: the field is named in the sentence."""

    app = saga.App("fieldtype")
    app.step(name="first")(b_to_a)
    app.step(name="second", after="first")(a_to_b_text)
    refused(
        app,
        "step 'second' cannot take the output of 'first' (A into Text): "
        "field 'x': the output has int where the input wants str",
    )


class Text(msgspec.Struct):
    x: str


async def a_to_b_text(ctx: saga.StepContext, inp: Text) -> B:
    return B(y=inp.x)


@pytest.mark.parametrize(
    ("edges", "sentence"),
    [
        (
            {"one": None, "two": None},
            "steps 'one' and 'two' both have no after=, but a saga type has one first step "
            "(give the other an after=)",
        ),
        (
            {"one": None, "two": "three", "three": "two"},
            "steps 'two', 'three' run after each other in a cycle; a saga type's steps run "
            "from one first step without coming back",
        ),
        (
            {"one": None, "two": "nope"},
            "step 'two' runs after 'nope', which is not a step of app 'chain' "
            "(its steps: one, two)",
        ),
        ({"one": "one"}, "step 'one' runs after itself; name another step in after="),
        ({"one": None, "two": ["one", "one"]}, "step 'two' names one step twice in after="),
        ({"one": None, "two": []}, "step 'two': after=[] names no step; leave after= out"),
        (
            {"one": None, "two": "one", "three": "one", "four": ["two", "three"]},
            "step 'four' runs after two, three: its input A needs a field per parent "
            "(two: A, three: A); it has no field 'two'",
        ),
    ],
    ids=["two-roots", "cycle", "unknown-after", "itself", "twice", "empty", "join-shape"],
)
def test_steps_that_do_not_form_one_graph_are_refused(edges: dict[str, Any], sentence: str) -> None:
    """Two first steps, cycles, an unknown after=, a join whose input has no field per
    parent: each fails with its sentence."""
    app = saga.App("chain")
    for name, after in edges.items():
        app.step(name=name, after=after)(a_to_a)
    refused(app, sentence)


def test_after_a_function_of_another_app_is_refused() -> None:
    """after= naming a function this app did not declare is refused, even if a step of this
    app has the same name."""
    app = saga.App("borrow")
    app.step(name="router")(a_to_a)
    app.step(after=apps.route_order)(a_to_b)
    refused(
        app,
        "step 'a_to_b' runs after route_order(), which is not a step of app 'borrow' "
        "(decorate it with this app's @app.step, or name a step of this app)",
    )


def test_an_app_without_steps_or_with_two_steps_of_one_name_is_refused() -> None:
    """No steps, or one name twice, fail the build."""
    refused(saga.App("empty"), "app 'empty' has no steps; declare one with @app.step()")
    app = saga.App("twice")
    app.step(name="same")(a_to_a)
    app.step(name="same", after="same")(a_to_a)
    refused(app, "app 'twice' has two steps named 'same'")


async def untyped(ctx, inp):  # type: ignore[no-untyped-def]
    return inp


async def takes_dict(ctx: saga.StepContext, inp: dict[str, int]) -> A:
    return A(x=0)


def test_steps_need_struct_annotations() -> None:
    """Input and output types come from annotations, and must be msgspec Structs."""
    app = saga.App("untyped")
    app.step()(untyped)
    refused(
        app,
        "step 'untyped': its input type is no annotation; write `async def untyped(ctx, inp: "
        "In) -> Out` with msgspec Structs In and Out",
    )
    app = saga.App("dicts")
    app.step()(takes_dict)
    with pytest.raises(saga.AppError, match=re.escape("its input type is dict[str, int]")):
        app.build()


def test_declaration_mistakes_fail_at_once() -> None:
    """A sync function, a bad name, a bad number or a bad compensation fail at @app.step."""
    app = saga.App("early")

    def sync(ctx: object, inp: A) -> A:
        return inp

    cases = [
        (lambda: app.step()(sync), "step 'sync' must be an async function"),
        (lambda: app.step(name="Bad Name")(a_to_a), "must be a lowercase identifier"),
        (lambda: app.step(timeout=0)(a_to_a), "timeout= must be more than 0 seconds, not 0"),
        (lambda: app.step(concurrency=0)(a_to_a), "concurrency= must be at least 1"),
        (lambda: app.step(version=0)(a_to_a), "version= must be a whole number from 1, not 0"),
        (lambda: app.step(version=True)(a_to_a), "version= must be a whole number from 1"),
        (lambda: app.step(retries=-1)(a_to_a), "retries= must be 0 or more, not -1"),
        (lambda: app.step(compensate=sync)(a_to_a), "compensate= must be an async function"),  # type: ignore[arg-type]
        (lambda: app.step(compensate=a_to_a)(a_to_a), "must take four arguments"),  # type: ignore[arg-type]
    ]
    for declare, words in cases:
        with pytest.raises(saga.AppError, match=re.escape(words)):
            declare()
    with pytest.raises(saga.AppError, match="saga type name 'Orders!' must be a lowercase"):
        saga.App("Orders!")


def test_a_compensation_must_accept_the_steps_input_and_output() -> None:
    """An annotated compensation whose output parameter cannot take the step's output fails."""
    app = saga.App("undo")
    app.step(compensate=undo)(a_to_b)  # undo(ctx, A, B, key): fits
    app.build()
    app = saga.App("undo_wrong")
    app.step(compensate=undo)(b_to_a)  # the step takes B and makes A
    with pytest.raises(saga.AppError, match=re.escape("compensate= takes A as the step's input")):
        app.build()


async def many_a(ctx: saga.StepContext, inp: A) -> list[A]:
    return [inp]


def test_a_maps_compensation_takes_one_item_and_its_output() -> None:
    """@app.map(compensate=) undoes one item: it takes the item (A) and the item's output
    (B), not the lists; the map's spec keeps the item's output type for it."""
    app = saga.App("mapundo")
    app.step(name="many")(many_a)
    app.map(over="many", compensate=undo)(a_to_b)  # undo(ctx, A, B, key): an item's
    [_, spec] = app.build().steps
    assert spec.compensate is undo and spec.map is not None and spec.map.item_output is B
    app = saga.App("mapundo_wrong")
    app.step(name="many")(many_a)
    app.map(over="many", compensate=undo)(a_to_a)  # makes A: undo's B cannot take it
    with pytest.raises(saga.AppError, match="compensate="):
        app.build()


def test_public_names_load_lazily() -> None:
    """`import saga` loads no App, client or Redis code until a public name is used."""
    import subprocess
    import sys

    probe = ("saga.api.app", "saga.api.client", "redis")
    code = f"import sys, saga; print(sorted(m for m in {probe!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reads_names_a_step_before_it_and_map_concurrency_is_a_setting() -> None:
    """``reads=`` of a step that is not before it is refused in one sentence; the chunked
    document pipeline reads router and plan; SAGA_PARSE_CHUNK_MAP_CONCURRENCY sets how many
    items of one saga its map opens (capped at 100), SAGA_PARSE_CHUNK_CONCURRENCY stays
    the worker's."""
    from saga.documents.chunked import app as chunked

    bad = saga.App("badreads")
    bad.step(name="first")(a_to_b)
    bad.step(name="second", after="first", reads=("third",))(b_to_a)
    bad.step(name="third", after="second")(a_to_b)
    with pytest.raises(
        saga.AppError, match=r"^step 'second' reads 'third', which is no step before it$"
    ):
        bad.build()
    built = {s.name: s for s in chunked.build().steps}
    assert built["merge"].reads == ("router", "plan") and built["parse_chunk"].loads_pages
    env = {"SAGA_DATA_DIR": "/t", "SAGA_PARSE_CHUNK_MAP_CONCURRENCY": "7",
           "SAGA_PARSE_CHUNK_CONCURRENCY": "3"}  # fmt: skip
    spec = {s.name: s for s in chunked.pipeline(load_settings(env)).steps}["parse_chunk"]
    assert spec.map is not None and (spec.map.concurrency, spec.concurrency) == (7, 3)
    env["SAGA_PARSE_CHUNK_MAP_CONCURRENCY"] = "500"
    spec = {s.name: s for s in chunked.pipeline(load_settings(env)).steps}["parse_chunk"]
    assert spec.map is not None and spec.map.concurrency == 100
    assert load_settings(env).for_step("parse_chunk_map").concurrency is None
