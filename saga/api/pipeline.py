"""A pipeline is data: a saga type's name and its ordered tuple of step specs.

``saga.App`` builds one from decorated functions (``saga/api/app.py``); the executor,
the client and the CLI read only this. The document pipeline is router → parser
→ grouper. Other packages add steps to it through the ``saga.steps`` entry-point
group: each entry point names a ``StepRegistration`` (or a callable returning
one) saying which step it goes after. Adding an ``enricher`` takes a function, a
registration and a deployment — no change to the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from saga.api.retry import RetryPolicy
from saga.state.ids import validate_step, validate_work
from saga.state.keys import DEFAULT_TYPE, validate_type
from saga.state.types import TypeInfo

if TYPE_CHECKING:
    from saga.config.settings import Settings

ENTRY_POINT_GROUP = "saga.steps"
MAX_STEP_VERSION = 1_000_000
StepFn = Callable[[Any, Any], Awaitable[Any]]
CompensateFn = Callable[[Any, Any, Any, str], Awaitable[None]]
"""``async def undo(ctx, input, output, idempotency_key) -> None``: see ``check_compensate``."""


class AppError(ValueError):
    """A saga type's definition cannot run; the message says why, in one sentence."""


def lanes_of(order: Sequence[str], parents: Mapping[str, Sequence[str]]) -> frozenset[str]:
    """The steps that can run at the same time as another one: neither an ancestor nor a
    descendant of some other step. ``order`` is topological."""
    ancestors: dict[str, set[str]] = {}
    for step in order:
        found: set[str] = set()
        for p in parents.get(step, ()):
            found |= {p, *ancestors[p]}
        ancestors[step] = found
    lanes = set()
    for step in order:
        for other in order:
            if other != step and other not in ancestors[step] and step not in ancestors[other]:
                lanes.add(step)
                break
    return frozenset(lanes)


@dataclass(frozen=True, slots=True)
class WaitSpec:
    """A wait step (``@app.wait``, ``app.sleep``): no user code runs there; its worker
    parks the saga until a signal or its timer (``saga.state.signals``)."""

    event: str
    """The event it waits for; "" for a sleep (only the timer ends it)."""
    timeout_s: float | None = None
    """Seconds from the park to the timer; None: no timer (a wait for ever)."""
    on_timeout: str = "fail"
    """``fail`` | ``compensate`` | ``default`` (a wait) | ``continue`` (a sleep)."""
    default: bytes = b""
    """The wait's output (JSON) when its timer takes ``default``."""
    until_field: str = ""
    """A sleep until the time (epoch seconds) in this field of its input, not timeout_s."""
    at: Callable[[Any], Any] | None = None
    """``app.sleep_until``: a function of the sleep's input (decoded) giving the time to
    wake (an aware datetime or epoch seconds); used instead of timeout_s and until_field."""
    gate: bool = False
    """``app.review_gate``: a saga no step flagged for review passes at once (its input
    passed through); a flagged one waits until a person accepts or completes its review."""


@dataclass(frozen=True, slots=True)
class MapSpec:
    """A map step (``@app.map``, ``saga.api.app_maps``): one child attempt per item of the
    list its parent ``over`` returned; the fan-in gathers their outputs in item order."""

    over: str
    concurrency: int = 10
    """Items in flight at once per saga (the rest are released as items end), 1..100."""
    on_failure: str = "fail"
    """``fail`` (an item failed for good fails the saga) | ``partial`` (the fan-in marks
    it: ``saga.MapResults``)."""
    item_output: Any = None
    """What one item returns (the function's own output type; set when the app is built):
    a compensation of the map undoes each committed item with its input and this output."""


@dataclass(frozen=True, slots=True)
class StepSpec:
    """Everything the executor needs to run one step."""

    name: str
    fn: StepFn
    input_type: type
    output_type: type
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 300.0
    """An attempt running longer is cancelled (a retryable StepTimeoutError)."""
    lease_s: float = 60.0
    """A claim not renewed for this long may be taken over by another worker."""
    concurrency: int = 8
    loads_pages: bool = False
    """The claim returns the record's pages blob (one round trip, no extra read)."""
    deletes_pages: bool = False
    """The commit deletes the pages blob (it is no longer needed)."""
    compensate: CompensateFn | None = None
    """Undoes the step's committed effect (``check_compensate`` says the shape); None
    for a step with nothing to undo. Its workers run it as ``undo:<step>`` (saga.api.undo)."""
    reads: tuple[str, ...] = ()
    """Earlier steps whose outputs the claim also returns (``ctx.output_of(step)``): a
    step after a map that needs what the map's items did not carry."""
    previous_output: bool = False
    """The claim also returns the output this step committed before, in an earlier epoch
    (``ctx.previous_output``): a step whose effect must be replaced on a re-run."""
    calls_models: bool = True
    """The step may call a model (``ctx.llm``, ``ctx.embedder``): a worker running it
    imports litellm before it reports ready, when a model is configured (saga.worker.warmup)."""
    warm: tuple[str, ...] = ()
    """Modules the step imports on its first attempt (heavy ones: ``"numpy"``): a worker
    running it imports them before it reports ready, so no saga waits on an import."""
    wait: WaitSpec | None = None
    """Set for a wait step: ``fn`` never runs, the claim parks the saga."""
    version: int = 1
    """The version of the step's code (``@app.step(version=2)``): written in the history
    row of each commit and in the saga (``sv:<step>``) when it is not 1, read back by
    the next step as ``ctx.input_version`` (docs/sagas.md, step versions)."""
    map: MapSpec | None = None
    """Set for a map step: ``fn`` runs once per item (its input), ``output_type`` is the
    fan-in's (``list[Out]``, or ``saga.MapResults[Out]`` with on_failure="partial")."""
    joins: tuple[str, ...] = ()
    """A join (``after=[a, b]``): its parents. Its input is a Struct whose fields are
    named after them, each the parent's output (``join_input``)."""

    def __post_init__(self) -> None:
        validate_work(self.name)  # undo:<step> is the pseudo-step of a compensation
        if self.lease_s <= 0 or self.timeout_s <= 0 or self.concurrency < 1:
            raise ValueError(f"step {self.name!r}: lease, timeout and concurrency must be > 0")
        if not 1 <= self.version <= MAX_STEP_VERSION:
            raise ValueError(f"step {self.name!r}: version must be 1 to {MAX_STEP_VERSION}")
        if self.compensate is not None:
            check_compensate(self.name, self.compensate)


def check_compensate(step: str, fn: object) -> None:
    """A compensation is ``async def undo(ctx, input, output, idempotency_key) -> None``:
    the step's context, the input and the committed output of the step it undoes, and
    the idempotency key that step ran with (its side effects are keyed on it)."""
    import inspect

    if not inspect.iscoroutinefunction(fn):
        raise AppError(
            f"step {step!r}: compensate= must be an async function "
            "`async def undo(ctx, input, output, idempotency_key) -> None`"
        )
    try:
        inspect.signature(fn).bind(None, None, None, "")
    except TypeError:
        raise AppError(
            f"step {step!r}: compensate={getattr(fn, '__name__', fn)!r} must take four "
            "arguments `(ctx, input, output, idempotency_key)`"
        ) from None


@runtime_checkable
class PipelineSource(Protocol):
    """What builds a checked Pipeline from settings: ``saga.App``. The wiring loads an
    app by ``module:attr`` through this, so it never imports ``saga.api.app`` (which would
    close a circle: the App's client is built by the wiring)."""

    def pipeline(self, settings: Settings | None = None) -> Pipeline: ...


@dataclass(frozen=True, slots=True)
class StepRegistration:
    """What an entry point contributes: a step and the step it runs after."""

    spec: StepSpec
    after: str


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The steps of one saga type, in order; ``name`` namespaces its keys."""

    steps: tuple[StepSpec, ...]
    name: str = DEFAULT_TYPE
    """The saga type (``saga.App``'s name); the document pipeline's is ``documents``."""
    schedules: tuple[Any, ...] = ()
    """``@app.schedule``s (``saga.api.schedules.ScheduleSpec``), registered by the controller."""
    graph: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Each step's parents when the steps are not one chain (branches, joins); () for a
    chain, whose ``steps`` order says it all. ``steps`` is then a topological order."""
    lanes: frozenset[str] = field(default=frozenset(), init=False)
    """The steps that can run at the same time as another (``lanes_of``)."""

    def __post_init__(self) -> None:
        validate_type(self.name)
        names = [s.name for s in self.steps]
        if not names:
            raise ValueError("a pipeline needs at least one step")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate step names in {names}")
        for name in names:
            validate_step(name)  # no undo:<step> among the steps
        if self.graph:
            object.__setattr__(self, "lanes", lanes_of(names, dict(self.graph)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    @property
    def first(self) -> StepSpec:
        return self.steps[0]

    def get(self, name: str) -> StepSpec:
        for spec in self.steps:
            if spec.name == name:
                return spec
        raise KeyError(f"unknown step {name!r}; the pipeline has {', '.join(self.names)}")

    def parents_of(self, name: str) -> tuple[str, ...]:
        """The steps ``name`` runs after (() for the first)."""
        if self.graph:
            return dict(self.graph)[self.get(name).name]
        i = self.names.index(self.get(name).name)
        return (self.steps[i - 1].name,) if i > 0 else ()

    def children_of(self, name: str) -> tuple[str, ...]:
        """The steps that run after ``name``, in the steps' order."""
        return tuple(s for s in self.names if name in self.parents_of(s))

    def next_of(self, name: str) -> str:
        """What the commit of ``name`` enqueues: the step after it ("" for the last) in a
        chain; in a graph, when it forks, joins or is a lane, a route for the commit
        script (``includes/lanes.lua``): ``&`` (a step of the saga's own fields) or ``|``
        (a lane), then one item per child, ``+name`` (a lane) or ``=name`` (a step of the
        saga's own fields), with ``=p1,p2`` after it naming the child's other parents
        when it has several (it is enqueued once they all committed in the epoch)."""
        if not self.graph:
            i = self.names.index(self.get(name).name)
            return self.steps[i + 1].name if i + 1 < len(self.steps) else ""
        kids = self.children_of(name)
        lane = name in self.lanes
        if not lane and not kids:
            return ""
        one = len(kids) == 1 and kids[0] not in self.lanes
        if not lane and one and len(self.parents_of(kids[0])) == 1:
            return kids[0]
        items = []
        for kid in kids:
            others = [p for p in self.parents_of(kid) if p != name]
            kind = "+" if kid in self.lanes else "="
            items.append(f"{kind}{kid}" + (f"={','.join(others)}" if others else ""))
        return ("|" if lane else "&") + " ".join(items)

    def prev_of(self, name: str) -> str:
        """The step whose output is ``name``'s input ("_input" for the first; a join's
        first parent: its input is made of all its parents', ``join_input``)."""
        parents = self.parents_of(name)
        return parents[0] if parents else "_input"

    def claim_guess(self, name: str) -> str:
        """What a claim of ``name`` is told of its input (claim_steps ARGV[9]): the step
        before it, with ``|`` in front for a lane (its own lease and token)."""
        return ("|" if name in self.lanes else "") + self.prev_of(name)

    def undoable(self) -> tuple[str, ...]:
        """The steps that have a compensation, latest first (the order they are undone)."""
        return tuple(s.name for s in reversed(self.steps) if s.compensate is not None)

    def insert_after(self, after: str, spec: StepSpec) -> Pipeline:
        if self.graph:
            raise ValueError(f"saga type {self.name!r} has branches: add steps with saga.App")
        i = self.names.index(self.get(after).name)
        return replace(self, steps=(*self.steps[: i + 1], spec, *self.steps[i + 1 :]))

    @property
    def versioned(self) -> bool:
        """Whether a step declares a version (then each claim reads the version that
        produced its input: one saga field more, only for such pipelines)."""
        return any(s.version != 1 for s in self.steps)

    def info(self) -> TypeInfo:
        """What the registry of types keeps of this pipeline (``saga.state.types``)."""
        pages = tuple(s.name for s in self.steps if s.loads_pages)
        return TypeInfo(
            name=self.name,
            steps=self.names,
            loads_pages=pages,
            undoable=self.undoable(),
            parents=self.graph,
            lanes=tuple(s for s in self.names if s in self.lanes),
            events=tuple(
                dict.fromkeys(s.wait.event for s in self.steps if s.wait and s.wait.event)
            ),
        )

    def with_overrides(self, overrides: Callable[[StepSpec], StepSpec]) -> Pipeline:
        return replace(self, steps=tuple(overrides(s) for s in self.steps))


def apply_overrides(pipeline: Pipeline, settings: Settings) -> Pipeline:
    """``SAGA_<STEP>_*`` (concurrency, attempts, lease expiries, timeout, lease, backoff,
    a map's items at once) over the specs' own values (a step name's overrides apply to
    it in every saga type)."""

    def override(spec: StepSpec) -> StepSpec:
        o = settings.for_step(spec.name)
        retry = spec.retry
        if o.max_attempts:
            retry = replace(retry, max_attempts=o.max_attempts)
        if o.max_lease_expiries:
            retry = replace(retry, max_lease_expiries=o.max_lease_expiries)
        if o.backoff_s:
            retry = replace(retry, base_s=o.backoff_s)
        if spec.map is not None and o.map_concurrency:
            spec = replace(spec, map=replace(spec.map, concurrency=min(o.map_concurrency, 100)))
        return replace(
            spec,
            retry=retry,
            concurrency=o.concurrency or spec.concurrency,
            timeout_s=o.timeout_s or spec.timeout_s,
            lease_s=o.lease_s or spec.lease_s,
        )

    return pipeline.with_overrides(override)


def with_registrations(pipeline: Pipeline, regs: Iterable[StepRegistration]) -> Pipeline:
    for reg in regs:
        pipeline = pipeline.insert_after(reg.after, reg.spec)
    return pipeline


def discovered_registrations() -> list[StepRegistration]:
    """Step registrations from installed packages (entry-point group ``saga.steps``)."""
    regs = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        obj = ep.load()
        reg = obj() if callable(obj) and not isinstance(obj, StepRegistration) else obj
        if not isinstance(reg, StepRegistration):
            raise TypeError(f"entry point {ep.name!r} did not give a StepRegistration")
        regs.append(reg)
    return regs


def join_input(parents: tuple[str, ...], outputs: Mapping[str, bytes]) -> bytes:
    """The input of a join: a JSON object whose fields are its parents' names, each the
    parent's committed output (``outputs``: ``out:<parent>`` -> JSON)."""
    parts = [b'"' + p.encode() + b'":' + (outputs.get(f"out:{p}") or b"null") for p in parents]
    return b"{" + b",".join(parts) + b"}"
