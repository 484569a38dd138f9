"""saga top [--once] [--json] [--interval S]: queues, throughput, workers and breakers."""

from __future__ import annotations

import argparse
import time
from typing import Any

from saga.cli.common import CliError, Exit, colour, fmt_ms, print_json, run, table, tty
from saga.cli.saga_types import add_type_option, typed_keys

BREAKER_COLOURS = {"closed": "32", "open": "31", "half_open": "33"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "top",
        help="live view per step: ready, pending, retrying, dead letters, throughput, workers",
        description=(
            "Per registered step, summed over partitions: ready (entries no worker has taken "
            "yet: the consumer group's lag; ? when the server cannot tell), pending "
            "(delivered, not acknowledged), retries waiting, "
            "dead letters, throughput (commits per second over the last interval) and live "
            "workers (each renews a presence every 5 s; one unseen for 15 s, killed or hung, "
            "is not counted); then each circuit breaker, and the live workers with their "
            "saga type, steps and health address. A step with a compensation has a second "
            "row, undo:<step>: the queues of its undo (run by the step's workers). Every "
            "registered saga type is shown (a "
            "type column once there are several) unless --type names one. Refreshes until "
            "Ctrl-C. Throughput is a rate, so --once samples twice, --interval apart "
            "(--interval 0: one sample, throughput null)."
        ),
    )
    p.add_argument("--once", action="store_true", help="print one view and exit")
    add_type_option(p, default="every registered type")
    p.add_argument(
        "--json",
        action="store_true",
        help="JSON: one document with --once, else one line per refresh",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between refreshes, and --once's sampling window (default 1)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    if args.interval < 0 or args.interval > 3600 or (args.interval == 0 and not args.once):
        raise CliError(
            "--interval must be between 0 and 3600 seconds (0 only with --once).", Exit.USAGE
        )
    settings = load_settings()

    async def go() -> int:
        from saga.state.types import type_names
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            if args.saga_type is None:  # every type, from the registry of types
                keys = [keys.of_type(t) for t in await type_names(client, keys)] or [keys]
            if args.once:
                await _once(client, keys, args)
            else:
                await _live(client, keys, args)
        return Exit.OK

    try:
        return run(go)
    except KeyboardInterrupt:
        return Exit.OK


class Sample:
    """One reading: queue numbers per step, breakers, live workers, when (monotonic s).
    ``types`` holds the saga type of each of ``steps`` (the default type's if None)."""

    def __init__(
        self,
        steps: list[Any],
        breakers: dict[str, Any],
        at: float,
        workers: list[Any],
        types: list[str] | None = None,
    ) -> None:
        from saga.state.keys import DEFAULT_TYPE

        self.steps, self.breakers, self.at, self.workers = steps, breakers, at, workers
        self.types = types or [DEFAULT_TYPE] * len(steps)
        self.default = DEFAULT_TYPE
        self.timers = 0
        self.next_timer_ms = 0
        """The earliest of those timers' due time (epoch ms; 0: none)."""
        """Sagas parked at a wait or sleep with a timer (the partitions' waits)."""

    def labels(self) -> list[str]:
        """``step`` for the default type, ``type/step`` for others (names may repeat)."""
        return [s.step if t == self.default else f"{t}/{s.step}" for t, s in self.rows()]

    def rows(self) -> list[tuple[str, Any]]:
        return list(zip(self.types, self.steps, strict=True))


async def sample(client: Any, keys: Any) -> Sample:
    """The steps' queue numbers of one or more saga types (``keys``: one Keys or a list)
    and the breakers, read concurrently."""
    import anyio

    from saga.adapters.breaker import NAMES, read_all
    from saga.state.presence import live_workers
    from saga.state.queries import queue_stats, registered_steps

    keyses = keys if isinstance(keys, list) else [keys]
    found: dict[str, Any] = {"steps": [], "types": []}

    async def queues() -> None:
        shown = {k.saga_type for k in keyses}  # with --type T, only T's workers
        alive = await live_workers(client, keyses[0])
        found["workers"] = [w for w in alive if w.saga_type in shown]
        for k in keyses:
            steps = shown_steps(await registered_steps(client, k, undo=True))
            stats = await queue_stats(client, k, steps, workers=found["workers"])
            found["steps"] += stats
            found["types"] += [k.saga_type] * len(stats)
            pipe = client.pipeline(transaction=False)
            for p in k.all_partitions():
                pipe.zcard(k.waits(p))
                pipe.zrange(k.waits(p), 0, 0, withscores=True)  # its earliest timer
            replies = await pipe.execute()
            found["timers"] = found.get("timers", 0) + sum(replies[0::2])
            firsts = [int(rows[0][1]) for rows in replies[1::2] if rows]
            if firsts:
                earlier = [found["next_timer_ms"]] if found.get("next_timer_ms") else []
                found["next_timer_ms"] = min([*firsts, *earlier])

    async def breakers() -> None:
        found["breakers"] = await read_all(client, keyses[0], list(NAMES))

    async with anyio.create_task_group() as tg:
        tg.start_soon(queues)
        tg.start_soon(breakers)
    got = Sample(
        found["steps"], found["breakers"], time.monotonic(), found["workers"], found["types"]
    )
    got.timers = found.get("timers", 0)
    got.next_timer_ms = found.get("next_timer_ms", 0)
    return got


def shown_steps(registered: list[str]) -> list[str]:
    """The rows of a type: its steps, each followed by its undo step (``undo:<step>``,
    registered by workers of a step with a compensation: none without compensations)."""
    from saga.state.model import is_undo, undone_step

    return sorted(registered, key=lambda s: (undone_step(s), is_undo(s)))


def rates(prev: Sample | None, cur: Sample) -> dict[str, float | None]:
    """Commits per second per step between two samples (None without a previous one),
    by ``Sample.labels``."""
    if prev is None or cur.at <= prev.at:
        return dict.fromkeys(cur.labels())
    before = {label: s.committed for label, s in zip(prev.labels(), prev.steps, strict=True)}
    dt = cur.at - prev.at
    return {
        label: max(0, s.committed - before.get(label, s.committed)) / dt
        for label, s in zip(cur.labels(), cur.steps, strict=True)
    }


def document(cur: Sample, prev: Sample | None) -> Any:
    import msgspec

    from saga.cli.shapes import TopDocument, TopStep

    r = rates(prev, cur)
    steps = [
        TopStep(
            type=t, **msgspec.structs.asdict(s), throughput=_round(r[label]), undoes=_undoes(s.step)
        )
        for label, (t, s) in zip(cur.labels(), cur.rows(), strict=True)
    ]
    window = round(cur.at - prev.at, 3) if prev else None
    return TopDocument(
        at_ms=int(time.time() * 1000),
        window_s=window,
        steps=steps,
        breakers=cur.breakers,
        workers=cur.workers,
        timers=cur.timers,
        next_timer_ms=cur.next_timer_ms,
    )


def _undoes(step: str) -> str:
    from saga.state.model import is_undo, undone_step

    return undone_step(step) if is_undo(step) else ""


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def render(cur: Sample, prev: Sample | None) -> str:
    r = rates(prev, cur)
    typed = any(t != cur.default for t in cur.types)  # a type column once types are in use
    if not cur.steps:
        body = "no steps registered yet: start a worker (`saga worker`) or a saga first"
    else:
        rows = [
            [
                *([t] if typed else []),
                s.step,
                "?" if s.lag is None else str(s.lag),
                str(s.pending),
                str(s.delayed),
                str(s.parked),
                str(s.deferred),
                colour(str(s.dead), "31") if s.dead else "0",
                "-" if r[label] is None else f"{r[label]:.1f}",
                str(s.workers),
            ]
            for label, (t, s) in zip(cur.labels(), cur.rows(), strict=True)
        ]
        # ready: entries no worker has taken yet (the group's lag), not the stream's
        # length, which keeps delivered and done entries until they are trimmed.
        headers = ["step", "ready", "pending", "retrying", "parked", "deferred", "dead", "done/s",
                   "workers"]  # fmt: skip
        headers = ["type", *headers] if typed else headers
        body = table(headers, rows)
    if cur.timers:
        body += f"\n\ntimers    {cur.timers} saga(s) parked at a wait or sleep with a due time"
        body += f", the next at {fmt_ms(cur.next_timer_ms)}"
    body += "\n\nbreakers  " + "  ".join(_breaker(n, b) for n, b in cur.breakers.items())
    return body + _workers(cur.workers, typed=typed)


def _workers(workers: list[Any], most: int = 10, *, typed: bool = False) -> str:
    """The live workers, one line each (the first ``most``): where to find their health;
    with several types, each worker's steps are prefixed with its type."""
    if not workers:
        return ""
    lines = [
        f"  {w.worker}  {f'{w.saga_type}/' if typed else ''}{','.join(w.steps)}"
        f"  health {w.health or '-'}"
        for w in workers[:most]
    ]
    if len(workers) > most:
        lines.append(f"  … and {len(workers) - most} more (--json lists them all)")
    return "\n\nworkers\n" + "\n".join(lines)


def _breaker(name: str, b: Any) -> str:
    state = b.state.value
    text = f"{name} {colour(state, BREAKER_COLOURS.get(state, '0'))}"
    if b.retry_at and state != "closed":
        text += f" (retry in {max(0.0, b.retry_at - time.time()):.0f}s)"
    if b.failures:
        text += f" {b.failures} failure(s)"
    return text


async def _once(client: Any, keys: Any, args: argparse.Namespace) -> None:
    import anyio

    prev = None
    if args.interval > 0:
        prev = await sample(client, keys)
        await anyio.sleep(args.interval)
    cur = await sample(client, keys)
    if args.json:
        print_json(document(cur, prev))
    else:
        print(render(cur, prev))


async def _live(client: Any, keys: Any, args: argparse.Namespace) -> None:
    import sys

    import anyio
    import msgspec

    redraw = tty() and not args.json
    prev: Sample | None = None
    while True:
        cur = await sample(client, keys)
        if args.json:
            sys.stdout.write(msgspec.json.encode(document(cur, prev)).decode() + "\n")
        elif redraw:
            stamp = time.strftime("%H:%M:%S")
            head = f"saga top  {stamp}  every {args.interval:g}s  Ctrl-C to quit\n\n"
            sys.stdout.write("\033[H\033[2J" + head + render(cur, prev) + "\n")
        else:
            sys.stdout.write(render(cur, prev) + "\n\n")
        sys.stdout.flush()
        prev = cur
        await anyio.sleep(args.interval)
