"""saga demo: the pipeline end to end on the shipped sample PDFs, offline."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="run the pipeline on the shipped sample PDFs (offline, under a minute)",
        description="Start (or reuse) the embedded server, run workers for every step "
        "in-process, submit the sample lab reports (one deliberately broken), and print "
        "each saga's timeline and what was extracted and grouped. The demo uses its own "
        "key prefix (SAGA_KEY_PREFIX plus -demo), so a worker already running never takes "
        "its work.",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the sagas")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.documents.demo import run_demo
    from saga.wiring.logs import configure_logging

    settings = load_settings()
    configure_logging(settings.log_format, "error")

    async def go() -> int:
        unexpected = await run_demo(settings, timeout_s=args.timeout)
        return Exit.OK if unexpected == 0 else Exit.FAILED

    code = run(go)
    if not settings.redis_url:  # started (or reused) here, and left for the next commands
        from saga.wiring.runtime import embedded_server

        print(
            f"saga demo: the embedded server keeps running at {embedded_server(settings).url} "
            "for the commands after this one; `saga server stop` stops it."
        )
    return code
