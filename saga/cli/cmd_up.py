"""saga up [module:app ...]: the cluster's topology on one machine — one worker process
per step of each saga type."""

from __future__ import annotations

import argparse

from saga.cli.common import CliError, Exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "up",
        help="run one worker process per step against one Redis (Ctrl-C stops all)",
        description="Start N worker processes per step, as Kubernetes would, with their "
        "logs interleaved and prefixed; Ctrl-C (or SIGTERM) drains and stops them all. "
        "Name apps (module:attribute) to run their steps; without one, the document "
        "pipeline (or SAGA_PIPELINE's).",
    )
    p.add_argument(
        "apps", nargs="*", metavar="module:app", help="saga.App(s) to run, e.g. myapp:app"
    )
    p.add_argument("--workers-per-step", type=int, default=1)
    p.add_argument("--steps", help="comma-separated steps (default: the whole pipeline)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.runtime import document_pipeline, load_pipeline, redis_url
    from saga.settings import load_settings
    from saga.up import Unit, run_up

    settings = load_settings()
    if args.workers_per_step < 1:
        raise CliError("--workers-per-step must be at least 1.", Exit.USAGE)
    only = args.steps.split(",") if args.steps else None
    units: list[Unit] = []
    for ref in args.apps or [""]:
        pipeline = load_pipeline(ref, settings) if ref else document_pipeline(settings)
        steps = only or list(pipeline.names)
        unknown = [s for s in steps if s not in pipeline.names]
        if ref and unknown:
            raise CliError(
                f"{ref} has no step {unknown[0]!r}; its steps: {', '.join(pipeline.names)}",
                Exit.USAGE,
            )
        label = f"{pipeline.name}/" if len(args.apps) > 1 else ""
        units += [Unit(f"{label}{s}", ref, s) for s in steps]
    url = redis_url(settings)  # start the embedded server once, before the workers
    return Exit.OK if run_up(units, args.workers_per_step, url) == 0 else Exit.FAILED
