"""saga retry <record_id> [--step S] [--force]  |  saga retry --step S [--failed|--review] ...
(bulk)"""

from __future__ import annotations

import argparse

from saga.cli.common import CliError, Exit, parse_since, print_json, run, table
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "retry",
        help="re-run a saga from a step, or every saga dead-lettered at a step",
        description=(
            "With a record id: re-run that saga from --step (default: where it stopped), "
            "keeping its history. Without one: re-run every saga dead-lettered at --step "
            "whose dead letter is still there, as `saga dlq list --step S` shows them (the "
            "dead-letter replay; sagas whose letter was purged stay failed), or with --review "
            "every saga flagged for review, from --step (say, once the parser has improved)."
        ),
    )
    p.add_argument("record_id", nargs="?")
    p.add_argument("--step", help="step to re-run from")
    p.add_argument("--force", action="store_true", help="even while the step is running")
    p.add_argument("--failed", action="store_true", help="bulk: sagas failed at --step (default)")
    p.add_argument(
        "--review",
        action="store_true",
        help="bulk: sagas flagged for review (at any step), re-run from --step",
    )
    p.add_argument("--user", help="bulk: only this user's sagas")
    p.add_argument("--since", help="bulk: created within, e.g. 2h, 7d, or an ISO date")
    p.add_argument("--limit", type=int, default=1000, help="bulk: at most N sagas")
    p.add_argument(
        "--dry-run", action="store_true", help="bulk: list what would be retried (the default)"
    )
    p.add_argument("--yes", action="store_true", help="bulk: confirm, retry them (else a dry run)")
    add_type_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    if args.record_id is None and not args.step:
        raise CliError("give a record id, or --step for the bulk retry of dead letters", Exit.USAGE)
    if args.record_id and (args.user or args.since or args.dry_run or args.review or args.yes):
        raise CliError(
            "--user, --since, --review, --dry-run and --yes apply to the bulk form only",
            Exit.USAGE,
        )
    if args.record_id is None:  # a bulk action runs only when confirmed, as purge does
        args.dry_run = args.dry_run or not args.yes
    if args.failed and args.review:
        raise CliError("give --failed or --review, not both", Exit.USAGE)
    settings = load_settings()
    since = parse_since(args.since)

    async def go() -> int:
        from saga.api.client import SagaClient
        from saga.cli.cmd_cancel import actor

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            if args.step:
                _known_step(sagas, args.step)
            if args.record_id:
                before = await sagas.get(args.record_id) if args.step else None
                res = await sagas.retry(
                    args.record_id, step=args.step, force=args.force, actor=actor()
                )
                if args.json:
                    from saga.cli.shapes import RetryResult

                    print_json(
                        RetryResult(
                            record_id=args.record_id,
                            step=res.step,
                            epoch=res.epoch,
                            duplicate=res.duplicate,
                        )
                    )
                else:
                    note = ""
                    if args.step and res.step != args.step:
                        note = _moved_back(args.step, res.step, before)
                    print(
                        f"saga {args.record_id} re-runs from {res.step} in epoch {res.epoch}{note}"
                    )
                return Exit.OK
            return await _bulk(sagas, args, since, actor())

    return run(go)


def _moved_back(asked: str, step: str, before: object) -> str:
    """Why the retry starts before the step asked: that step reads the document's pages,
    which a step before it makes; either it never committed, or the pages are gone."""
    outputs = getattr(before, "outputs", {})
    if step not in outputs:
        return (f" ({asked} needs the pages {step} makes, and {step} has not committed in "
                f"this saga, so from {step})")  # fmt: skip
    return f" (its pages expired, so from {step}, which fetches them again)"


def _known_step(sagas: object, step: str) -> None:
    from saga.api.client import SagaClient

    assert isinstance(sagas, SagaClient)
    if step not in sagas.type_info.steps:
        raise CliError(
            f"unknown step {step!r}; the pipeline has {', '.join(sagas.type_info.steps)}",
            Exit.USAGE,
        )


async def _bulk(sagas: object, args: argparse.Namespace, since: int, who: str) -> int:
    """Re-run the sagas dead-lettered at --step whose dead letter is still there (the set
    `saga dlq list --step S` shows: a purged letter's saga stays failed, left out), or
    with --review the sagas flagged for review, from --step."""
    from saga.api.client import SagaClient
    from saga.state.dead_letters import have_dead_letters
    from saga.state.errors import StateError
    from saga.state.listing import ListQuery, list_sagas
    from saga.state.model import SagaState

    assert isinstance(sagas, SagaClient)
    if args.review:  # the same index-served read as `saga list --review`
        query = ListQuery(review=True, user=args.user, since_ms=since, limit=args.limit)
        rows, purged = await list_sagas(sagas.redis, sagas.keys, query), []
    else:  # as `saga list --state failed --step S`, less the sagas whose letter was purged
        query = ListQuery(
            state=SagaState.FAILED, step=args.step, user=args.user, since_ms=since, limit=args.limit
        )
        failed = await list_sagas(sagas.redis, sagas.keys, query)
        present = await have_dead_letters(sagas.redis, sagas.keys, [r.record_id for r in failed])
        rows = [r for r, ok in zip(failed, present, strict=True) if ok]
        purged = [r.record_id for r, ok in zip(failed, present, strict=True) if not ok]
    done, errors = [], []
    if not args.dry_run:
        for row in rows:
            try:
                await sagas.retry(row.record_id, step=args.step, actor=who)
                done.append(row.record_id)
            except StateError as exc:
                errors.append((row.record_id, str(exc)))
    _print_bulk(args, rows, purged, done, errors)
    return Exit.FAILED if errors else Exit.OK


def _print_bulk(
    args: argparse.Namespace,
    rows: list,  # type: ignore[type-arg]
    purged: list[str],
    done: list[str],
    errors: list[tuple[str, str]],
) -> None:
    if args.json:
        from saga.cli.shapes import BulkRetryDocument, RecordError

        print_json(
            BulkRetryDocument(
                step=args.step,
                dry_run=args.dry_run,
                matched=[r.record_id for r in rows],
                retried=done,
                errors=[RecordError(record_id=r, error=e) for r, e in errors],
                without_dead_letter=purged,
            )
        )
        return
    verb = "would retry" if args.dry_run else "retried"
    count = len(rows) if args.dry_run else len(done)
    which = f"flagged for review, from {args.step}" if args.review else (
        f"dead-lettered at {args.step}")  # fmt: skip
    print(f"{verb} {count} saga(s) {which}")
    if rows:
        cells = [[r.record_id, r.user_id, r.review if args.review else r.error_class]
                 for r in rows]  # fmt: skip
        head = ["record", "user", "review" if args.review else "error"]
        print(table(head, cells, shrink={head[2]: 12}, drop=["user"]))
    if purged:
        print(
            f"left out {len(purged)} failed saga(s) whose dead letter was purged; "
            f"`saga list --state failed --step {args.step}` lists them, "
            "`saga retry <record>` re-runs one"
        )
    for rid, err in errors:
        print(f"  {rid}: {err}")
    if args.dry_run and rows and not args.yes:
        print("nothing was retried: run it again with --yes to retry them")
