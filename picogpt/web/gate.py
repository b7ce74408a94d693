"""The explore server's gate: what a request must be before the session sees it, and every
refusal in the page's language.

It holds the checks server.py runs on a request before any computation: `allowed` (Host, Origin,
and the secret, compared as bytes, so whatever text a request carries is refused, never raised
on), `settings` (the sampler, checked with the command line's own checks), `form` (a poem's form,
as --acrostic, --line and --rhyme),
`body` (one JSON object of a known, capped length, however deep or broken its bytes), `prompt`
(a text of whole characters, capped before it is tokenized: BPE's time grows with the square of
a word's length); `language` (the page's, from Accept-Language, which server.py speaks while it
answers: every message, the checks' included, comes from the one catalog in that language);
`refusal` (the words for the standard library's own refusals, which server.py sends as JSON). A
refusal is `Refused`, with its status and its words. The checks read only the body they are
handed; server.py answers.

It also bounds how requests arrive, so that slow clients cannot hold the server's threads:
`Arriving` reads one connection's requests, each of which must arrive whole (its line, headers
and body) within `arrival` seconds of its first byte, however the bytes trickle in; `Arrivals`
counts the connections whose request is being read, at most `most` at once. A new connection
past that is refused at once, unless the one that has waited longest has waited more than
`grace` seconds: that one then gives its place up (a page's request arrives whole in
milliseconds, a slow client's does not), so a page still gets its answers while slow clients
crowd the server. Only reading is bounded: an answer, a stream of tokens included, takes as long
as it takes.
"""

import io
import json
import re
import secrets
import socket
import threading
import time
from typing import BinaryIO
from urllib.parse import parse_qs, urlparse

from ..constraints import Verse
from ..errors import PicoGPTError, _
from ..generate import check_settings
from ..sampling import Sampling

MAX_BODY = 64 * 1024  # bytes: a 1,024-token prompt is a few KB
CHARS_PER_POSITION = 8  # English is ~4.5 characters a token, code a little more: a text that
# fits in the context fits in 8 a position; a longer one is refused before it is tokenized


class Refused(Exception):
    """A request answered with a status and a message instead of a computation."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def allowed(headers, command: str, path: str, host: str, secret: str) -> None:
    """Refused (403) unless Host is the printed address, Origin (when there is one) that
    address's page, and the secret the printed one: ?token= for a GET, X-Picogpt-Token for
    the API."""
    if headers.get("Host") != host:
        raise Refused(403, _("this server answers only at the address it printed"))
    if headers.get("Origin") not in (None, f"http://{host}"):
        raise Refused(403, _("requests from other sites' pages are refused"))
    token = (parse_qs(urlparse(path).query).get("token", [None])[0] if command == "GET"
             else headers.get("X-Picogpt-Token"))
    if not secret_matches(token, secret):
        raise Refused(403, _("the secret is missing or wrong: open the address picogpt printed"))


def secret_matches(given: str | None, secret: str) -> bool:
    """Whether a request's secret is the server's, in constant time. Compared as UTF-8 bytes:
    compare_digest raises on a str that is not ASCII (?token=%C3%A9)."""
    return given is not None and secrets.compare_digest(given.encode("utf-8", "surrogatepass"),
                                                        secret.encode("utf-8"))


def body(length: str | None, file: BinaryIO) -> dict:
    """A request's body, read from file, as the JSON object it must be; Refused otherwise. A
    body over MAX_BODY is refused unread; 50,000 '[' make json's reader recurse too deep, which
    is a refusal too, not a traceback."""
    try:
        n_bytes = int(length or "")
    except ValueError:
        raise Refused(411, _("a request body needs its length")) from None
    if not 0 <= n_bytes <= MAX_BODY:
        raise Refused(413, _("a request body may hold up to {n} KiB").format(n=MAX_BODY // 1024))
    try:
        value = json.loads(file.read(n_bytes) or b"{}")
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise Refused(400, _("the request body is not a JSON object"))
    return value


def prompt(value, n_ctx: int) -> str:
    """A request's prompt, if it is text the encoder can take and at most CHARS_PER_POSITION
    characters for each position of the context; Refused (400) otherwise."""
    if not isinstance(value, str):
        raise Refused(400, _("prompt must be a text"))
    if len(value) > CHARS_PER_POSITION * n_ctx:
        raise Refused(400, _("the prompt is {n} characters; the page takes up to {cap} ({per} "
                             "for each of the model's {n_ctx} positions). Shorten it").format(
                                 n=len(value), cap=CHARS_PER_POSITION * n_ctx,
                                 per=CHARS_PER_POSITION, n_ctx=n_ctx))
    surrogate = re.search("[\ud800-\udfff]", value)  # JSON's "\ud800": half a pair, not text
    if surrogate:
        raise Refused(400, _("the prompt is not text: it holds {code}, half of a UTF-16 pair. "
                             "Send the text as typed").format(
                                 code=f"U+{ord(surrogate[0]):04X}"))
    return value


def settings(body: dict, n_vocab: int) -> Sampling:
    """The sampler a request asks for, checked as the command line checks it."""
    sampling = Sampling(body.get("top_k"), body.get("top_p"), body.get("temperature", 1.0),
                        body.get("repetition_penalty", 1.0))
    check_settings(0, sampling, None, None, n_vocab)
    return sampling


def form(body: dict, session) -> Verse | None:
    """The poem's form a request asks for ("acrostic", "line", "rhyme"), checked as
    --acrostic, --line and --rhyme are, against the session's vocabulary; None when it asks for
    none."""
    acrostic = body.get("acrostic")
    if isinstance(acrostic, str) and re.search("[\ud800-\udfff]", acrostic):
        raise PicoGPTError(_("the acrostic is not text: it holds half of a UTF-16 pair. Send "
                             "the characters as typed"))
    return session.form(acrostic, body.get("line"), body.get("rhyme", False))


def language(accept: str | None) -> str:
    """"zh" when the first language a request accepts is Chinese, "en" otherwise. The page
    sends its own language; a browser sends the user's."""
    first = (accept or "").split(",")[0].strip().lower()
    return "zh" if first.startswith("zh") else "en"


def refusal(status: int, method: str | None) -> str:
    """What the page is told when the standard library's reader refuses a request before
    server.py sees it: a bad request line (400), a long address (414), long or many headers
    (431), a method other than GET and POST (501), HTTP/2 (505)."""
    said = {400: _("the request is not HTTP that this server reads: a line such as GET / "
                   "HTTP/1.1, then headers"),
            414: _("the address is too long (at most 64 KiB)"),
            431: _("the request's headers are too long or too many (at most 100 headers of "
                   "64 KiB)"),
            501: _("this server answers GET and POST, not {method}"),
            505: _("this server speaks HTTP/1.1 and HTTP/1.0 only")}
    return said.get(status, _("the request was refused (HTTP {status})")).format(
        method=method, status=int(status))


def late(arrival: float) -> Refused:
    """The refusal of a request that did not arrive whole in time (408)."""
    return Refused(408, _("the request did not arrive whole within {n} s of its first byte; "
                          "send it again").format(n=f"{arrival:g}"))


def crowded(most: int) -> Refused:
    """The refusal of a connection for which there is no room to read a request (503)."""
    return Refused(503, _("the server is already reading {n} requests, the most it reads at "
                          "once; send this one again").format(n=most))


class Arrivals:
    """The connections whose request is being read, each with the time it began to wait for
    it: at most `most`; past that, the one that has waited longest gives its place up if it has
    waited more than `grace` seconds (its socket stops reading), else the newcomer is refused.
    Thread-safe: the server's loop admits, each connection's thread leaves."""

    def __init__(self, most: int, grace: float):
        self.most, self.grace = most, grace
        self.lock = threading.Lock()
        self.since: dict[socket.socket, float] = {}  # connection -> when it began to wait
        self.given_up: set[socket.socket] = set()  # connections made to give their place up

    def admit(self, connection: socket.socket) -> bool:
        """Whether connection may wait for a request now, making room if it can."""
        with self.lock:
            now = time.monotonic()
            if len(self.since) >= self.most:
                oldest = min(self.since, key=self.since.__getitem__)
                if now - self.since[oldest] <= self.grace:
                    return False
                del self.since[oldest]
                self.given_up.add(oldest)
                try:  # its blocked read returns at once; it can still write
                    oldest.shutdown(socket.SHUT_RD)
                except OSError:  # it has just closed
                    pass
            self.since[connection] = now
            return True

    def arrived(self, connection: socket.socket) -> None:
        """connection's request has been read: it no longer counts."""
        with self.lock:
            self.since.pop(connection, None)

    def gave_up(self, connection: socket.socket) -> bool:
        with self.lock:
            return connection in self.given_up

    def forget(self, connection: socket.socket) -> None:
        """connection is closed."""
        with self.lock:
            self.since.pop(connection, None)
            self.given_up.discard(connection)


class Arriving(io.RawIOBase):
    """One connection's bytes as its handler reads requests from them (buffered on top): a
    request must arrive whole within `arrival` seconds of its first byte, and no read waits
    more than `idle` seconds (a connection silent that long is closed without a word). A late
    request is refused (408), and so is one whose connection gave its place up (503)."""

    def __init__(self, connection: socket.socket, arrivals: Arrivals, idle: float,
                 arrival: float):
        super().__init__()
        self.connection, self.arrivals = connection, arrivals
        self.idle, self.arrival = idle, arrival
        self.deadline: float | None = None  # set by a request's first byte

    def readable(self) -> bool:
        return True

    def begin(self) -> None:
        """A new request: its time starts with its first byte."""
        self.deadline = None

    def readinto(self, buffer) -> int:
        left = self.idle if self.deadline is None else self.deadline - time.monotonic()
        if left <= 0:
            raise late(self.arrival)
        self.connection.settimeout(min(left, self.idle))
        try:
            n = self.connection.recv_into(buffer)
        except TimeoutError:  # silent for `idle` seconds: closed without a word, as before
            if self.deadline is None or time.monotonic() < self.deadline:
                raise
            raise late(self.arrival) from None
        finally:  # the answer's writes keep the idle time: a stream is never cut by this bound
            self.connection.settimeout(self.idle)
        if self.arrivals.gave_up(self.connection):
            if self.deadline is None:
                raise TimeoutError("gave its place up before a request began")
            raise crowded(self.arrivals.most)
        if n and self.deadline is None:
            self.deadline = time.monotonic() + self.arrival
        return n
