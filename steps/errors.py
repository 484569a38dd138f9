"""Errors a step raises; the type decides what the executor does next.

    SagaError (saga.state.errors)
    └── StepError
        ├── RetryableError          retried with backoff, up to the step's max attempts
        │   └── StepTimeoutError    the step ran past its timeout
        ├── CircuitOpenError        parked until ``retry_at`` without spending an attempt
        ├── BudgetExceededError     the user's LLM budget is spent: parked the same way
        └── PermanentError          dead-lettered at once
            ├── NotFoundError       the document or record does not exist
            ├── InvalidInputError   the input cannot be processed as given
            ├── PayloadTooLargeError  a configured limit was exceeded
            └── PolicyError         the deployment does not allow reading this document

Any other exception escaping a step counts as retryable.

**Message and detail.** Every step error has two texts::

    raise NotFoundError("no file at the saga's document", detail=f"no file at {path}")

- the *message* (``str(exc)``) is stored in the saga, its history and its dead letter,
  logged, and shown to everyone, console viewers included. It must be a fixed sentence
  plus numbers and setting names: never a path, URL, file name, host, page text,
  prompt, completion, key, or a third-party exception's ``str()`` (pypdf, httpx and
  litellm messages echo what they were given). Name the document ``DOCUMENT``.
- the *detail* (keyword-only, optional) may say anything an operator needs, the path
  included. With ``SAGA_DATA_KEY`` it is sealed (AES-GCM) inside the stored error and
  opened only for operators (``saga show``, the console's operator role); without a key
  it is not stored at all.

The worker adds a net that does not rely on the message being right: any reference
the attempt passed to ``DocumentSource.fetch`` (and the fetched document's name) is
cut out of the message before it is stored or logged (``saga.telemetry.redact``).
"""

from __future__ import annotations

import time

from saga.state.errors import SagaError

DOCUMENT = "the saga's document"
"""How a message names the document (its reference is a patient's data: see above)."""


def utc_second(epoch_s: float) -> str:
    """``2026-12-01 00:00:00 UTC``: the one format people read a resume time in (the
    CLI's ``fmt_resume``, the console), never a raw epoch."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(round(epoch_s)))


class StepError(SagaError):
    """Raised by a step to tell the executor how to treat a failed attempt.

    ``message`` is safe to show anyone; ``detail`` is for operators only (see above)."""

    def __init__(self, message: str = "", *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class RetryableError(StepError):
    """A transient failure: try again later."""


class StepTimeoutError(RetryableError):
    """The step exceeded its timeout and was cancelled."""


class CircuitOpenError(StepError):
    """A dependency's circuit breaker is open; park until ``retry_at`` (epoch seconds)."""

    def __init__(self, dependency: str, retry_at: float) -> None:
        super().__init__(f"circuit for {dependency} is open until {utc_second(retry_at)}")
        self.dependency = dependency
        self.retry_at = retry_at


class BudgetExceededError(StepError):
    """The user's LLM spend reached their budget, or what is left of it (after the holds
    of calls in flight) is less than the call may cost (``estimate``); park until
    ``retry_at`` (epoch seconds) without spending an attempt or calling the model."""

    def __init__(
        self,
        user_id: str,
        period: str,
        spent: float,
        limit: float,
        retry_at: float,
        estimate: float = 0.0,
    ):
        until = utc_second(retry_at)
        if spent < limit:
            message = (
                f"the {period} LLM budget of user {user_id} has ${limit - spent:.4f} left "
                f"(${spent:.4f} spent or held of ${limit:.4f}), less than the call may cost "
                f"(${estimate:.4f}); parked until {until}"
            )
        else:
            message = (
                f"the {period} LLM budget of user {user_id} is spent "
                f"(${spent:.4f} of ${limit:.4f}); parked until {until}"
            )
        super().__init__(message)
        self.user_id = user_id
        self.period = period
        self.spent = spent
        self.limit = limit
        self.retry_at = retry_at
        self.estimate = estimate

    def __reduce__(
        self,
    ) -> tuple[type[BudgetExceededError], tuple[str, str, float, float, float, float]]:
        args = (self.user_id, self.period, self.spent, self.limit, self.retry_at, self.estimate)
        return (type(self), args)


class PermanentError(StepError):
    """Retrying cannot help: dead-letter at once."""


class NotFoundError(PermanentError):
    """The document or record does not exist."""


class InvalidInputError(PermanentError):
    """The input is malformed or cannot be processed."""


class PayloadTooLargeError(PermanentError):
    """A document or output exceeds a configured limit."""

    def __init__(self, what: str, value: int, limit: int, more_than: bool = False) -> None:
        # more_than: counting stopped early, so ``value`` is a lower bound and says so
        said = f"more than {value}" if more_than else str(value)
        super().__init__(f"{what} is {said}, over the limit of {limit}")
        self.what = what
        self.value = value
        self.limit = limit
        self.more_than = more_than

    def __reduce__(self) -> tuple[type[PayloadTooLargeError], tuple[str, int, int, bool]]:
        # rebuilt from its fields when it crosses a process boundary (PDF extraction)
        return (type(self), (self.what, self.value, self.limit, self.more_than))


class PolicyError(PermanentError):
    """The fetch policy refuses the document: a path outside the allowed roots, a URL
    under no allowed prefix, or an address the deployment does not allow."""


class OcrUnavailableError(PermanentError):
    """The OCR engine or its language data are not installed on this worker."""
