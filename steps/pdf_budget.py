"""What text extraction of each PDF page would read, measured before any text is read.

pypdf's cost grows with the decompressed bytes of a page's content streams and of
the form XObjects it draws (about 5 s per MB in layout mode on a loaded 2-core box).
A 14 KB file whose pages share one deflated 4.6 MB stream is a decompression bomb:
each page costs the whole stream. So each page is priced here, streams inflated
with a bounded ``zlib`` loop whose output is thrown away, and the document is
refused (``PayloadTooLargeError``) as soon as a page or the sum is over its limit.

Counted per page: the content streams, then every form XObject in its resources,
recursively (a shared stream counts on every page that draws it). Images are
not counted (extraction never decodes them) but noted: a page with an image and
no text is a scan.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

from saga.steps.errors import PayloadTooLargeError

_CHUNK = 64 * 1024
_MAX_FORM_DEPTH = 8
_CEILING = 16
"""A stream is counted exactly up to this many times the page limit (a 32 MiB count
takes ~0.1 s); past it the error says "more than"."""


class PageCost(msgspec.Struct, frozen=True):
    """One page's decompressed content bytes, and whether it has forms or images."""

    content_bytes: int
    has_forms: bool
    has_images: bool


def price_pages(reader: Any, *, per_page: int, total: int) -> list[PageCost]:
    """Each page's cost; raises PayloadTooLargeError at the first page or sum over its limit."""
    pricer = _Pricer(cap=per_page)
    costs: list[PageCost] = []
    spent = 0
    for number, page in enumerate(reader.pages, start=1):
        cost = pricer.page(page)
        if cost.content_bytes > per_page:
            raise PayloadTooLargeError(
                f"decompressed content of page {number} in bytes",
                cost.content_bytes,
                per_page,
                pricer.clipped,
            )
        spent += cost.content_bytes
        if spent > total:
            raise PayloadTooLargeError(
                f"decompressed content of pages 1-{number} in bytes", spent, total
            )
        costs.append(cost)
    return costs


class _Pricer:
    """Prices pages; a stream's size is measured once (capped) and reused by every page."""

    def __init__(self, *, cap: int) -> None:
        self.cap = cap
        self.ceiling = cap * _CEILING
        self.clipped = False  # a stream passed the ceiling: sizes are lower bounds
        self.sizes: dict[int, int] = {}  # id of a resolved stream -> size (at most ceiling)

    def page(self, page: Any) -> PageCost:
        contents = _resolve(page.get("/Contents"))
        streams = list(contents) if isinstance(contents, list) else [contents]
        spent = sum(self.stream(_resolve(s)) for s in streams if s is not None)
        found = _Found()
        if spent <= self.cap:
            spent += self.forms(page.get("/Resources"), found, depth=0)
        return PageCost(spent, found.forms, found.images)

    def forms(self, resources: Any, found: _Found, *, depth: int) -> int:
        """Bytes of the forms under ``resources``, each counted once per page; notes images."""
        resources = _resolve(resources)
        xobjects: Any = _resolve(resources.get("/XObject")) if hasattr(resources, "get") else None
        if not isinstance(xobjects, dict) or depth > _MAX_FORM_DEPTH:
            return 0
        spent = 0
        for ref in xobjects.values():
            xobject = _resolve(ref)
            if not hasattr(xobject, "get") or id(xobject) in found.seen:
                continue
            found.seen.add(id(xobject))
            subtype = xobject.get("/Subtype")
            if subtype == "/Image":
                found.images = True
            elif subtype == "/Form":
                found.forms = True
                spent += self.stream(xobject)
                if spent > self.cap:
                    break  # over already: the page is refused
                spent += self.forms(xobject.get("/Resources"), found, depth=depth + 1)
        return spent

    def stream(self, stream: Any) -> int:
        """The stream's decoded length, clipped to the ceiling."""
        key = id(stream)
        if key not in self.sizes:
            size = _decoded_size(stream, self.ceiling)
            self.clipped = self.clipped or size > self.ceiling
            self.sizes[key] = min(size, self.ceiling)
        return self.sizes[key]


class _Found:
    __slots__ = ("forms", "images", "seen")

    def __init__(self) -> None:
        self.forms = self.images = False
        self.seen: set[int] = set()


def _decoded_size(stream: Any, cap: int) -> int:
    raw = getattr(stream, "_data", None)
    if not isinstance(raw, bytes | bytearray):
        return 0
    filters = stream.get("/Filter")
    if filters is None or filters == []:
        return len(raw)
    if filters in ("/FlateDecode", ["/FlateDecode"]):
        return inflated_size(bytes(raw), cap)
    try:  # rare chains: pypdf decodes them under its own per-stream output limits
        return len(stream.get_data())
    except Exception:  # damaged: extraction reports the page as unreadable
        return 0


def inflated_size(data: bytes, cap: int) -> int:
    """Bytes ``data`` inflates to, counted until past ``cap`` (then more than ``cap``);
    holds one chunk of output at a time. Damaged data counts what inflated before it."""
    inflater = zlib.decompressobj()
    size = 0
    pending = data
    try:
        while size <= cap:
            out = inflater.decompress(pending, _CHUNK)
            size += len(out)
            pending = inflater.unconsumed_tail
            if inflater.eof or not out:
                break
    except zlib.error:
        pass
    return size


def _resolve(obj: Any) -> Any:
    """``obj`` with indirect references followed (pypdf objects have get_object)."""
    getter = getattr(obj, "get_object", None)
    return getter() if getter is not None else obj
