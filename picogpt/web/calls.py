"""The --explore server's API calls: which computation runs when, and on which text.

It decides the order of a session's calls; server.py does the web side and session.py the
computing:

- one computation runs at a time, and a request of a kind that a newer one of the same kind has
  replaced is answered as superseded instead of computed (`stop` supersedes a generation, which
  ends before its next token);
- the inside views, the one long computation (a second on 124M), run beside that one rather
  than under its lock (they read the params and a copy of the ids, never the cache), one at a
  time; at the logit lens's next row they let a call that runs the model finish first, and stop
  as superseded once the text changed or a newer call for them came;
- the text has a version, and a page that sends the version it last saw is refused (409,
  "changed") when another page has changed the text since: a second tab never silently
  changes what the first one shows;
- a text is tokenized outside that lock, one at a time, and a prompt that a newer one from the
  same page has replaced is not tokenized at all (BPE's time grows with the square of a word's
  length: six key presses on an 8,000-letter word would each tokenize it);
- a bug in a call is said on the page and in the terminal, and the server keeps answering.
"""

import traceback

from ..errors import PicoGPTError, _
from . import gate
from .gate import settings
from .session import Session


class Superseded(Exception):
    """A computation whose answer a newer request has made useless."""


class Calls:
    """The API calls of server.py's Handler, which supplies server, answer, refuse and stream."""

    def changed_elsewhere(self, version: int | None, page: str) -> bool:
        """Whether another page changed the text after the version this page last saw."""
        return version is not None and any(writer != page
                                           for writer in self.server.writers[version:])

    def call(self, kind: str, body: dict, number: int, key: tuple[str, str]) -> None:
        """Run one API call with the session, unless a newer one of its kind from the same
        page came first."""
        session, prompt_ids = self.server.session, None

        def stale() -> bool:
            return self.server.latest.get(key, number) > number

        if kind == "text":  # tokenized before the lock: a long word's BPE holds up no one
            try:
                prompt = gate.prompt(body.get("prompt", ""), session.n_ctx)
                with self.server.tokenizing:  # one at a time: a newer prompt waits, then
                    if stale():  # the ones it replaced while it waited are skipped
                        self.answer(204)
                        return
                    prompt_ids = session.prompt_ids(prompt)
            except (gate.Refused, PicoGPTError) as e:
                self.refuse(getattr(e, "status", 400), str(e))
                return
        if kind == "inside":
            self.inside(session, body, stale, key[0])
            return
        with self.server.lock:
            if stale():
                self.answer(204)
                return
            if kind != "state" and self.changed_elsewhere(body.get("version"), key[0]):
                self.answer(409, {"changed": True, "error": _("another page changed the text")})
                return
            ids = session.ids
            try:
                if kind == "generate":
                    self.stream(session, body, stale, ids, key[0])
                    return
                value = self.compute(session, kind, body, prompt_ids)
                if session.ids != ids:
                    self.server.writers.append(key[0])
                if "tokens" in value:
                    value["version"] = len(self.server.writers)
            except Superseded:
                self.answer(204)
                return
            except PicoGPTError as e:
                self.refuse(400, str(e))
                return
            except (ConnectionError, TimeoutError):  # the client left: handle_error lets it go
                raise
            except Exception as e:  # a bug: said on the page and in the terminal, served on
                self.refuse(500, bug(e))
                return
        self.answer(200, value)

    def inside(self, session: Session, body: dict, stale, page: str) -> None:
        """The inside views, outside the session's lock: a slider is answered while they
        compute. At each of the logit lens's rows they let a call that runs the model (a key, a
        step) finish first, since its matrix products would otherwise wait behind the lens's,
        and stop as superseded once the text changed or a newer call for them came."""
        with self.server.lock:  # the text as it is between two calls
            if stale():
                self.answer(204)
                return
            if self.changed_elsewhere(body.get("version"), page):
                self.answer(409, {"changed": True, "error": _("another page changed the text")})
                return
            ids = session.ids

        def pause() -> None:
            with self.server.lock:  # after the call that holds it, if any
                pass
            if stale() or session.ids != ids:
                raise Superseded

        with self.server.inside:
            try:
                pause()  # a newer call may have come while this one waited for the last
                value = session.inside(pause)
            except Superseded:
                self.answer(204)
                return
            except Exception as e:  # a bug, as in call
                self.refuse(500, bug(e))
                return
        self.answer(200, value)

    def compute(
self, session: Session, kind: str, body: dict,
                prompt_ids: list[int] | None) -> dict:
        """The JSON answer of one call that is neither a stream nor the inside views (the
        text's ids come tokenized)."""
        sampling = settings(body, session.n_vocab)  # before the text changes
        form = gate.form(body, session)
        if kind == "state":
            state = session.state()
        elif kind == "text":
            state = session.set_typed(prompt_ids)
        elif kind == "append":
            state = session.append(body.get("token"), form)
        elif kind == "draw":
            state = session.draw(sampling, body.get("seed", 0), form)
        elif kind == "back":
            state = session.back()
        else:
            state = {}
        try:
            return {**state, "next": session.next(sampling, form)}
        except PicoGPTError as e:  # a text that breaks the form: the text stands, no candidates
            if kind == "next":
                raise
            return {**state, "refused": str(e)}


def bug(error: Exception) -> str:
    """What the page says of a bug; its traceback goes to the terminal."""
    traceback.print_exc()
    return _("picogpt hit a bug ({error}); the terminal has the details.").format(
        error=repr(error))

