"""The order of a saga type's steps from their ``after=``: one linear chain, or one
sentence saying why not. Branches (two steps after one) are not supported yet."""

from __future__ import annotations

from collections.abc import Mapping

from saga.pipeline import AppError

_LINEAR = "a saga type is one linear chain of steps (branches are not supported yet)"


def chain_order(app: str, after: Mapping[str, str | None]) -> list[str]:
    """Step names from the first (no ``after``) to the last; ``after`` maps each step to
    the step it runs after. Raises AppError for no steps, an ``after`` that is not a
    step, two first steps, two steps after one, or a cycle."""
    if not after:
        raise AppError(f"app {app!r} has no steps; declare one with @app.step()")
    for step, before in after.items():
        if before is not None and before not in after:
            raise AppError(
                f"step {step!r} runs after {before!r}, which is not a step of app {app!r} "
                f"(its steps: {', '.join(after)})"
            )
    roots = [s for s, before in after.items() if before is None]
    if len(roots) > 1:
        raise AppError(
            f"steps {roots[0]!r} and {roots[1]!r} both have no after=, but {_LINEAR} "
            "with one first step"
        )
    children: dict[str, str] = {}
    for step, before in after.items():
        if before is not None:
            if before in children:
                raise AppError(
                    f"steps {children[before]!r} and {step!r} both run after {before!r}, "
                    f"but {_LINEAR}"
                )
            children[before] = step
    order = roots[:1]
    while order and order[-1] in children:
        order.append(children[order[-1]])
    if len(order) < len(after):
        cycle = [s for s in after if s not in order]
        raise AppError(
            f"steps {', '.join(repr(s) for s in cycle)} run after each other in a cycle, "
            f"but {_LINEAR} from one first step"
        )
    return order
