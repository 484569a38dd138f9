"""The shape of a saga type's steps from their ``after=``: a graph with one first step
and no cycle (a chain, or branches that run in parallel and join), or one sentence
saying why not.

``after=a`` runs a step when ``a`` committed; ``after=[a, b]`` when both did (a join).
Two steps after one run in parallel (branches). A step that can run at the same time
as another is a *lane*: it holds its own lease and fencing token in the saga hash
(``state/lua/includes/lanes.lua``); the others run on the saga's own fields, exactly
as a chain's steps do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from saga.api.pipeline import AppError, StepSpec, lanes_of


def graph_order(app: str, after: Mapping[str, Sequence[str]]) -> list[str]:
    """Step names in a topological order (declaration order breaks ties); ``after`` maps
    each step to the steps it runs after (empty for the first). Raises AppError for no
    steps, an ``after`` that is not a step, a step after itself, two first steps, or a
    cycle."""
    if not after:
        raise AppError(f"app {app!r} has no steps; declare one with @app.step()")
    for step, parents in after.items():
        for before in parents:
            if before not in after:
                raise AppError(
                    f"step {step!r} runs after {before!r}, which is not a step of app "
                    f"{app!r} (its steps: {', '.join(after)})"
                )
        if step in parents:
            raise AppError(f"step {step!r} runs after itself; name another step in after=")
        if len(set(parents)) != len(parents):
            raise AppError(f"step {step!r} names one step twice in after=")
    roots = [s for s, parents in after.items() if not parents]
    if len(roots) != 1:
        if not roots:
            raise AppError(
                f"every step of app {app!r} runs after another, in a cycle; give the first "
                "step no after="
            )
        raise AppError(
            f"steps {roots[0]!r} and {roots[1]!r} both have no after=, but a saga type has "
            "one first step (give the other an after=)"
        )
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(after):
        ready = [s for s, ps in after.items() if s not in placed and all(p in placed for p in ps)]
        if not ready:
            cycle = [s for s in after if s not in placed]
            raise AppError(
                f"steps {', '.join(repr(s) for s in cycle)} run after each other in a cycle; "
                "a saga type's steps run from one first step without coming back"
            )
        order.append(ready[0])
        placed.add(ready[0])
    return order


def check_edges(specs: list[StepSpec], parents: Mapping[str, tuple[str, ...]]) -> list[StepSpec]:
    """The specs of a graph with each join's ``joins`` and each sleep's output type set;
    AppError when a step cannot take its parents' outputs, or a wait stands where it
    cannot (in a branch, as a join, or before branches: it ends on one next step)."""
    import msgspec

    from saga.api.app_types import accepts, describe

    by_name = {s.name: s for s in specs}
    order = [s.name for s in specs]
    lanes = lanes_of(order, parents)
    out: list[StepSpec] = []
    for declared in specs:
        spec, ps = declared, parents[declared.name]
        if spec.wait is not None:
            kids = [s for s in order if spec.name in parents[s]]
            if spec.name in lanes or len(ps) > 1 or len(kids) != 1 or kids[0] in lanes:
                raise AppError(
                    f"wait {spec.name!r} must run after one step and before one step, outside "
                    "branches (put a step between it and a fork or join)"
                )
            if spec.wait.on_timeout == "continue":
                if not ps:
                    raise AppError(f"sleep {spec.name!r} cannot be the first step")
                spec = replace(spec, output_type=by_name[ps[0]].output_type)
                by_name[spec.name] = spec
        if len(ps) == 1 and spec.map is None:  # a map takes items (saga.api.app_maps)
            before = by_name[ps[0]]
            if (why := accepts(spec.input_type, before.output_type)) is not None:
                raise AppError(
                    f"step {spec.name!r} cannot take the output of {before.name!r} "
                    f"({describe(before.output_type)} into {describe(spec.input_type)}): {why}"
                )
        elif len(ps) > 1:
            if spec.compensate is not None:
                raise AppError(
                    f"step {spec.name!r} joins {', '.join(ps)}: a join cannot have "
                    "compensate= (give it to the branches' steps)"
                )
            fields = {f.name: f.type for f in msgspec.structs.fields(spec.input_type)}
            shape = ", ".join(f"{p}: {describe(by_name[p].output_type)}" for p in ps)
            for p in ps:
                if p not in fields:
                    raise AppError(
                        f"step {spec.name!r} runs after {', '.join(ps)}: its input "
                        f"{describe(spec.input_type)} needs a field per parent ({shape}); "
                        f"it has no field {p!r}"
                    )
                if (why := accepts(fields[p], by_name[p].output_type)) is not None:
                    raise AppError(
                        f"step {spec.name!r} cannot take the output of {p!r} in its field "
                        f"{p!r} ({describe(by_name[p].output_type)} into "
                        f"{describe(fields[p])}): {why}"
                    )
            spec = replace(spec, joins=ps)
        out.append(spec)
    return out
