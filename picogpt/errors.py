"""The one exception type for problems a user can fix.

Owns `PicoGPTError`. Does nothing else: the CLI turns it into a one-line message and exit code 1.
"""


class PicoGPTError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""
