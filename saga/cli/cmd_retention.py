"""saga retention show [--type T] [--json]: how long ended sagas are kept, and what is due."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import Exit, fmt_ms, print_json, run
from saga.cli.saga_types import add_type_option, typed_keys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "retention",
        help="how long ended sagas are kept (SAGA_RETENTION_DAYS) and what is due",
        description=(
            "Every terminal state has a retention (SAGA_RETENTION_DAYS, e.g. "
            "completed=7,failed=30,needs_review=off). When it ends, the maintenance "
            "sweep of the workers and of the controller (once a minute, also while the "
            "workers are scaled to zero) deletes the saga: hash, history, pages, dead "
            "letter and index entries; with SAGA_ARCHIVE_DIR it writes them there first."
        ),
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    show = verbs.add_parser("show", help="each state's retention, and the sagas due")
    add_type_option(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=main_show)


def main_show(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()

    async def go() -> int:
        from saga.state.retention import retired_counts
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            counts = await retired_counts(client, keys)
        doc = document(keys.saga_type, settings, counts)
        if args.json:
            print_json(doc)
        else:
            print(render(doc))
        return Exit.OK

    return run(go)


def document(saga_type: str, settings: Any, counts: Any) -> Any:
    from saga.cli.shapes_data import RetentionDocument, RetentionRow

    rows = [
        RetentionRow(state=state, days=None if secs < 0 else round(secs / 86400, 6))
        for state, secs in settings.limits.retention.table().items()
    ]
    return RetentionDocument(
        saga_type=saga_type,
        retention=rows,
        scheduled=counts.scheduled,
        due=counts.due,
        next_due_ms=counts.next_due_ms,
        archive_dir=str(settings.archive_dir or ""),
    )


def render(doc: Any) -> str:
    from saga.cli.tables import table

    rows = [(r.state, "kept until purged" if r.days is None else f"{r.days:g} d")
            for r in doc.retention]  # fmt: skip
    lines = [f"retention of ended sagas ({doc.saga_type}; SAGA_RETENTION_DAYS)", ""]
    lines.append(table(["STATE", "KEPT FOR"], rows))
    lines.append("")
    nxt = f"; next due {fmt_ms(doc.next_due_ms)}" if doc.next_due_ms else ""
    lines.append(f"{doc.scheduled} ended saga(s) scheduled for deletion, {doc.due} due now{nxt}")
    where = doc.archive_dir or "nowhere (SAGA_ARCHIVE_DIR unset)"
    lines.append(f"archived before deletion: {where}")
    return "\n".join(lines)
