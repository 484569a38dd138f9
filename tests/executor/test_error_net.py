"""The worker's net under the error rule of ``saga.steps.errors``: whatever a failing
step or adapter wrote into its message, the stored message names no reference the attempt
handled, a library's message is never stored as it is, and the operator's detail is only
sealed, never kept in clear. These hold for error sites written carelessly (the cases a
reviewer would miss), so they are built here, not taken from the real adapters."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from saga.api.retry import RetryPolicy
from saga.state.keys import Keys
from saga.state.sealing import Sealer, error_detail, error_field, error_message
from saga.steps.context import Document
from saga.steps.errors import NotFoundError, RetryableError
from saga.telemetry.redact import REFERENCE_MASK, error_detail_of, without_references
from saga.worker.attempt import AttemptRunner
from saga.worker.context import AttemptContext, SeenDocuments

pytestmark = pytest.mark.anyio

NAME = "Zyxwert Quondam"
PATH = f"/data/reports/{NAME}/{NAME} 2024-03.pdf"
URL = f"https://records.example/r/{NAME.replace(' ', '%20')}.pdf?patient={NAME.replace(' ', '+')}"


class Careless:
    """A document source whose errors quote what they were given (a new adapter, say)."""

    def __init__(self, exc: type[Exception]) -> None:
        self.exc = exc

    async def fetch(self, ref: str) -> Document:
        stem = Path(ref.split("?", maxsplit=1)[0]).stem.replace("%20", " ")
        raise self.exc(f"could not open {ref} (file {stem!r}, patient {NAME})")


def runner(sealer: Sealer | None) -> Any:
    """An AttemptRunner with only what ``_fail_request`` reads."""
    return AttemptRunner(
        sm=SimpleNamespace(keys=Keys(sealer=sealer)),  # type: ignore[arg-type]
        pipeline=SimpleNamespace(undoable=lambda: ()),  # type: ignore[arg-type]
        settings=None,  # type: ignore[arg-type]
        committer=None,  # type: ignore[arg-type]
        ports=None,  # type: ignore[arg-type]
        worker="w",
        observer=None,  # type: ignore[arg-type]
        watchdog=None,  # type: ignore[arg-type]
    )


async def failed(ref: str, exc: type[Exception], sealer: Sealer | None) -> Any:
    ctx = AttemptContext(
        claim=SimpleNamespace(charged=1),  # type: ignore[arg-type]
        log=None,
        documents=SeenDocuments(Careless(exc)),
        llm=None,
        config=None,  # type: ignore[arg-type]
        _heartbeat=None,  # type: ignore[arg-type]
    )
    spec = SimpleNamespace(name="router", retry=RetryPolicy(max_attempts=1), version=1)
    try:
        await ctx.documents.fetch(ref)
    except Exception as caught:
        return runner(sealer)._fail_request(spec, ctx, caught)
    raise AssertionError("the source did not fail")


@pytest.mark.parametrize("ref", [PATH, URL, f"file://{PATH.replace(' ', '%20')}"])
@pytest.mark.parametrize("exc", [NotFoundError, RetryableError])
async def test_a_step_error_quoting_its_reference_is_stored_without_it(
    ref: str, exc: type[Exception]
) -> None:
    """A saga error whose message quotes the path, the URL, the file's stem: every form of
    the reference is cut from the stored message; the rest of the sentence stays."""
    req = await failed(ref, exc, None)
    assert "Zyxwert" not in req.error_message and "zyxwert" not in req.error_message.lower()
    assert req.error_message.startswith("could not open ") and REFERENCE_MASK in req.error_message
    assert req.error_detail == ""  # without a data key there is no detail at all


async def test_a_library_error_is_withheld_and_only_sealed_for_operators() -> None:
    """Any other exception's message is withheld from the stored message; with a data key
    the operator's detail keeps it, sealed; the stored field opens only with the key."""
    sealer = Sealer(os.urandom(32))
    req = await failed(PATH, ValueError, sealer)
    assert NAME not in req.error_message and "message withheld" in req.error_message
    assert NAME in req.error_detail
    stored = error_field(req.error_message, req.error_detail, sealer)
    assert NAME not in stored and error_message(stored) == req.error_message
    assert NAME in error_detail(stored, sealer)
    assert error_detail(stored, None) == "" and error_detail(stored, Sealer(os.urandom(32))) == ""


def test_without_a_key_no_detail_is_stored() -> None:
    """In clear the detail would be exactly what the message leaves out: it is dropped."""
    assert error_field("no file at the saga's document", f"no file at {PATH}", None) == (
        "no file at the saga's document"
    )


@pytest.mark.parametrize(
    ("text", "refs", "kept"),
    [
        (f"reading {PATH} refused", [PATH], "reading [document] refused"),
        (f"the file {NAME} 2024-03 is broken", [PATH], "the file [document] is broken"),
        (f"patient={NAME.replace(' ', '+')} missing", [URL], "[document] missing"),
        (f"for {NAME.replace(' ', '+')}", [URL], "for [document]"),
        (f"for {NAME}", [URL], "for [document]"),
        (f"no {NAME.lower()}", [PATH], "no [document]"),  # case does not matter
        ("HTTP 404 fetching the saga's document", [PATH], "HTTP 404 fetching the saga's document"),
    ],
)
def test_every_form_of_a_reference_is_cut(text: str, refs: list[str], kept: str) -> None:
    """The whole reference, decoded or not, its segments, its stem and query values."""
    assert without_references(text, refs) == kept


def test_the_detail_of_a_step_error_is_its_own_or_its_message_when_that_named_a_reference() -> None:
    """``detail=`` wins; a message that quoted a reference becomes the detail; keys are
    masked even in a sealed detail."""
    assert error_detail_of(NotFoundError("x", detail=f"at {PATH}"), [PATH]) == f"at {PATH}"
    assert error_detail_of(NotFoundError(f"at {PATH}"), [PATH]) == f"at {PATH}"
    assert error_detail_of(NotFoundError("at the saga's document"), [PATH]) == ""
    assert "sk-live" not in error_detail_of(RetryableError("x", detail="key sk-live-123456"), [])
