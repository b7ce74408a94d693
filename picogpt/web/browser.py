"""Opening the explore page in the user's browser without telling other users its secret.

A browser's command line is readable by every local user (ps), and the page's address carries
the secret that guards the server. So the browser is given a file that only this user can read,
in a folder only this user can open, which leads to the address, as Jupyter does. The file
is written before the browser starts and removed when the server stops.
"""

import os
import shutil
import tempfile
import threading
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path

REDIRECT = """<!DOCTYPE html>
<meta charset="utf-8"><meta http-equiv="refresh" content="0; url={url}">
<title>picogpt</title><p><a href="{url}">picogpt --explore</a></p>
"""


@contextmanager
def browser_opened(url: str) -> Iterator[None]:
    """Open url in a browser through a private file that leads to it; the file goes when the
    block ends."""
    folder = tempfile.mkdtemp(prefix="picogpt-")  # mode 0700
    path = os.path.join(folder, "explore.html")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w",
              encoding="utf-8") as f:
        f.write(REDIRECT.format(url=escape(url, quote=True)))
    threading.Thread(target=webbrowser.open, args=(Path(path).as_uri(),), daemon=True).start()
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
