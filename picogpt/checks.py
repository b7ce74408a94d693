"""The checks of settings a user gives, with one wording for each kind of mistake.

Owns `whole_number`, `number` and `text`: each returns the value when it is right and raises
PicoGPTError when it is not, saying which setting, the value given, what is allowed and, where
it helps, what the setting does. The library's functions, both commands and the explore page's
server all check with these, so a value is refused with the same sentence wherever it is typed.
No I/O.
"""

import math

from .errors import PicoGPTError


def whole_number(name: str, value, low: int = 0, high: int | None = None, hint: str = "") -> int:
    """value, if it is a whole number (not a bool) from low up, or from low to high."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value and (
            high is None or value <= high):
        return value
    span = f"from {low} up" if high is None else f"from {low} to {high}"
    raise PicoGPTError(f"{name}={value!r} is not a whole number {span}{hint_text(hint)}.")


def number(name: str, value, low: float, high: float | None = None, hint: str = "") -> float:
    """value, if it is a finite real number above low (and at most high, when given)."""
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if real and low < value < math.inf and (high is None or value <= high):
        return value
    span = f"above {low:g}" if high is None else f"above {low:g} and at most {high:g}"
    raise PicoGPTError(f"{name}={value!r} must be a number {span}{hint_text(hint)}.")


def text(name: str, value, hint: str = "") -> str:
    """value, if it is a non-empty text."""
    if isinstance(value, str) and value:
        return value
    raise PicoGPTError(f"{name}={value!r} is not a non-empty text{hint_text(hint)}.")


def hint_text(hint: str) -> str:
    """A hint (what the setting does, or what to do) as the end of a message."""
    return f"; {hint}" if hint else ""
