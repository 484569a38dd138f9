"""Keys and page text never leak through LLM errors, tracebacks or logs."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest
from structlog.testing import capture_logs

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.steps.errors import StepError

from .support import Reply, Request, error_reply, serve

pytestmark = pytest.mark.anyio

KEY = "sk-planted-4f9c2e7d1b"
PAGE = "Patient Jane Roe DOB 1970-01-01 Hemoglobin A1c 6.1 % H"


def echoing(status: int) -> Any:
    """A provider whose error message repeats the prompt and the key, as real ones do."""

    def handler(request: Request) -> Reply:
        prompt = request.body["messages"][-1]["content"]
        return error_reply(status, f"cannot process {prompt!r} for key {request.bearer}")

    return handler


@pytest.mark.parametrize("status", [400, 401, 422, 429, 500])
async def test_provider_error_echoing_prompt_and_key_is_redacted(
    status: int,
    redis: Any,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The raised error, its traceback, structlog events, stdlib logs and stdout hold neither."""
    caplog.set_level(logging.DEBUG)
    with serve(echoing(status)) as stub:
        llm = LiteLLMClient(
            LLMConfig(model="openai/gpt-4o-mini", api_base=f"{stub.url}/v1"),
            redis=redis,
            keys=keys,
            record_id="rec-1",
            step="parser",
            api_key=StaticKey(Secret(KEY)),
            meter=CostMeter(),
        )
        with capture_logs() as events, pytest.raises(StepError) as raised:
            await llm.complete([{"role": "user", "content": PAGE}], purpose="extract")
    assert stub.requests and stub.requests[0].bearer == KEY  # the plant reached the provider
    exc = raised.value
    texts = [
        str(exc),
        repr(exc),
        "".join(traceback.format_exception(exc)),
        repr(events),
        caplog.text,
        *capsys.readouterr(),
    ]
    for text in texts:
        assert KEY not in text
        assert "Jane Roe" not in text
    assert str(status) in str(exc)
