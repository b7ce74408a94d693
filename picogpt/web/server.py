"""The --explore page's server: the standard library's HTTP server, on 127.0.0.1 only.

It holds the web side of an exploring session: the address, the secret, the page itself, and
reading and answering the small JSON API the page calls. session.py computes and calls.py decides
which call runs when.
It is safe to leave running on a shared machine or with other sites open in the browser:

- it binds 127.0.0.1, and answers only a Host header that is the address it printed and an
  Origin, when there is one, that is that address (so a page of another site, or a name
  rebound to 127.0.0.1, gets nothing);
- every request needs the per-run secret of the printed address (`?token=` for the page, the
  X-Picogpt-Token header for the API); browser.py opens the page without putting the
  secret on a command line;
- gate.py checks each request before the session sees it: bodies over 64 KiB are refused
  unread, prompts are capped before they are tokenized (outside the lock), and every setting
  is checked with the command line's own checks; a refusal closes the connection, so a body it
  left unread is never read as a request;
- each request is answered speaking the page's language (errors.speaking): every message,
  the server's, the checks' and the book's, comes from the one catalog in it;
- a silent connection is closed after `idle` seconds, a request must arrive whole within
  `arrival` seconds of its first byte, and at most `arriving` connections are read at once
  (gate.py's Arrivals: slow clients cannot hold the threads, and a page still gets its
  answers); 64 may wait to be accepted, and a client that leaves (a closed tab) is let go
  without a word;
- the standard library's own refusals (a bad request line, a long address or long headers, a
  method other than GET and POST, HTTP/2) are JSON errors like every other;
- one computation runs at a time, a superseded request is not computed, and a page that last saw
  an older version of the text than another page made is refused: calls.py owns that order;
- it never reads or writes a path a request names: it serves one page and the API, nothing else;
- a bad request gets a JSON error the page shows; the server keeps answering.
"""

import contextlib
import http.server
import io
import itertools
import json
import secrets
import socket
import sys
import threading
from urllib.parse import urlparse

from ..errors import PicoGPTError, _, reason, speaking, whole_number
from . import gate
from .calls import Calls, bug
from .gate import settings
from .page import fill, titled
from .session import Session

API = ("state", "text", "next", "append", "draw", "back", "generate", "stop", "inside")


class ExploreServer(http.server.ThreadingHTTPServer):
    """The server, its session, its secret and its address."""

    daemon_threads = True
    request_queue_size = 64  # connections the kernel holds until they are accepted (5 by default)
    idle = 60  # seconds a connection may stay silent before it is closed: each holds a thread

    def __init__(self, session: Session, port: int, prompt: str = "", arrival: float = 10.0,
                 arriving: int = 32, grace: float = 1.0):
        """arrival: seconds a request may take to arrive whole, from its first byte; arriving:
        connections whose request is read at once; grace: seconds the one that has waited
        longest keeps its place when a new connection comes and there is no room (gate.py)."""
        self.arrival, self.arrivals = arrival, gate.Arrivals(arriving, grace)
        try:
            super().__init__(("127.0.0.1", port), Handler)
        except OSError as e:
            raise PicoGPTError(_("cannot serve on 127.0.0.1:{port} ({reason}); choose another "
                                 "--port, or leave it unset for a free one.").format(
                                     port=port, reason=reason(e))) from None
        session.set_text(prompt)
        self.session, self.secret = session, secrets.token_urlsafe(24)
        self.host = f"127.0.0.1:{self.server_port}"
        self.url = f"http://{self.host}/?token={self.secret}"
        self.lock = threading.Lock()  # one computation at a time
        self.inside = threading.Lock()  # one computation of the inside views at a time
        self.tokenizing = threading.Lock()  # one prompt tokenized at a time (calls.py)
        self.counting = threading.Lock()  # guards latest
        self.latest: dict[tuple[str, str], int] = {}  # newest request number by page and kind
        self.writers: list[str] = []  # the page that made each version of the text after the first
        model = titled(session.model, session.params, session.encoder)
        self.page = fill("explore.html", {**model, "prompt": prompt,
                                          "form": session.takes_form}).encode("utf-8")

    def handle_error(self, request, client_address) -> None:
        """A client that left (a closed tab) or went silent is no bug: nothing is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)

    def process_request(self, request: socket.socket, client_address) -> None:
        """A new connection gets a thread if there is room to read its request (gate.py's
        Arrivals); else it is refused at once, with nothing read, from this loop."""
        if self.arrivals.admit(request):
            super().process_request(request, client_address)
            return
        refused = gate.crowded(self.arrivals.most)  # nothing read: no page language to speak
        data = json.dumps({"error": str(refused)}).encode()
        with contextlib.suppress(OSError):
            request.setblocking(False)  # a few hundred bytes fit in a new socket's buffer
            request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; "
                            b"charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n"
                            b"Cache-Control: no-store\r\n\r\n%s" % (len(data), data))
            request.recv(65536)  # what the client sent already: unread, closing would reset
        self.shutdown_request(request)

    def shutdown_request(self, request: socket.socket) -> None:
        self.arrivals.forget(request)
        super().shutdown_request(request)


class Handler(Calls, http.server.BaseHTTPRequestHandler):
    """One request: checked, then the page or one API call (calls.py's Calls)."""

    server: ExploreServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # the terminal shows the address, not a log
        pass

    def setup(self) -> None:
        self.timeout = self.server.idle  # the socket's: reading from a silent client ends
        super().setup()
        self.rfile.close()  # read through gate.Arriving instead, which bounds the time
        self.arriving = gate.Arriving(self.connection, self.server.arrivals, self.server.idle,
                                      self.server.arrival)
        self.rfile = io.BufferedReader(self.arriving)
        self.first = True  # the server admitted this connection for its first request

    def handle_one_request(self) -> None:
        """One request, read within gate.Arriving's bounds: a connection kept open waits for
        its next request only if there is room (else it is closed, as an idle one is)."""
        if not self.first and not self.server.arrivals.admit(self.connection):
            self.close_connection = True
            return
        self.first, self.headers = False, None  # no earlier request's language
        self.command, self.requestline = "", ""  # read in super(): set in case it fails first
        self.request_version = self.protocol_version
        self.arriving.begin()
        try:
            super().handle_one_request()
        except gate.Refused as e:  # late (408), or made to give its place up (503)
            self.close_connection = True
            with speaking(self.language()):
                self.refuse(e.status, str(e))
        finally:
            self.server.arrivals.arrived(self.connection)

    def language(self) -> str:
        """The page's language, once the request's headers are read (English before)."""
        return gate.language(None if self.headers is None else
                             self.headers.get("Accept-Language"))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None
                   ) -> None:
        """The standard library's own refusals, as JSON in the page's language (gate.refusal)
        instead of its English HTML page."""
        # a line it could not read counts as HTTP/0.9, whose answers have no status line
        self.request_version = self.protocol_version
        with speaking(self.language()):
            self.refuse(code, gate.refusal(code, self.command))

    def refuse(self, status: int, message: str) -> None:
        """An error answer; message is in the page's language already (do_GET, do_POST)."""
        self.answer(status, {"error": message})

    def answer(self, status: int, value: dict | None = None, body: bytes = b"",
               kind: str = "application/json") -> None:
        """value as strict JSON (no NaN: JSON.parse refuses it), or body as kind. A value that
        holds a number JSON cannot carry is answered with that error instead."""
        try:
            data = body if value is None else encoded(value)
        except PicoGPTError as e:
            status, data = 500, encoded({"error": str(e)})
        self.send_response(status)
        if status >= 400:  # a refusal may leave a body unread: it must not be a next request
            self.send_header("Connection", "close")
            self.close_connection = True
        if status != 204:  # 204 (superseded, the icon) has no body
            self.send_header("Content-Type", kind + "; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":  # (refused with 501) an answer to HEAD has no body
            self.wfile.write(data)

    def allowed(self) -> bool:
        """Host, Origin and secret as the module says (gate.allowed); 403 otherwise."""
        try:
            gate.allowed(self.headers, self.command, self.path, self.server.host,
                         self.server.secret)
        except gate.Refused as e:
            self.refuse(e.status, str(e))
            return False
        return True

    def do_GET(self) -> None:
        self.server.arrivals.arrived(self.connection)  # a GET is its line and headers
        with speaking(self.language()):
            self.get()

    def do_POST(self) -> None:
        with speaking(self.language()):
            self.post()

    def get(self) -> None:
        if urlparse(self.path).path == "/favicon.ico":  # asked for by the browser on its own
            self.answer(204)
            return
        if not self.allowed():
            return
        if urlparse(self.path).path != "/":
            self.refuse(404, _("there is nothing here but the page"))
            return
        self.answer(200, body=self.server.page, kind="text/html")

    def post(self) -> None:
        if not self.allowed():
            return
        kind = urlparse(self.path).path.removeprefix("/api/")
        if kind not in API:
            self.refuse(404, _("no such call; the page calls {calls}").format(
                calls=", ".join(API)))
            return
        try:
            body = gate.body(self.headers.get("Content-Length"), self.rfile)
        except gate.Refused as e:
            self.refuse(e.status, str(e))
            return
        self.server.arrivals.arrived(self.connection)  # what follows is computing
        number, page = body.get("seq", 0), body.get("page", "")
        if not isinstance(number, int) or isinstance(number, bool):
            self.refuse(400, _("{name} must be a whole number").format(name="seq"))
            return
        if not isinstance(page, str) or len(page) > 64:
            self.refuse(400, _("page must be a short text"))
            return
        version = body.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            self.refuse(400, _("{name} must be a whole number").format(name="version"))

            return
        # each open page (a tab) counts its own requests; a stop counts as its generation's
        key = (page, "generate" if kind == "stop" else kind)
        with self.server.counting:  # not the computation's lock: a long one may hold that
            self.server.latest[key] = max(number, self.server.latest.get(key, number))
        if kind == "stop":  # the generation sees itself superseded before its next token
            self.answer(200, {"stopped": True})
            return
        self.call(kind, body, number, key)

    def stream(self, session: Session, body: dict, stale, ids: list[int], page: str) -> None:
        """Generate: each token as a line of JSON as it is made, then the text's state and
        its version. An error once the answer has begun (the status is sent) is a line of its
        own, {"error"}, before that state: the stream still ends as a stream, and the text
        keeps the tokens made before it. A text that changed gets a new version however the
        stream ends, a client that left included."""
        n_tokens = whole_number("n_tokens", body.get("n_tokens", 10), 1)
        sampling, form = settings(body, session.n_vocab), gate.form(body, session)
        tokens = session.generate(sampling, body.get("seed"), n_tokens, stale, form)
        first = next(tokens, None)  # the settings are checked before the answer starts
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        try:
            for token in itertools.chain([first], tokens) if first else []:
                self.chunk({"token": token})
        except (ConnectionError, TimeoutError):  # the client left: handle_error lets it go
            raise
        except Exception as e:
            self.chunk({"error": self.failed(e)})
        finally:
            if session.ids != ids:
                self.server.writers.append(page)
        version = len(self.server.writers)
        try:
            state = {**session.state(), "version": version}
            try:
                state["next"] = session.next(sampling, form)
            except PicoGPTError as e:  # the text stands; the page says why no candidates
                state["error"] = str(e)
            self.chunk(state)
        except (ConnectionError, TimeoutError):
            raise
        except Exception as e:  # (a chunk is encoded whole before any of it is written)
            self.chunk({"error": self.failed(e), "version": version})
        self.wfile.write(b"0\r\n\r\n")

    def failed(self, error: Exception) -> str:
        """What the page says of an error in a stream: a PicoGPTError's message, or a bug's."""
        return str(error) if isinstance(error, PicoGPTError) else bug(error)


    def chunk(self, value: dict) -> None:
        data = encoded(value) + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def encoded(value: dict) -> bytes:
    """value as strict JSON in UTF-8; PicoGPTError if it holds NaN or infinity, which strict
    JSON cannot carry (JSON.parse refuses them)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise PicoGPTError(_("the model gave numbers that are not finite (NaN or infinity) for "
                             "this text, which an answer cannot carry; change the text, or load "
                             "another model")) from None
    return text.encode("utf-8", "replace")  # a lone surrogate a message quotes: "?"
