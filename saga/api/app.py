"""``saga.App``: define a saga type with decorated async functions.

::

    app = saga.App("orders")

    @app.step()
    async def reserve(ctx: saga.StepContext, order: Order) -> Reservation: ...

    @app.step(after=reserve, retries=5, timeout=600, compensate=release)
    async def charge(ctx: saga.StepContext, r: Reservation) -> Receipt: ...

Input and output types are read from the annotations (msgspec Structs). When the
app is built (``app.pipeline()``, ``app.client()``, ``saga worker module:app``) the
steps must form a graph from one first step through ``after=`` (``saga.api.app_graph``:
two steps after one run in parallel, ``after=[a, b]`` joins them), and each step's
input type must accept its parent's output (``saga.api.app_types``; a join's input is a
Struct with a field per parent). Every mistake fails there with one sentence (``AppError``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from saga.api.app_declared import After, Declared, check, spec_of
from saga.api.app_graph import check_edges, graph_order
from saga.api.app_maps import declare_map, settle_maps
from saga.api.app_types import accepts, describe
from saga.api.app_waits import (
    gate_spec,
    parked,
    settle_waits,
    sleep_at_spec,
    sleep_spec,
    wait_spec,
)
from saga.api.pipeline import (
    AppError,
    CompensateFn,
    Pipeline,
    StepSpec,
    WaitSpec,
)
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_step
from saga.state.keys import validate_type

if TYPE_CHECKING:
    from saga.api.client import SagaClient
    from saga.config.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class App:
    """A saga type: its name (which namespaces its keys in Redis) and its steps."""

    def __init__(self, name: str) -> None:
        try:
            self._name = validate_type(name)
        except InvalidIdError as exc:
            raise AppError(str(exc)) from None
        self._declared: list[Declared] = []
        self._schedules: list[Any] = []

    @property
    def name(self) -> str:
        """The saga type, as ``saga start --type`` and ``saga list --type`` name it."""
        return self._name

    def __repr__(self) -> str:
        return f"App({self._name!r}, steps={[d.name for d in self._declared]})"

    def step(
        self,
        *,
        name: str | None = None,
        after: After = None,
        retries: int | None = None,
        timeout: float | None = None,
        lease: float | None = None,
        concurrency: int | None = None,
        backoff: float | None = None,
        compensate: CompensateFn | None = None,
        loads_pages: bool = False,
        deletes_pages: bool = False,
        calls_models: bool = True,
        warm: tuple[str, ...] = (),
        version: int = 1,
        reads: tuple[str, ...] = (),
    ) -> Callable[[F], F]:
        """Declare ``async def fn(ctx, inp: In) -> Out`` a step; returns ``fn`` unchanged.

        - ``name``: the step's name (default: the function's), a lowercase identifier.
        - ``after``: the step (function or name) whose output this one takes; the one
          step without ``after`` is the first. Two steps after one run in parallel;
          ``after=[a, b]`` runs when both committed and takes a Struct with fields
          ``a`` and ``b`` (their outputs).
        - ``retries``: retries after the first attempt before the saga is
          dead-lettered (``SAGA_<STEP>_MAX_ATTEMPTS`` counts attempts: retries + 1).
        - ``timeout``, ``lease``: seconds; ``concurrency``: attempts at once per
          worker; ``backoff``: base of the retry delay, seconds.
        - ``compensate``: ``async def undo(ctx, input, output, idempotency_key)``,
          which undoes the step's committed effect.
        - ``loads_pages`` / ``deletes_pages``: the claim loads the record's pages
          blob into ``ctx.pages`` / the commit deletes it (the document pipeline's).
        - ``calls_models``: False for a step that never calls a model, so its workers
          do not import litellm before they report ready (True: they do, when a model
          is configured). ``warm``: modules to import before ready (``("numpy",)``).
        - ``version``: the version of the step's code (default 1). Raise it when the
          step's behaviour or output changes with sagas in flight: each commit records
          it, ``saga show`` and ``saga list --step-version`` show it, and the next step
          reads it as ``ctx.input_version`` to branch on the shape it was given.
        - ``reads``: names of earlier steps whose outputs the claim also returns, as
          ``ctx.output_of(name)`` (JSON): a step after a map reads what its items did
          not carry.

        Unset settings take the defaults of ``StepSpec``; ``SAGA_<STEP>_*``
        environment variables override them all, as for the document pipeline.
        """

        def register(fn: F) -> F:
            step = Declared(
                name=name or str(getattr(fn, "__name__", "")),
                fn=fn,
                after=after,
                retries=retries,
                timeout=timeout,
                lease=lease,
                concurrency=concurrency,
                backoff=backoff,
                compensate=compensate,
                loads_pages=loads_pages,
                deletes_pages=deletes_pages,
                calls_models=calls_models,
                warm=tuple(warm),
                version=version,
                reads=tuple(reads),
            )
            check(step)
            self._declared.append(step)
            return fn

        return register

    map = declare_map  # @app.map(over=step, concurrency=, on_failure=): saga.api.app_maps

    def wait(
        self,
        *,
        event: str,
        after: After = None,
        name: str | None = None,
        timeout: float | None = None,
        on_timeout: str = "fail",
        default: object = None,
    ) -> Callable[[type[T]], type[T]]:
        """Declare, on the signal's data type (a msgspec Struct), a wait step: the saga
        parks there until ``saga signal <record> <event>`` / ``client.signal`` delivers
        the event; its data is the output the next step (``after=`` the class) takes.
        A signal that arrives earlier is kept until the saga gets here; the same signal
        id twice is a no-op.

        - ``name``: the step's name (default: the event's).
        - ``timeout``: seconds from the park; then ``on_timeout`` decides: ``fail``
          (dead-lettered at the wait), ``compensate`` (the committed steps are undone),
          or ``default`` (go on with ``default=``, the data type's fields as a dict).
        """

        def register(cls: type[T]) -> type[T]:
            step = name or event
            owner = f"wait {step!r}"
            spec = wait_spec(
                owner, event=event, data=cls, timeout=timeout, on_timeout=on_timeout,
                default=default,
            )  # fmt: skip
            self._add_wait(step, cls, after, spec)
            return cls

        return register

    def sleep(
        self,
        name: str,
        *,
        after: After = None,
        seconds: float | None = None,
        until: str = "",
    ) -> str:
        """Declare a durable timer step named ``name``: the saga parks there (no worker
        held, the timer in Redis) for ``seconds``, or until the time (epoch seconds) in
        the field ``until`` of its input; then the next step takes the same input.
        Returns ``name``, for the next step's ``after=``."""
        spec = sleep_spec(f"sleep {name!r}", seconds=seconds, until_field=until)
        return self._add_wait(name, parked, after, spec)

    def sleep_until(self, name: str, *, after: After = None, at: Callable[[Any], Any]) -> str:
        """As ``sleep``, waking at ``at(input)`` (aware datetime or epoch s); returns name."""
        return self._add_wait(name, parked, after, sleep_at_spec(f"sleep {name!r}", at))

    def review_gate(
        self,
        name: str,
        *,
        after: After = None,
        timeout: float | None = None,
        on_timeout: str = "fail",
    ) -> str:
        """Declare a review gate named ``name``: a saga no step flagged for review passes
        it at once; a flagged one parks there (no worker held) until a person accepts its
        review (``saga review accept``, the console) or completes it value by value, and
        then the next step takes the gate's input. ``timeout`` (seconds from the park)
        with ``on_timeout``: ``fail``, ``compensate``, or ``continue`` (on, unreviewed:
        the flag stays). Returns ``name``, for the next step's ``after=``."""
        spec = gate_spec(f"review gate {name!r}", timeout=timeout, on_timeout=on_timeout)
        return self._add_wait(name, parked, after, spec)

    def _add_wait(self, step: str, fn: Any, after: After, spec: WaitSpec) -> str:
        try:
            validate_step(step)
        except InvalidIdError as exc:
            raise AppError(f"{exc}; name the wait with name=...") from None
        d = Declared(
            name=step, fn=fn, after=after, retries=None, timeout=None, lease=None,
            concurrency=None, backoff=None, compensate=None, loads_pages=False,
            deletes_pages=False, calls_models=False, wait=spec,
        )  # fmt: skip
        self._declared.append(d)
        return step

    def schedule(
        self, *, cron: str, name: str | None = None, user: str = "scheduler"
    ) -> Callable[[F], F]:
        """Start a saga of this type on ``cron`` (five fields, UTC): decorate a function
        of no arguments that returns the first step's input (a Struct, or None for the
        type's default); it is called once, when the app is built. The saga of each tick
        has the record id ``<name>.<tick as 20260103T020000>Z`` (``name``: the function's,
        with ``_`` as ``-``) and the user ``user``. The controller of this app
        (``SAGA_PIPELINE=module:app saga controller``) registers the schedules and fires
        them, with or without workers running; ``saga schedule`` lists and pauses them.
        """
        from saga.api.schedules import check_cron
        from saga.state.ids import validate_id
        from saga.state.schedules import validate_name

        try:
            cron = check_cron(cron)
            validate_id(user, "schedule user")
        except (ValueError, InvalidIdError) as exc:
            raise AppError(str(exc)) from None

        def register(fn: F) -> F:
            label = name or fn.__name__.replace("_", "-")
            try:
                validate_name(label)
            except InvalidIdError as exc:
                raise AppError(f"{exc}; name it with @app.schedule(name=...)") from None
            if any(s[0] == label for s in self._schedules):
                raise AppError(f"app {self._name!r} has two schedules named {label!r}")
            self._schedules.append((label, cron, user, fn))
            return fn

        return register

    def pipeline(self, settings: Settings | None = None) -> Pipeline:
        """The checked chain of steps with ``SAGA_<STEP>_*`` applied (read from the
        environment when no settings are given). Raises AppError when it cannot run."""
        from saga.api.pipeline import apply_overrides

        if settings is None:
            from saga.config.settings import load_settings

            settings = load_settings()
        return apply_overrides(self.build(), settings)

    def build(self) -> Pipeline:
        """The checked chain of steps with the settings written in the decorators."""
        by_name = {d.name: d for d in self._declared}
        twice = [n for n, c in Counter(d.name for d in self._declared).items() if c > 1]
        if twice:
            raise AppError(f"app {self._name!r} has two steps named {twice[0]!r}")
        edges = {d.name: self._after_names(d) for d in self._declared}
        order = graph_order(self._name, edges)
        for d in self._declared:  # reads=: outputs of steps before it
            for r in (r for r in d.reads if order.index(d.name) <= [*order, r].index(r)):
                raise AppError(f"step {d.name!r} reads {r!r}, which is no step before it")
        chain = all(len(ps) <= 1 for ps in edges.values()) and len(
            [p for ps in edges.values() for p in ps]
        ) == len({p for ps in edges.values() for p in ps})
        specs = settle_maps([spec_of(by_name[n], edges) for n in order], edges)
        if chain:
            specs = settle_waits(specs)
            for before, step in itertools.pairwise(specs):
                if step.map is None and (why := accepts(step.input_type, before.output_type)):
                    raise AppError(
                        f"step {step.name!r} cannot take the output of {before.name!r} "
                        f"({describe(before.output_type)} into {describe(step.input_type)}): "
                        f"{why}"
                    )
            return Pipeline(tuple(specs), name=self._name, schedules=self._schedule_specs(specs[0]))
        graph = tuple((n, edges[n]) for n in order)
        specs = check_edges(specs, dict(graph))
        pipe = Pipeline(tuple(specs), name=self._name, graph=graph)
        return replace(pipe, schedules=self._schedule_specs(specs[0]))

    def _schedule_specs(self, first: StepSpec) -> tuple[Any, ...]:
        """Each ``@app.schedule`` with its input made and checked against the first step."""
        from saga.api.schedules import ScheduleSpec, input_json

        out = []
        for label, cron, user, fn in self._schedules:
            value = fn()
            if value is not None and not isinstance(value, first.input_type):
                raise AppError(
                    f"schedule {label!r} returns {type(value).__name__}, not the input of "
                    f"step {first.name!r} ({first.input_type.__name__}) or None"
                )
            out.append(ScheduleSpec(name=label, cron=cron, user_id=user, input=input_json(value)))
        return tuple(out)

    def client(self, settings: Settings | None = None) -> SagaClient:
        """A client that starts and reads sagas of this type::

        async with app.client() as sagas:
            await sagas.start("order-1", "user-7", input=Order(...))
        """
        from saga.api.client import SagaClient
        from saga.config.settings import load_settings

        settings = settings or load_settings()
        return SagaClient.from_settings(settings, self.pipeline(settings))

    def _after_names(self, d: Declared) -> tuple[str, ...]:
        if d.after is None:
            return ()
        if isinstance(d.after, list | tuple):
            if not d.after:
                raise AppError(f"step {d.name!r}: after=[] names no step; leave after= out")
            return tuple(self._after_name(d, a) for a in d.after)
        return (self._after_name(d, d.after),)

    def _after_name(self, d: Declared, after: str | Callable[..., Any]) -> str:
        if isinstance(after, str):
            return after
        for other in self._declared:
            if other.fn is after:
                return other.name
        label = getattr(after, "__name__", repr(after))
        raise AppError(
            f"step {d.name!r} runs after {label}(), which is not a step of app {self._name!r} "
            "(decorate it with this app's @app.step, or name a step of this app)"
        )
