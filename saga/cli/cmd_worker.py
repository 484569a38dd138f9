"""saga worker [module:app] <step>... [--concurrency N]"""

from __future__ import annotations

import argparse
import os
import sys

from saga.cli.common import CliError, Exit, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "worker",
        help="run a step executor (one or several steps of one saga type in one process)",
        description="Run executors for the given steps until SIGTERM/SIGINT, then drain "
        "in-flight steps within SAGA_DRAIN_SECONDS. Name an app (module:attribute, a "
        "saga.App) to serve its steps (all of them when none is named); without one, the "
        "document pipeline (or SAGA_PIPELINE's), steps from the arguments or $SAGA_STEP.",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="[module:app] step",
        help="an app such as myapp:app, then steps to serve, e.g. router parser grouper",
    )
    p.add_argument("--concurrency", type=int, help="attempts per step at once (overrides)")
    p.add_argument(
        "--health-port",
        type=int,
        help="health/metrics port (0: any free port, -1: none); overrides SAGA_HEALTH_PORT",
    )
    p.add_argument(
        "--processes",
        type=int,
        metavar="N",
        help="event loops to fork, sharing nothing but Redis (one per core; health ports "
        "port, port+1, ...); overrides SAGA_WORKER_PROCESSES (default 1)",
    )
    p.set_defaults(func=main)


def split_targets(targets: list[str]) -> tuple[str, list[str]]:
    """(the app reference or "", the steps): an app reference has a colon, a step never."""
    apps = [t for t in targets if ":" in t]
    if len(apps) > 1:
        raise CliError(
            "a worker serves one saga type; run one worker per app (`saga up` starts them all)",
            Exit.USAGE,
        )
    return (apps[0] if apps else ""), [t for t in targets if ":" not in t]


def steps_of(steps: list[str], app: str, names: tuple[str, ...]) -> list[str]:
    steps = steps or [s for s in os.environ.get("SAGA_STEP", "").split(",") if s]
    if not steps and app:
        return list(names)
    if not steps:
        raise CliError(
            "name the steps to serve, e.g. `saga worker parser`, or set SAGA_STEP", Exit.USAGE
        )
    return steps


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.wiring.logs import configure_logging
    from saga.worker.gc_tuning import settle
    from saga.worker.health import HealthPortError
    from saga.worker.service import serve

    settings = load_settings()
    app, named = split_targets(args.targets)
    configure_logging(settings.log_format, settings.log_level)
    from saga.wiring.runtime import document_pipeline, load_pipeline

    pipeline = load_pipeline(app, settings) if app else document_pipeline(settings)
    steps = steps_of(named, app, pipeline.names)
    unknown = [s for s in steps if s not in pipeline.names]
    if unknown:
        raise CliError(
            f"unknown step(s) {', '.join(unknown)}; the pipeline has {', '.join(pipeline.names)}",
            Exit.USAGE,
        )

    processes = settings.worker_processes if args.processes is None else args.processes
    if processes < 1:
        raise CliError(f"--processes must be at least 1, not {processes}", Exit.USAGE)

    def one(index: int) -> int:
        async def go() -> int:
            await serve(
                settings,
                steps,
                pipeline=pipeline,
                concurrency=args.concurrency,
                health_port=args.health_port,
                health_index=index,
                # Once everything is imported and wired, before the first claim.
                on_ready=lambda: settle(settings.gc_threshold),
            )
            return Exit.OK

        try:
            return run(go)
        except HealthPortError as exc:
            raise CliError(str(exc), Exit.USAGE) from None

    if processes == 1:
        return one(0)
    from saga.worker.processes import run_processes

    def child(index: int) -> int:
        # A forked child has no CLI around it: the same one sentence and exit code.
        from saga.cli.main import classify, leaf

        try:
            return one(index)
        except KeyboardInterrupt:
            return Exit.INTERRUPTED
        except Exception as exc:
            code, message = classify(leaf(exc))
            print(f"saga: {message}", file=sys.stderr)
            return code

    return run_processes(processes, child)
