"""The documents and servers of the PHI search (tests/faults/test_phi_search.py): a
patient's name in a PDF's metadata and text, in file names and paths under an allowed
root and outside it, in the URLs of a records server that fails in every way the router
meets, and in an LLM provider's error that echoes the prompt."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.adapters.support import Reply, error_reply

NAME = "Zyxwert Quondam"
NEEDLES = (b"zyxwert", b"quondam")
"""Either word, searched for case-insensitively: in every spelling of the name (%20, +,
lower case), and in a part of it left over by a mask (main's scrubber hid a long run that
ended in "Zyxwert" and showed "Quondam")."""


# -- the documents ------------------------------------------------------------------------


def named_pdf(lines: list[list[str]], *, title: str = NAME) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_author(f"Dr. {NAME}")
    pdf.set_subject(f"results of {NAME}")
    pdf.set_font("Helvetica", size=10)
    for page in lines:
        pdf.add_page()
        for line in page:
            pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scan_pdf() -> bytes:
    """A page drawn, not written (a scan): no text layer, the name in its metadata."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(f"scan of {NAME}")
    pdf.add_page()
    for i in range(40):
        pdf.rect(10 + i * 4, 10 + i * 5, 30, 8, style="F")
    return bytes(pdf.output())


def local_documents(root: Path, outside: Path) -> dict[str, str]:
    """Record id -> reference, one per local failure (and one that routes)."""
    text = [[f"Patient: {NAME}", "Hemoglobin A1c 5.6 %", "Glucose 95 mg/dL 70 - 99"]]
    folder = root / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME} routed.pdf").write_bytes(named_pdf(text))
    (outside / f"{NAME} outside.pdf").write_bytes(named_pdf(text))
    (folder / f"{NAME} broken.pdf").write_bytes(b"%PDF-1.7\n" + f"{NAME} ".encode() * 50)
    (folder / f"{NAME} bomb.pdf").write_bytes(named_pdf(text * 5))
    (folder / f"{NAME} big.txt").write_text(f"{NAME}\n" * 8000)
    (folder / f"{NAME} scan.pdf").write_bytes(scan_pdf())
    (folder / f"{NAME} dir.pdf").mkdir()
    return {
        "phi-routed": str(folder / f"{NAME} routed.pdf"),  # reaches the parser's LLM
        "phi-refused": str(outside / f"{NAME} outside.pdf"),
        "phi-missing": str(folder / f"{NAME} missing.pdf"),
        "phi-missing-url": (folder / f"{NAME} gone.pdf").as_uri(),
        "phi-broken": str(folder / f"{NAME} broken.pdf"),
        "phi-bomb": str(folder / f"{NAME} bomb.pdf"),
        "phi-big": str(folder / f"{NAME} big.txt"),
        "phi-scan": str(folder / f"{NAME} scan.pdf"),
        "phi-dir": str(folder / f"{NAME} dir.pdf"),
        "phi-scheme": NAME.replace(" ", ":") + ".pdf",  # a "scheme" that is a name
    }


@contextmanager
def records_server() -> Iterator[str]:
    """A records API on loopback: hangs on /records/slow/, 404 on /records/gone/, and a
    redirect out of the allowed prefix on /records/moved/ (every path carries the name)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/records/slow/"):
                self.server.hang.wait(60)  # type: ignore[attr-defined]
                return
            if self.path.startswith("/records/moved/"):
                self.send_response(302)
                self.send_header("location", f"/elsewhere/{NAME.replace(' ', '%20')}.pdf")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            body = f"no record for {NAME}".encode()
            self.send_response(404)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.hang = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.hang.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def url_documents(base: str) -> dict[str, str]:
    quoted = NAME.replace(" ", "%20")
    query = f"patient={NAME.replace(' ', '+')}&sig=abc"
    return {
        "phi-slow": f"{base}/records/slow/{quoted}.pdf?{query}",
        "phi-404": f"{base}/records/gone/{quoted}.pdf?{query}",
        "phi-moved": f"{base}/records/moved/{quoted}.pdf?{query}",
    }


def echoing_model(request: Any) -> Reply:
    """An OpenAI-compatible provider that refuses the request and quotes it back."""
    return error_reply(400, f"cannot process: {json.dumps(request.body)[:4000]}")
