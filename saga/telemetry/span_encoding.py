"""OTLP trace requests written as protobuf bytes directly, for the span exporter.

The SDK's encoder builds a protobuf object per span, per attribute and per value,
then serializes them: ~70-100 µs of a worker's CPU per span (saga bench, tracing
on), about as much as the whole transition costs without tracing. A span of ours
is a name, ids, times, a dozen scalar attributes and a status; writing its bytes
costs a fraction of that. What the parsed request holds is the same as the SDK's
(tests compare the two). A span with events, links or attribute values other than
str, bool, int, float, bytes or flat sequences of those takes the SDK's encoder,
span by span; resources and scopes take it too, once each (cached).

It leans on private parts of the exporter (``_internal``, and the module-level
``encode_spans`` the exporter calls), so ``install`` checks them: any import error,
missing name, changed signature or a request that differs from the SDK's on a probe
span keeps the SDK's encoder, with one warning; so does any error at export time.
pyproject.toml bounds the exporter's version, and ``.ci/deps-matrix`` tests both ends.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from opentelemetry.sdk.trace import ReadableSpan

log = structlog.get_logger("saga.telemetry")

_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_FIXED32 = struct.Struct("<I").pack
_HAS_IS_REMOTE = 0x100  # SpanFlags: the parent's remoteness is known ...
_IS_REMOTE = 0x200  # ... and it is remote


class _Sdk:
    """The exporter's private encoders this module calls, bound by ``_bind``."""

    encode_span: Callable[[Any], Any]
    encode_resource: Callable[[Any], Any]
    encode_scope: Callable[[Any], Any]
    kinds: dict[Any, int] = {}


def _bind() -> None:
    from opentelemetry.exporter.otlp.proto.common._internal import (
        _encode_instrumentation_scope,
        _encode_resource,
        trace_encoder,
    )

    _Sdk.encode_span = trace_encoder._encode_span
    _Sdk.encode_resource = _encode_resource
    _Sdk.encode_scope = _encode_instrumentation_scope
    _Sdk.kinds = {kind: int(value) for kind, value in trace_encoder._SPAN_KIND_MAP.items()}


class Encoded:
    """What the exporter asks of a request: its bytes."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializePartialToString(self) -> bytes:
        return self.data

    def SerializeToString(self) -> bytes:
        return self.data


def install() -> bool:
    """Have the OTLP/HTTP span exporter encode with ``encode_spans``: it calls the
    SDK's module-level function by name, which is replaced here. False, with one
    warning, and the SDK's encoder kept, if anything it relies on is not as expected."""
    try:
        from opentelemetry.exporter.otlp.proto.http import trace_exporter

        original = getattr(trace_exporter, "encode_spans")  # noqa: B009 - not re-exported
        original = getattr(original, "saga_original", original)  # installed twice
        if not callable(original):
            raise AttributeError("trace_exporter.encode_spans is not callable")
        _bind()
        _self_test(original)
    except Exception as exc:  # an upstream change: import, name, signature or output
        _Sdk.kinds = {}  # bound again on next use, should the SDK's parts come back
        log.warning(
            "span_encoder_unavailable",
            reason=f"{type(exc).__name__}: {exc}"[:300],
            detail="the OTLP exporter's own encoder is used",
        )
        return False
    trace_exporter.encode_spans = _guarded(original)  # type: ignore[attr-defined,assignment]
    return True


def _self_test(original: Callable[[Sequence[ReadableSpan]], Any]) -> None:
    """Encode a span like ours with both encoders; they must give the same request."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("saga.self-test")
    with tracer.start_as_current_span("probe") as span:
        span.set_attributes({"saga.step": "parser", "saga.attempt": 1, "saga.ok": True})
        with tracer.start_as_current_span("with an event") as child:
            child.add_event("left to the SDK's encoder", {"n": 1})
    provider.shutdown()
    spans = memory.get_finished_spans()
    ours = ExportTraceServiceRequest.FromString(encode_spans(spans).data)
    if ours != original(spans):
        raise ValueError("the hand-written request differs from the SDK's")


def _guarded(
    original: Callable[[Sequence[ReadableSpan]], Any],
) -> Callable[[Sequence[ReadableSpan]], Any]:
    """``encode_spans``, falling back to ``original`` for good (one warning) on any error."""
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    def encode(spans: Sequence[ReadableSpan]) -> Any:
        try:
            return encode_spans(spans)
        except Exception as exc:
            trace_exporter.encode_spans = original  # type: ignore[attr-defined,assignment]
            log.warning(
                "span_encoder_unavailable",
                reason=f"{type(exc).__name__}: {exc}"[:300],
                detail="the OTLP exporter's own encoder is used from now on",
            )
            return original(spans)

    encode.saga_fast = True  # type: ignore[attr-defined]
    encode.saga_original = original  # type: ignore[attr-defined]
    return encode


def encode_spans(spans: Sequence[ReadableSpan]) -> Encoded:
    """An ExportTraceServiceRequest: spans grouped by resource, then by scope (by the
    objects: one provider has one of each; the SDK also merges equal copies)."""
    if not _Sdk.kinds:
        _bind()
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        scopes = groups.setdefault(id(span.resource), (span.resource, {}))[1]
        scope = span.instrumentation_scope
        scopes.setdefault(id(scope), (scope, []))[1].append(_span(span))
    out = bytearray()
    for resource, scopes in groups.values():
        body = bytearray(_once(resource, _Sdk.encode_resource))
        for scope, encoded in scopes.values():
            scope_body = bytearray(_once(scope, _Sdk.encode_scope))
            for span_bytes in encoded:
                scope_body += _len(0x12, span_bytes)  # ScopeSpans.spans = 2
            if scope is not None and scope.schema_url:
                scope_body += _len(0x1A, scope.schema_url.encode())
            body += _len(0x12, bytes(scope_body))  # ResourceSpans.scope_spans = 2
        if resource.schema_url:
            body += _len(0x1A, resource.schema_url.encode())
        out += _len(0x0A, bytes(body))  # ExportTraceServiceRequest.resource_spans = 1
    return Encoded(bytes(out))


# -- one span ---------------------------------------------------------------------


def _span(span: ReadableSpan) -> bytes:
    ctx = span.get_span_context()
    if ctx is None or span.events or span.links:
        return _by_the_sdk(span)
    try:
        attributes = b"".join(_key_value(k, v) for k, v in (span.attributes or {}).items())
    except _Unsupported:
        return _by_the_sdk(span)
    parent = span.parent
    out = bytearray(b"\x0a\x10")  # trace_id = 1, 16 bytes
    out += ctx.trace_id.to_bytes(16, "big")
    out += b"\x12\x08"  # span_id = 2, 8 bytes
    out += ctx.span_id.to_bytes(8, "big")
    if ctx.trace_state:
        state = ",".join(f"{k}={v}" for k, v in ctx.trace_state.items())
        out += _len(0x1A, state.encode())
    if parent is not None:
        out += b"\x22\x08"  # parent_span_id = 4
        out += parent.span_id.to_bytes(8, "big")
    out += _len(0x2A, span.name.encode())  # name = 5
    kind = _Sdk.kinds[span.kind]
    if kind:
        out += b"\x30" + _varint(kind)  # kind = 6
    if span.start_time:
        out += b"\x39" + _FIXED64(span.start_time)  # start_time_unix_nano = 7
    if span.end_time:
        out += b"\x41" + _FIXED64(span.end_time)  # end_time_unix_nano = 8
    out += attributes  # attributes = 9, each its own field
    for field, count in ((0x50, span.dropped_attributes), (0x60, span.dropped_events)):
        if count:
            out += bytes((field,)) + _varint(count)
    if span.dropped_links:
        out += b"\x70" + _varint(span.dropped_links)  # dropped_links_count = 14
    out += _status(span)
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0)
    out += b"\x85\x01" + _FIXED32(flags)  # flags = 16, fixed32
    return bytes(out)


def _by_the_sdk(span: ReadableSpan) -> bytes:
    return bytes(_Sdk.encode_span(span).SerializePartialToString())


def _status(span: ReadableSpan) -> bytes:
    status = span.status
    body = bytearray()
    if status.description:
        body += _len(0x12, status.description.encode())  # Status.message = 2
    code = status.status_code.value
    if code:
        body += b"\x18" + _varint(code)  # Status.code = 3
    return _len(0x7A, bytes(body))  # Span.status = 15 (present even when empty, as the SDK's)


# -- attributes -------------------------------------------------------------------


class _Unsupported(Exception):
    """A value this encoder leaves to the SDK's."""


_PAIRS: dict[tuple[str, type, Any], bytes] = {}
"""Encoded attributes by key, type and value: most of a span's repeat in every span
(the system, the step, the group, the worker, attempt 1). Only str, int and bool
values (with their type in the key: 1 == True), never floats (-0.0 == 0.0 encode
apart). Emptied when full, so one-off values (record ids) cannot hold it."""
_PAIRS_MAX = 4096
_CACHED = frozenset({str, int, bool})


def _key_value(key: str, value: Any) -> bytes:
    kind = type(value)
    if kind not in _CACHED:
        return _pair(key, value)
    hit = _PAIRS.get((key, kind, value))
    if hit is None:
        hit = _pair(key, value)
        if len(_PAIRS) >= _PAIRS_MAX:
            _PAIRS.clear()
        _PAIRS[(key, kind, value)] = hit
    return hit


def _pair(key: str, value: Any) -> bytes:
    return _len(0x4A, _len(0x0A, key.encode()) + _len(0x12, _any(value)))  # Span.attributes = 9


def _any(value: Any) -> bytes:
    """An AnyValue's body."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"  # bool_value = 2
    if isinstance(value, str):
        return _len(0x0A, value.encode())  # string_value = 1
    if isinstance(value, int):
        if not -(1 << 63) <= value < 1 << 63:
            raise _Unsupported("int beyond int64")  # the SDK's logs it and drops it
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int_value = 3 (two's complement)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)  # double_value = 4
    if isinstance(value, bytes):
        return _len(0x3A, value)  # bytes_value = 7
    if isinstance(value, Sequence):
        items = b"".join(_len(0x0A, _scalar(v)) for v in value)  # ArrayValue.values = 1
        return _len(0x2A, items)  # array_value = 5
    raise _Unsupported(type(value).__name__)


def _scalar(value: Any) -> bytes:
    if isinstance(value, (bytes, str)) or not isinstance(value, Sequence):
        return _any(value)
    raise _Unsupported("nested sequence")


# -- resources and scopes, through the SDK once each ------------------------------

_ENCODED: dict[int, tuple[Any, bytes]] = {}


def _once(obj: Any, encode: Callable[[Any], Any]) -> bytes:
    """Field 1 of ResourceSpans (a resource) or ScopeSpans (a scope), through the SDK's
    encoder once per object; the object is kept with its bytes, so its id is not reused."""
    hit = _ENCODED.get(id(obj))
    if hit is None or hit[0] is not obj:
        body = bytes(encode(obj).SerializePartialToString())
        hit = _ENCODED[id(obj)] = (obj, _len(0x0A, body))
    return hit[1]


# -- wire format ------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len(tag: int, body: bytes) -> bytes:
    """A length-delimited field whose tag fits one byte (field numbers below 16)."""
    n = len(body)
    return (bytes((tag, n)) if n < 0x80 else bytes((tag,)) + _varint(n)) + body
