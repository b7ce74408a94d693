"""What a user is told when something they gave is wrong, in their language.

`PicoGPTError` is a problem the user can fix; the command line prints it as one line and exits
with 1. `whole_number`, `number` and `text` check a setting and raise it with one wording for each
kind of mistake, wherever the setting is typed. `_` looks a sentence up in the message catalog
(picogpt/locale), in the language of `language()`: the locale's, or the one a page or
`--lang` chose for the moment (`speaking`). `reason` says why a file or a port could not be used
(an OSError and the like) in that language too.
"""

import contextlib
import contextvars
import errno
import gettext
import json
import math
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

LOCALE = Path(__file__).parent / "locale"
LANGUAGES = ("en", "zh")
chosen = contextvars.ContextVar("language", default=None)  # set by speaking(), else the locale


class PicoGPTError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""


def locale_language() -> str:
    """zh when the environment's locale is Chinese (as gettext reads it), else en."""
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        if os.environ.get(name):
            return "zh" if os.environ[name].lower().startswith("zh") else "en"
    return "en"


def language() -> str:
    """The language messages are in now: en or zh."""
    return chosen.get() or locale_language()


@contextlib.contextmanager
def speaking(lang: str) -> Iterator[None]:
    """Messages in lang (en or zh) inside the block: a page's language, or --lang."""
    token = chosen.set(lang)
    try:
        yield
    finally:
        chosen.reset(token)


@cache
def catalog(lang: str) -> gettext.NullTranslations:
    """The compiled catalog for lang; English is the message ids themselves."""
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation("picogpt", LOCALE, languages=["zh_CN"], fallback=True)


def _(message: str) -> str:
    """message in the current language (the English text is the message id)."""
    return catalog(language()).gettext(message)


def whole_number(name: str, value, low: int = 0, high: int | None = None, hint: str = "") -> int:
    """value, if it is a whole number (not a bool) from low up, or from low to high."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value and (
            high is None or value <= high):
        return value
    span = (_("from {low} up") if high is None else _("from {low} to {high}")).format(
        low=low, high=high)
    raise PicoGPTError(_("{name}={value} is not a whole number {span}{hint}.").format(
        name=name, value=repr(value), span=span, hint=hint_text(hint)))


def number(name: str, value, low: float, high: float | None = None, hint: str = "") -> float:
    """value, if it is a finite real number above low (and at most high, when given)."""
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if real and low < value < math.inf and (high is None or value <= high):
        return value
    span = (_("above {low}") if high is None else _("above {low} and at most {high}")).format(
        low=f"{low:g}", high=f"{high:g}" if high is not None else "")
    raise PicoGPTError(_("{name}={value} must be a number {span}{hint}.").format(
        name=name, value=repr(value), span=span, hint=hint_text(hint)))


def text(name: str, value, hint: str = "") -> str:
    """value, if it is a non-empty text."""
    if isinstance(value, str) and value:
        return value
    raise PicoGPTError(_("{name}={value} is not a non-empty text{hint}.").format(
        name=name, value=repr(value), hint=hint_text(hint)))


def hint_text(hint: str) -> str:
    """A hint (what the setting does, or what to do) as the end of a message."""
    return _("; {hint}").format(hint=hint) if hint else ""


def N_(message: str) -> str:
    """Mark message for the catalog; it is translated where it is shown (gettext's N_)."""
    return message


# The operating system's reasons people meet most, by errno, with the system's English words as
# the message ids; for any other errno the system's own (English) words are shown
OS_REASONS = {
    errno.ENOENT: N_("No such file or directory"),
    errno.EACCES: N_("Permission denied"),
    errno.EPERM: N_("Operation not permitted"),
    errno.EEXIST: N_("File exists"),
    errno.EISDIR: N_("Is a directory"),
    errno.ENOTDIR: N_("Not a directory"),
    errno.ENOTEMPTY: N_("Directory not empty"),
    errno.ENOSPC: N_("No space left on device"),
    errno.EROFS: N_("Read-only file system"),
    errno.ENAMETOOLONG: N_("File name too long"),
    errno.EBUSY: N_("Device or resource busy"),
    errno.EIO: N_("Input/output error"),
    errno.EMFILE: N_("Too many open files"),
    errno.EADDRINUSE: N_("Address already in use"),
    errno.EADDRNOTAVAIL: N_("Cannot assign requested address"),
    errno.ECONNREFUSED: N_("Connection refused"),
    errno.ECONNRESET: N_("Connection reset by peer"),
    errno.ETIMEDOUT: N_("Connection timed out"),
    errno.ENETUNREACH: N_("Network is unreachable"),
}


def reason(error: BaseException) -> str:
    """Why error happened, in the current language, for the middle of a message: the reason of
    the OSError it is or comes from (by its errno; the system's English words for an errno not
    in OS_REASONS), a text that is not UTF-8, JSON that is not JSON; else a PicoGPTError's own
    message, or any other error's class name and first line, as Python names them."""
    cause, seen = error, []
    while cause is not None and cause not in seen:  # error, then what it was raised from
        if isinstance(cause, OSError) and cause.strerror:
            known = OS_REASONS.get(cause.errno)
            return _(known) if known else cause.strerror
        if isinstance(cause, UnicodeDecodeError):
            return _("byte {at} is {byte}, not UTF-8").format(
                at=cause.start, byte=f"0x{cause.object[cause.start]:02x}")
        if isinstance(cause, json.JSONDecodeError):
            return _("it is not JSON at line {line}, column {column}").format(
                line=cause.lineno, column=cause.colno)
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, PicoGPTError):
        return str(error)
    first = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__

