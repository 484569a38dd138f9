"""saga up: the cluster's topology on one machine — one worker process per step."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "up",
        help="run one worker process per step against one Redis (Ctrl-C stops all)",
        description="Start N worker processes per step, as Kubernetes would, with their "
        "logs interleaved and prefixed; Ctrl-C (or SIGTERM) drains and stops them all.",
    )
    p.add_argument("--workers-per-step", type=int, default=1)
    p.add_argument("--steps", help="comma-separated steps (default: the whole pipeline)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.runtime import document_pipeline, redis_url
    from saga.settings import load_settings
    from saga.up import run_up

    settings = load_settings()
    steps = args.steps.split(",") if args.steps else list(document_pipeline(settings).names)
    url = redis_url(settings)  # start the embedded server once, before the workers
    return Exit.OK if run_up(steps, args.workers_per_step, url) == 0 else Exit.FAILED
