"""A corpus's archive onto disk: downloaded (download.py's fetch), unpacked, put in place whole.

The folder asked for appears only once all of the archive is unpacked and checked; until then
the work happens beside it, in a folder whose name begins with a dot, removed whatever happens.
A folder that already holds files is never written into.

The archive is treated as hostile (a mirror, a damaged download): only its files and folders are
unpacked, never a link or a device; a name that would land outside the folder refuses the whole
archive, and so do more than MAX_MEMBERS entries, MAX_BYTES of content or a sparse member (one
that a few bytes of archive declare as gigabytes of zeros: chinese-poetry has none). The bytes
are counted as they are written, member by member, not as they are read from the download.
"""

import errno
import gzip
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from ..errors import PicoGPTError, _, reason
from .download import CannotWrite, Refused, Unreachable, fetch

MAX_MEMBERS = 100_000  # entries in an archive (chinese-poetry's has 2,285 files)
MAX_BYTES = 2 << 30  # bytes once unpacked (chinese-poetry's: about 380 MB)
CHUNK = 1 << 20  # bytes copied at a time


class BadArchive(Exception):
    """The archive cannot be unpacked safely, or is damaged: the reason, in a few words."""


def check_new(folder: Path) -> None:
    """Refuse, before any download, a folder the unpacked archive could not become: one that
    exists and holds something (or is a file), a link (dangling or not), a name that is no
    folder's (".", ".."), or one too long for the file system with the work folder's suffix."""
    name = folder.absolute().name
    if folder.is_symlink() or folder.name in ("", "..") or not name:
        raise PicoGPTError(_("{folder} is a link or not a folder's name; give the path of a new "
                             "folder, as in data/chinese-poetry.").format(folder=folder))
    try:
        taken = folder.exists() and (not folder.is_dir() or any(folder.iterdir()))
    except OSError as e:  # a folder that cannot be listed
        raise PicoGPTError(_("cannot write {folder}: {reason}.").format(
            folder=folder, reason=reason(e))) from None
    if taken:
        raise PicoGPTError(_("{folder} already exists and is not an empty folder; give a new "
                             "folder (picogpt never writes into one that holds files).").format(
                                 folder=folder))
    if len(os.fsencode(f".{name}.download-12345678")) > name_max(folder.absolute().parent):
        raise PicoGPTError(_("{folder}: the name is too long for this file system; give a "
                             "shorter one.").format(folder=folder))


def name_max(folder: Path) -> int:
    """The longest file name the file system holding folder (or its nearest existing parent)
    allows, in bytes; 255 where it cannot tell."""
    for place in (folder, *folder.parents):
        try:
            return os.pathconf(place, "PC_NAME_MAX")
        except (OSError, ValueError, AttributeError):
            continue
    return 255


def download_unpacked(url: str, folder: Path, check: Callable[[Path], None], advice: str,
                      limit: int, name: str, **retry) -> int:
    """Download the .tar.gz at url (as a file called name) and unpack it as folder, without the
    one folder the archive keeps everything in, once check(unpacked) has not raised; returns the
    files written. advice is the sentence a failed download ends with; limit bounds its bytes."""
    check_new(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.download-", dir=folder.parent))
    except OSError as e:
        raise PicoGPTError(_("cannot write {folder}: {reason}.").format(
            folder=folder.parent, reason=reason(e))) from None
    try:  # the archive cannot be resumed (GitHub's): nothing of the work is worth keeping
        received(url, work / name, advice, limit, **retry)
        return unpacked(url, work / name, work / "unpacked", folder, check)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def received(url: str, archive: Path, advice: str, limit: int, **retry) -> None:
    """fetch(url) to archive, each failure one line that ends with advice."""
    try:
        fetch(url, archive, limit=limit, **retry)
    except KeyboardInterrupt:  # the CLI prints this and exits 130
        raise KeyboardInterrupt(_("download stopped; nothing was kept.")) from None
    except Refused as e:
        raise PicoGPTError(_("{url} answered HTTP {status}. {advice}").format(
            url=url, status=e.status, advice=advice)) from None
    except Unreachable as e:
        raise PicoGPTError(_("could not download {url} ({reason}; {tries}). {advice}").format(
            url=url, reason=e.reason, tries=e.tries, advice=advice)) from None
    except CannotWrite as e:
        raise PicoGPTError(_("cannot write {file}: {reason}. Free some disk space or give a "
                             "folder on another disk.").format(file=archive, reason=e.reason)
                           ) from None


def unpacked(url: str, archive: Path, work: Path, folder: Path,
             check: Callable[[Path], None]) -> int:
    """Unpack archive into work, check it, and rename it to folder; returns its files."""
    try:
        work.mkdir()
        n_files = unpack_tar(archive, work)
        inside = list(work.iterdir())
        root = inside[0] if len(inside) == 1 and inside[0].is_dir() else work
        check(root)
        if folder.is_dir():
            folder.rmdir()  # empty (check_new); a rename cannot replace a folder everywhere
        os.replace(root, folder)
        return n_files
    except BadArchive as e:
        raise PicoGPTError(_("the download from {url} cannot be unpacked ({reason}); nothing "
                             "was written to {folder}. Run again, or check the download "
                             "address (--base_url or PICOGPT_BASE_URL).").format(
                                 url=url, reason=e, folder=folder)) from None
    except OSError as e:
        raise PicoGPTError(_("cannot write {folder}: {reason}. Free some disk space or give a "
                             "folder on another disk.").format(
                                 folder=folder, reason=reason(e))) from None


def unpack_tar(archive: Path, target: Path, max_members: int = MAX_MEMBERS,
               max_bytes: int = MAX_BYTES) -> int:
    """Unpack the files and folders of the .tar.gz archive into the folder target; returns the
    files written. Raises BadArchive for a damaged or unsafe archive."""
    n_files, budget = 0, Budget(max_bytes)
    try:
        with gzip.open(archive, "rb") as raw, tarfile.open(
                fileobj=Bounded(raw, max_bytes), mode="r|") as tar:
            for n, member in enumerate(tar):
                if n == max_members:
                    raise BadArchive(_("more than {n} entries").format(n=max_members))
                parts = safe_parts(member.name)
                if member.issparse():  # its zeros come from no bytes of the archive
                    raise BadArchive(_("it holds {name}, a sparse file").format(
                        name=repr(member.name)))
                if parts and (member.isdir() or member.isfile()):  # never a link or a device
                    n_files += unpack_member(tar, member, target.joinpath(*parts), budget)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise BadArchive(_("not a whole .tar.gz: {error}").format(
            error=reason(e))) from None
    return n_files


def safe_parts(name: str) -> list[str]:
    """The parts of an archive member's name, if it stays inside the folder it is unpacked in
    (none for the folder itself, "./")."""
    parts = [part for part in re.split(r"[/\\]", name) if part not in ("", ".")]
    if name.startswith(("/", "\\")) or ".." in parts or any(":" in part for part in parts):
        raise BadArchive(_("it holds {name}, a name outside its folder").format(name=repr(name)))
    return parts


def unpack_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path,
                  budget: "Budget") -> int:
    """Make member's folder, or write its file as a new one (never through an existing path),
    its bytes counted against budget; returns the files written."""
    try:
        if member.isdir():
            path.mkdir(parents=True, exist_ok=True)
            return 0
        path.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        with open(path, "xb") as f:
            while chunk := source.read(CHUNK):
                budget.spend(len(chunk))
                f.write(chunk)
        return 1
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        raise BadArchive(_("it holds {name} twice, or as a file and as a folder").format(
            name=repr(member.name))) from None
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        raise BadArchive(_("it holds {name}, a name too long for this file system").format(
            name=repr(member.name))) from None


class Budget:
    """The bytes an archive may write once unpacked, all its members together: spend raises
    BadArchive before the write that would pass limit."""

    def __init__(self, limit: int):
        self.limit, self.written = limit, 0

    def spend(self, n_bytes: int) -> None:
        self.written += n_bytes
        if self.written > self.limit:
            raise BadArchive(_("more than {mb} MB once unpacked").format(mb=self.limit >> 20))


class Bounded:
    """A file to read that raises BadArchive once more than limit bytes are read from it."""

    def __init__(self, file, limit: int):
        self.file, self.limit, self.read_so_far = file, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise BadArchive(_("more than {mb} MB once unpacked").format(mb=self.limit >> 20))
        return data
