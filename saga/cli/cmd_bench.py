"""saga bench [--scenario default|flood] [--sagas N] [--workers W] [--concurrency C] [--rate R]
[--tracing on|off] [--only saga|seed|batched|minimal] [--json]"""

from __future__ import annotations

import argparse
import shlex
import sys

from saga.cli.common import CliError, Exit

SCENARIOS = ("default", "flood", "coldstart")
"""Workloads of ``saga bench --scenario``."""


def _positive(kind: type) -> object:
    def parse(value: str) -> object:
        try:
            v = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{value!r} must be > 0")
        return v

    return parse


def _ratio(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be > 0 and <= 1")
    return v


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bench",
        help="throughput, latency and Redis cost per transition vs the seed and a floor",
        description=(
            "Run N three-step no-op sagas through W `saga worker` processes, then the same "
            "work through the seed's protocol as written (7 round trips per step), the "
            "seed's protocol batched x10 and pipelined (3 round trips per batch) and a "
            "minimal floor (one script per transition), on the same server with the same "
            "processes and concurrency; print saga's figures and its ratios to each. Each "
            "system runs a "
            "backlog phase (all sagas submitted, then the workers let go at once: "
            "throughput, Redis commands and round trips, memory, worker CPU) and a paced "
            "phase (sagas submitted at --rate: end-to-end and hand-off latency). Uses "
            "REDIS_URL or the embedded server, its own key prefix, and deletes its keys."
        ),
    )
    p.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="default",
        help="the workload: default, N three-step no-op sagas (default); flood, one user "
        "submits --sagas, then another --small: the small user's p50/p99 time to completion "
        "and the throughput without and with a per-user cap (--user-cap), and the flood "
        "alone both ways (docs/budgets.md); coldstart, a freshly started `saga worker`'s "
        "time to ready and to its first commit, with and without a model step (--runs)",
    )
    p.add_argument(
        "--sagas", type=_positive(int), default=1000, metavar="N", help="sagas (default 1000)"
    )
    p.add_argument(
        "--workers", type=_positive(int), default=1, metavar="W", help="worker processes (1)"
    )
    p.add_argument(
        "--concurrency",
        type=_positive(int),
        default=64,
        metavar="C",
        help="steps in flight per worker per step (default 64)",
    )
    p.add_argument(
        "--rate",
        type=float,
        metavar="R",
        help="sagas/s of the paced phase (default: half of each system's backlog rate; 0: skip it)",
    )
    p.add_argument(
        "--rate-seconds",
        type=_positive(float),
        default=10.0,
        metavar="S",
        help="the paced phase submits R x S sagas, at most N (default 10)",
    )
    p.add_argument("--tracing", choices=("on", "off"), default="off", help="OTel tracing (off)")
    p.add_argument(
        "--trace-ratio",
        type=_ratio,
        default=1.0,
        metavar="R",
        help="with --tracing on: share of sagas traced, 0 < R <= 1 (default 1: all)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="SAGA_LOG_LEVEL of the saga workers (default info)",
    )
    p.add_argument(
        "--page-bytes",
        type=int,
        default=0,
        metavar="B",
        help="page text the saga router stores per saga; the parser loads and deletes "
        "it, as in the document pipeline (default 0: no pages)",
    )
    p.add_argument(
        "--only",
        action="append",
        choices=("saga", "seed", "batched", "minimal"),
        help="run only this system (repeatable; default all four)",
    )
    p.add_argument(
        "--cli-runs",
        type=int,
        default=10,
        metavar="K",
        help="runs of each CLI cold-start command (median; 0: skip; default 10)",
    )
    p.add_argument("--no-recovery", action="store_true", help="skip the recovery measurement")
    p.add_argument(
        "--no-retention-check",
        action="store_true",
        help="skip the two short waves that check memory is bounded after retention",
    )
    p.add_argument(
        "--private-server",
        action="store_true",
        help="start a private embedded server for this run instead of REDIS_URL/the shared one",
    )
    p.add_argument("--keep-logs", action="store_true", help="keep worker logs (path on stderr)")
    p.add_argument(
        "--features",
        type=int,
        nargs="?",
        const=20_000,
        metavar="CALLS",
        help="only measure what each feature of a transition costs (logging, metrics, "
        "msgspec, tasks, tracing, packing; history, index, counter on a private server), "
        "CALLS times each (default 20000), and print that table",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="only measure how throughput grows with primaries: the backlog on 1 server "
        "with 1 and 16 partitions and on clusters of 1 and 3 primaries (16 partitions), "
        "each started for the run; --sagas, --workers, --concurrency apply",
    )
    p.add_argument("--small", type=_positive(int), default=10, metavar="N",
                   help="flood: sagas of the small user (10)")  # fmt: skip
    p.add_argument("--user-cap", type=_positive(int), default=8, metavar="K",
                   help="flood: SAGA_USER_MAX_INFLIGHT of the fair runs (8)")  # fmt: skip
    p.add_argument("--step-ms", type=_positive(int), default=20, metavar="MS",
                   help="flood: the router step's time (20 ms)")  # fmt: skip
    p.add_argument("--runs", type=_positive(int), default=3, metavar="N",
                   help="coldstart: interleaved runs of each kind (3)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import anyio

    from saga.bench.config import SYSTEMS, BenchConfig, BenchError
    from saga.bench.driver import run_bench
    from saga.cli.common import print_json
    from saga.config.settings import load_settings

    if args.features is not None:
        return _features(args)
    if args.scenario == "flood":
        return _flood(args)
    if args.scenario == "coldstart":
        return _coldstart(args)
    if args.cluster:
        return _cluster(args)
    if args.rate is not None and args.rate < 0:
        raise CliError("--rate must be >= 0 (0 skips the paced phase).", Exit.USAGE)
    _check_pages(args.page_bytes, args.sagas)
    only = tuple(s for s in SYSTEMS if s in (args.only or SYSTEMS))
    cfg = BenchConfig(
        scenario=args.scenario,
        sagas=args.sagas,
        workers=args.workers,
        concurrency=args.concurrency,
        rate=args.rate,
        rate_seconds=args.rate_seconds,
        tracing=args.tracing == "on",
        trace_ratio=args.trace_ratio,
        log_level=args.log_level,
        page_bytes=args.page_bytes,
        only=only,
        cli_runs=max(0, args.cli_runs),
        recovery=not args.no_recovery,
        retention_check=not args.no_retention_check,
        private_server=args.private_server,
        keep_logs=args.keep_logs,
    )
    settings = load_settings()
    command = canonical(args, only)

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    try:
        report = anyio.run(run_bench, cfg, settings, command, progress)
    except BenchError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(report)
    else:
        from saga.bench.render import render

        print(render(report))
    return Exit.OK


def _check_pages(page_bytes: int, sagas: int) -> None:
    from saga.bench.config import MAX_PAGES_IN_FLIGHT

    if page_bytes < 0:
        raise CliError(f"--page-bytes must be >= 0, not {page_bytes}.", Exit.USAGE)
    # Every router may commit before any parser runs: all pages are in Redis at once.
    if page_bytes * sagas > MAX_PAGES_IN_FLIGHT:
        raise CliError(
            f"--page-bytes {page_bytes} x --sagas {sagas} could hold "
            f"{page_bytes * sagas / 2**20:,.0f} MiB of pages in Redis at once; "
            f"keep the product under {MAX_PAGES_IN_FLIGHT // 2**20:,} MiB.",
            Exit.USAGE,
        )


def _flood(args: argparse.Namespace) -> int:
    import anyio

    from saga.bench.flood import FloodConfig, render, run_flood
    from saga.cli.common import print_json
    from saga.config.settings import load_settings
    from saga.wiring.runtime import redis_url

    cfg = FloodConfig(flood=args.sagas, small=args.small, workers=args.workers,
                      concurrency=args.concurrency, cap=args.user_cap,
                      step_ms=args.step_ms)  # fmt: skip
    command = shlex.join(["saga", "bench", "--scenario", "flood", "--sagas", str(args.sagas),
                          "--small", str(args.small), "--workers", str(args.workers),
                          "--concurrency", str(args.concurrency), "--user-cap", str(args.user_cap),
                          "--step-ms", str(args.step_ms)])  # fmt: skip

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    report = anyio.run(run_flood, cfg, redis_url(load_settings()), command, progress)
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return Exit.OK


def _coldstart(args: argparse.Namespace) -> int:
    import anyio

    from saga.bench.coldstart import render, run_coldstart
    from saga.cli.common import print_json
    from saga.config.settings import load_settings
    from saga.wiring.runtime import redis_url

    command = shlex.join(["saga", "bench", "--scenario", "coldstart", "--runs", str(args.runs)])

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    report = anyio.run(run_coldstart, redis_url(load_settings()), args.runs, command, progress)
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return Exit.OK


def _features(args: argparse.Namespace) -> int:
    import anyio

    from saga.bench import features
    from saga.cli.common import print_json

    if args.features < 1:
        raise CliError("--features needs a positive number of calls.", Exit.USAGE)
    rows = anyio.run(features.measure, args.features)
    if args.json:
        print_json({"calls": args.features, "features": [
            {"side": side, "feature": name, "us_per_call": round(us, 3),
             "unit": features.unit(name)} for side, name, us in rows
        ]})  # fmt: skip
    else:
        print(features.render(rows))
    return Exit.OK


def canonical(args: argparse.Namespace, only: tuple[str, ...]) -> str:
    """The command line of this run with every option spelled out (for the report)."""
    argv = ["saga", "bench"]
    if getattr(args, "scenario", "default") != "default":
        argv += ["--scenario", args.scenario]
    argv += ["--sagas", str(args.sagas), "--workers", str(args.workers)]
    argv += ["--concurrency", str(args.concurrency)]
    if args.rate is not None:
        argv += ["--rate", f"{args.rate:g}"]
    argv += ["--rate-seconds", f"{args.rate_seconds:g}", "--tracing", args.tracing]
    if args.trace_ratio != 1.0:
        argv += ["--trace-ratio", f"{args.trace_ratio:g}"]
    argv += ["--log-level", args.log_level]
    if args.page_bytes:
        argv += ["--page-bytes", str(args.page_bytes)]
    from saga.bench.config import SYSTEMS

    if len(only) < len(SYSTEMS):
        for name in only:
            argv += ["--only", name]
    if args.cli_runs != 10:
        argv += ["--cli-runs", str(args.cli_runs)]
    for flag in ("no_recovery", "no_retention_check", "private_server", "keep_logs", "json"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    return shlex.join(argv)


def _cluster(args: argparse.Namespace) -> int:
    import anyio

    from saga.bench.cluster_bench import LAYOUTS, render_cluster, run_cluster_bench
    from saga.bench.config import BenchError
    from saga.cli.common import print_json

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    try:
        report = anyio.run(run_cluster_bench, args.sagas, args.workers, args.concurrency,
                           progress, iter(LAYOUTS))  # fmt: skip
    except BenchError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(report)
    else:
        print(render_cluster(report))
    return Exit.OK
