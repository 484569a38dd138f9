"""saga show <record_id> [--output] [--json] [--follow]: a saga, the timeline of its
attempts and, with --output, what each step produced."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import Exit, fmt_ms, fmt_resume, print_json, run, state_text, table, tty
from saga.cli.saga_types import add_type_option, typed_keys

POLL_S = 0.5


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "show",
        help="a saga and its timeline: one row per attempt, drawn as bars",
        description=(
            "Show a saga: who it belongs to, where it is, what it cost, and one row per "
            "attempt (step, attempt, epoch, worker, start, duration, outcome, error, cost) "
            "with a bar on a time axis shared by all rows, so a slow or retried step "
            "stands out. Other events (started, promoted, retried, cancelled) are markers."
        ),
        epilog="Exit codes: 0 shown (with --follow: the saga ended), 2 invalid id, "
        "3 Redis unreachable, 4 no such saga, 130 Ctrl-C.",
    )
    p.add_argument("record_id", help="the record whose saga to show")
    add_type_option(p)
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON document {"saga", "attempts", "events"}; with --follow, '
        "one JSON line per event",
    )
    p.add_argument(
        "-o",
        "--output",
        action="store_true",
        help="also print what each step produced (the parser's results with their pages, "
        "rejected values and coverage; the grouper's groups); with --json, as 'outputs'",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep updating until the saga completes, fails or is cancelled "
        "(redraws on a terminal, prints one line per new event otherwise)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.ids import validate_id

    validate_id(args.record_id, "record id")
    settings = load_settings()

    async def go() -> int:
        from saga.state.reads import get_saga_and_history
        from saga.state.types import type_info
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            info = await type_info(client, keys, keys.saga_type)
            if args.follow:
                return await follow(client, keys, args.record_id, as_json=args.json, info=info)
            saga, events = await get_saga_and_history(client, keys, args.record_id)
        if args.json:
            print_json(document(saga, events, _now_ms(), outputs=args.output))
        else:
            print(render(saga, events, _now_ms(), info))
            if args.output:
                from saga.cli.outputs import render_outputs

                print("\n" + render_outputs(saga.outputs, saga.undone_outputs))
        return Exit.OK

    try:
        return run(go)
    except KeyboardInterrupt:  # --follow ends by Ctrl-C: the shell's convention, not success
        return Exit.INTERRUPTED


def document(saga: Any, events: list[Any], now_ms: int, *, outputs: bool = False) -> Any:
    """``--json``: the saga, its attempts and its raw events (``shapes_saga.ShowDocument``);
    with ``outputs``, what each step produced too (``shapes_saga.ShowOutputDocument``)."""
    from saga.cli.attempts import Attempt, pair
    from saga.cli.shapes_saga import ShowDocument, ShowOutputDocument
    from saga.cli.timeline import saga_view

    rows = pair(events, now_ms, saga)
    attempts = [r for r in rows if isinstance(r, Attempt)]
    view = saga_view(saga)
    if not outputs:
        return ShowDocument(saga=view, attempts=attempts, events=events)
    from saga.cli.outputs import decoded

    return ShowOutputDocument(
        saga=view,
        attempts=attempts,
        events=events,
        outputs=decoded(saga.outputs),
        undone_outputs=decoded(saga.undone_outputs),
    )


def render(saga: Any, events: list[Any], now_ms: int, info: Any = None) -> str:
    """The header block and the timeline table, for people: fitted to the terminal's
    width, where the header's error wraps (never cut); whole rows when piped."""
    from saga.cli.tables import terminal_width, wrap
    from saga.cli.timeline import error_text, layout, money

    columns = terminal_width()
    head: list[tuple[str, str]] = [
        ("record", saga.record_id),
        ("user", saga.user_id),
        ("state", state_text(saga.state.value, saga.needs_review, saga.parked_reason)),
        ("step", saga.step),
        ("epoch", str(saga.epoch)),
        ("created", fmt_ms(saga.created_ms)),
        ("updated", fmt_ms(saga.updated_ms)),
        ("cost", money(saga.total_cost) if saga.total_cost else "$0"),
        ("error", error_text(saga.error_class, saga.error_message, None)),
    ]
    if saga.error_detail:  # opened with the data key: the CLI is an operator's tool
        head.append(("detail", saga.error_detail))
    for step, reason in saga.review.items():
        head.append(("review", f"{step}: {reason}"))
    if saga.state.value == "running" and saga.worker:  # (a map's items: their own leases)
        head.append(("lease", f"{saga.worker} until {fmt_ms(saga.lease_until_ms)}"))
    elif saga.state.value == "waiting_retry" and saga.parked_reason:
        head.append(("parked", "no attempt spent"))
        head.append(("resumes", fmt_resume(saga.due_ms)))
    elif saga.state.value == "waiting_retry":
        head.append(("retry at", fmt_ms(saga.due_ms)))
    elif saga.state.value == "waiting":
        awaits = f"signal {saga.wait_event!r}" if saga.wait_event else "timer"
        if saga.wait_review:
            awaits = f"waiting for review at the gate {saga.step} (saga review accept)"
        head.append(("awaits", awaits))
        head.append(("timer", fmt_ms(saga.due_ms) if saga.due_ms else "none"))
    from saga.cli.branch_labels import step_labels

    labels = step_labels(info.parents, info.lanes, fancy=tty()) if info is not None else {}
    if saga.lanes:  # branches in flight, each with its own state
        head.append(("lanes", ", ".join(f"{x.step} {x.state}" for x in saga.lanes)))
    for mapped in saga.maps:  # a map's items (saga.api.app_maps)
        head += map_lines(mapped)
    lines = [line for k, v in head for line in wrap(k, v or "-", columns)]
    headers, rows = layout(saga, events, now_ms, fancy=tty(), columns=columns, labels=labels)
    return "\n".join(lines) + "\n\n" + table(headers, rows, width=columns, shrink={})


MAP_ROWS = 20
"""Items listed per map in the human view (``--json`` has them all)."""


def map_lines(run: Any) -> list[tuple[str, str]]:
    """A map's counts and its first items, as head lines of ``saga show``."""
    counts = (f"{run.step}: {run.items} items, {run.done} done, {run.running} running, "
              f"{run.waiting} waiting, {run.failed} failed, {run.pending} pending")  # fmt: skip
    rows = [f"#{r.item} {r.state}" + (f" ({r.worker})" if r.worker else "")
            + (f" a{r.attempts}" if r.attempts > 1 else "")
            for r in run.rows[:MAP_ROWS]]  # fmt: skip
    if len(run.rows) > MAP_ROWS:
        rows.append(f"... {len(run.rows) - MAP_ROWS} more (--json lists them all)")
    return [("map", counts), ("items", ", ".join(rows) or "-")]


def event_line(e: Any) -> str:
    """One history event as a line (``--follow`` when stdout is not a terminal)."""
    from saga.cli.timeline import error_text, money

    parts = [fmt_ms(e.at_ms), e.event.value, e.step]
    if e.attempt:
        parts.append(f"attempt={e.attempt}")
    if e.epoch:
        parts.append(f"epoch={e.epoch}")
    if e.worker:
        parts.append(f"worker={e.worker}")
    if e.error_class or e.error_message:
        parts.append(error_text(e.error_class, e.error_message, None))
    if e.cost:
        parts.append(money(e.cost))
    if e.detail:
        parts.append(e.detail)
    return "  ".join(p for p in parts if p)


async def follow(client: Any, keys: Any, record_id: str, *, as_json: bool, info: Any = None) -> int:
    """Poll every POLL_S until the saga reaches a terminal state."""
    import sys

    import anyio
    import msgspec

    from saga.state.reads import get_saga_and_history

    redraw = tty() and not as_json
    last: tuple[int, int] | None = None
    while True:
        saga, events = await get_saga_and_history(client, keys, record_id)
        new = [e for e in events if last is None or _id(e.id) > last]
        if redraw:
            sys.stdout.write("\033[H\033[2J" + render(saga, events, _now_ms(), info) + "\n")
        elif as_json:
            sys.stdout.writelines(msgspec.json.encode(e).decode() + "\n" for e in new)
        elif last is None:
            sys.stdout.write(render(saga, events, _now_ms(), info) + "\n\n")
        else:
            sys.stdout.writelines(event_line(e) + "\n" for e in new)
        sys.stdout.flush()
        if events:
            last = _id(events[-1].id)
        elif last is None:
            last = (0, 0)
        if saga.state.terminal:
            return Exit.OK
        await anyio.sleep(POLL_S)


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
