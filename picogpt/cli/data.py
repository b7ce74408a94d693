"""`python -m picogpt.data chinese-poetry DIR`: download a corpus picogpt's training reads.

It says what it will fetch and how large it is before it starts, and what to give --text after.
The download, the unpacking and their checks are files/unpack.py's; what chinese-poetry is (its
commit, its address, its layout) is files/chinese_poetry.py's.
"""

import sys
from pathlib import Path

from ..errors import PicoGPTError, _
from ..files.chinese_poetry import (
    ARCHIVE,
    ARCHIVE_MB,
    COMMIT,
    MAX_ARCHIVE_BYTES,
    REPOSITORY,
    UNPACKED_MB,
    archive_url,
    check_checkout,
)
from ..files.unpack import check_new, download_unpacked
from .command import ending, run_command, said

PROGRAM = "python -m picogpt.data"


def chinese_poetry(folder: str, base_url: str | None = None) -> None:
    """Download chinese-poetry (MIT: Tang and Song shi, 宋词, 诗经 ...) into a new folder, pinned
    to one commit; then train on it with python -m picogpt.train --task poems --text FOLDER.

    Args:
        folder: a new or empty folder; it appears whole once the download is unpacked, or not
            at all.
        base_url: a mirror that serves chinese-poetry-<commit>.tar.gz (else $PICOGPT_BASE_URL,
            the mirror the model downloads use, else GitHub).
    """
    url, where = archive_url(base_url), Path(folder)
    check_new(where)
    print(said(_("downloading chinese-poetry (MIT), commit {commit}, from {url}: about {mb} MB, "
                 "about {unpacked} MB once unpacked into {folder}. GitHub sends it in chunks with "
                 "no length and cannot resume, so the progress counts bytes with no total, and a "
                 "stopped download starts over.").format(
                     commit=COMMIT[:7], url=url, mb=ARCHIVE_MB, unpacked=UNPACKED_MB,
                     folder=folder)), file=sys.stderr)
    other_ways = _("Other ways to get it: git clone --depth 1 {repository} {folder}; npm pack "
                   "chinese-poetry, then tar xzf chinese-poetry-*.tgz and give its package/ "
                   "folder; or a copy of the folder from someone who has it.").format(
                       repository=REPOSITORY, folder=folder)
    n_files = download_unpacked(url, where, check_checkout, other_ways, MAX_ARCHIVE_BYTES,
                                ARCHIVE)
    print(said(_("wrote {folder} ({n} files). Train on its Tang shi: python -m picogpt.train "
                 "--task poems --text {folder}").format(folder=folder, n=n_files)),
          file=sys.stderr)


DATA = {"chinese-poetry": chinese_poetry}


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.data`: its first word names the corpus."""
    argv = sys.argv[1:] if argv is None else argv
    with ending():
        if argv[:1] in (["-h"], ["--help"]):
            print(_("usage: {program} chinese-poetry DIR [--base_url URL]; see {program} "
                    "chinese-poetry --help.").format(program=PROGRAM))
            return
        if not argv or argv[0] not in DATA:
            raise PicoGPTError(_("{program} downloads {names}; write {program} chinese-poetry "
                                 "DIR.").format(program=PROGRAM, names=", ".join(DATA)))
    name = argv[0]
    run_command(DATA[name], argv[1:], f"{PROGRAM} {name}", "folder",
                stopped=_("download stopped; nothing was kept."))
