"""Every network access of picogpt: OpenAI's seven files for a size into models_dir, and an
archive of a corpus (files/unpack.py unpacks it).

It fetches a file with retries, resumes with Range where the server allows it, and moves a `.part`
file into place only when it is complete. `fetch` does that for any file and raises what went
wrong; each caller turns that into its own advice.
"""

import os
import time
from pathlib import Path

from tqdm import tqdm

from ..errors import PicoGPTError, _, reason
from .store import model_lock, read_json, refuse_unless_regular, write_json_atomic

BASE_URL = "https://openaipublic.blob.core.windows.net/gpt-2/models"
FILES = ("checkpoint", "encoder.json", "hparams.json", "model.ckpt.data-00000-of-00001",
         "model.ckpt.index", "model.ckpt.meta", "vocab.bpe")
RETRIES = 4  # tries after the first, for resets, time-outs and 5xx answers
DOWNLOAD_CHUNK = 1 << 20  # bytes per read while streaming a file


def download_url(model_size: str, base_url: str | None) -> str:
    """Where a size's files are: base_url, else $PICOGPT_BASE_URL, else OpenAI's address."""
    return f"{mirror(base_url) or BASE_URL}/{model_size}"


def mirror(base_url: str | None) -> str | None:
    """The mirror a download is pointed at: base_url, else $PICOGPT_BASE_URL, else None."""
    base_url = base_url or os.environ.get("PICOGPT_BASE_URL")
    if base_url is None:
        return None
    if not base_url.startswith(("http://", "https://")):
        raise PicoGPTError(_("{url} is not a download address: give --base_url (or "
                             "PICOGPT_BASE_URL) as http://... or https://...").format(
                                 url=repr(base_url)))
    return base_url.rstrip("/")


def download_missing(model_dir: Path, url: str, names=FILES, **retry) -> None:
    """Download into model_dir those of names (the seven files) that are missing or damaged."""
    if missing_files(model_dir, names):
        with model_lock(model_dir):  # another process may be downloading the same size
            for name in missing_files(model_dir, names):  # it may have fetched some meanwhile
                download_file(f"{url}/{name}", model_dir / name, **retry)


def missing_files(model_dir: Path, names=FILES) -> list[str]:
    """Files of names that are absent, or no longer the size they were downloaded at."""
    sizes = read_json(model_dir / "download.json") or {}  # files placed by hand are not listed
    paths = {name: model_dir / name for name in names}
    return [name for name, path in paths.items()
            if not path.is_file() or path.stat().st_size != sizes.get(name, path.stat().st_size)]


def download_file(url: str, path: Path, timeout: float = 30.0, backoff: float = 1.0) -> None:
    """Stream url to path; a file appears at path only once all of it has arrived."""
    part = path.with_name(path.name + ".part")
    try:
        fetch(url, path, timeout, backoff)
    except KeyboardInterrupt:  # the CLI prints this and exits 130
        raise KeyboardInterrupt(_("download stopped; {part} is kept, and the next run "
                                  "resumes it.").format(part=part)) from None
    except Refused as e:
        if e.status == 404:
            raise PicoGPTError(_("{url} does not exist (HTTP 404): check --model_size and the "
                                 "download address (--base_url or PICOGPT_BASE_URL).").format(
                                     url=url)) from None
        raise PicoGPTError(_("{url} answered HTTP {status}: check the download address "
                             "(--base_url or PICOGPT_BASE_URL).").format(
                                 url=url, status=e.status)) from None
    except Unreachable as e:
        raise PicoGPTError(_(
            "could not download {url} ({reason}; {tries}). If you are offline, copy the "
            "seven files ({files}) into {folder}/ by hand; a partial download resumes "
            "when you run again.").format(url=url, reason=e.reason, tries=e.tries,
                                          files=", ".join(FILES), folder=path.parent)
        ) from None
    except CannotWrite as e:
        raise PicoGPTError(_("cannot write {file}: {reason}. Free some disk space or choose "
                             "another --models_dir.").format(file=part, reason=e.reason)
                           ) from None
    sizes = read_json(path.parent / "download.json") or {}
    write_json_atomic(path.parent / "download.json", {**sizes, path.name: path.stat().st_size})


def fetch(url: str, path: Path, timeout: float = 30.0, backoff: float = 1.0,
          limit: int | None = None) -> None:
    """Stream url to path (through path.part), asking again after resets, time-outs and 5xx
    answers; raises Refused, Unreachable or CannotWrite for the caller to explain."""
    # requests is imported where a download needs it: importing it cost every run ~7.5 MiB of
    # resident memory, and most runs find their files on disk
    import requests

    part = path.with_name(path.name + ".part")  # a killed download leaves only this behind
    for attempt in range(RETRIES + 1):
        try:
            receive(url, part, timeout, limit)
            break
        except requests.exceptions.InvalidURL:
            raise PicoGPTError(_("{url} is not a valid address: check --base_url (or "
                                 "PICOGPT_BASE_URL).").format(url=url)) from None
        except (requests.ConnectionError, requests.Timeout, IncompleteError, ServerError) as e:
            why = why_it_failed(e, timeout)
            if attempt == RETRIES or why == offline():  # waiting will not bring a network back
                tries = (_("1 try") if attempt == 0 else _("{n} tries").format(n=attempt + 1))
                raise Unreachable(why, tries) from None
            time.sleep(backoff * 2**attempt)
    os.replace(part, path)


def offline() -> str:
    """The reason why_it_failed gives when the network is not there at all."""
    return _("the host name does not resolve")


def why_it_failed(error: Exception, timeout: float) -> str:
    """A few words on a failed request, instead of requests' nested exception text."""
    import requests  # as in fetch

    if isinstance(error, requests.Timeout):
        return _("no answer within {seconds} s").format(seconds=f"{timeout:g}")
    if isinstance(error, requests.ConnectionError):
        text = str(error)
        if "NameResolution" in text or "resolve" in text or "not known" in text:
            return offline()
        return _("connection refused") if "refused" in text.lower() else _("connection failed")
    return str(error)  # IncompleteError and ServerError messages are short already


class IncompleteError(Exception):
    """The server closed, or went quiet, before sending all the bytes it announced."""


class ServerError(Exception):
    """The server answered 5xx: worth asking again."""


class Refused(Exception):
    """The server answered 4xx (416 only to a request that asked for no range): asking again
    will not help."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class Unreachable(Exception):
    """Every try failed: reason (a few words, why_it_failed's) and tries ("5 tries")."""

    def __init__(self, reason: str, tries: str):
        super().__init__(reason, tries)
        self.reason, self.tries = reason, tries


class CannotWrite(Exception):
    """The .part file could not be written: reason is the system's (a full disk)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def receive(url: str, part: Path, timeout: float, limit: int | None = None) -> None:
    """Add to part what the server has beyond it (all of it if it ignores Range), refusing a
    file of more than limit bytes."""
    import requests  # as in fetch

    refuse_unless_regular(part)  # a FIFO would block the open below forever
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with requests.get(url, stream=True, timeout=timeout, headers=headers) as response:
        if response.status_code == 416 and not have:  # nothing was asked for: the server's
            raise Refused(416)  # mistake, and asking again will not mend it
        if response.status_code == 416:  # part already holds the whole file or more: start over
            part.unlink()
            raise IncompleteError(_("{file} did not match the server's file").format(
                file=part.name))

        if response.status_code >= 500:
            raise ServerError(_("the server answered HTTP {status}").format(
                status=response.status_code))
        if response.status_code >= 400:
            raise Refused(response.status_code)
        resumed = response.status_code == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            part.unlink(missing_ok=True)  # resumed elsewhere than asked (or than byte 0, when
            # nothing was asked): start again from byte 0
            raise IncompleteError(_("the server resumed at the wrong place"))
        start = have if resumed else 0  # a 200 answer is the whole file, Range or not
        length = response.headers.get("Content-Length")
        total = start + int(length) if length is not None else None
        if limit is not None and total is not None and total > limit:
            raise too_large(url, limit)
        name = part.name.removesuffix(".part")
        if total is None:  # sent in chunks (as GitHub sends archives): bytes so far, no total
            name = _("{name} (the server gives no length: no total)").format(name=name)
        try:
            with open(part, "ab" if resumed else "wb") as f, tqdm(
                    desc=name, total=total, initial=start, unit="B", unit_scale=True,
                    unit_divisor=1024, leave=False) as bar:
                for chunk in response.iter_content(DOWNLOAD_CHUNK):
                    bar.update(f.write(chunk))
                    if limit is not None and f.tell() > limit:
                        break
        except requests.exceptions.ChunkedEncodingError:  # dropped mid-body
            raise IncompleteError(_("the connection dropped mid-file")) from None
        except requests.ConnectionError:  # requests' name for a read time-out mid-body
            raise IncompleteError(_("the server sent nothing for {seconds} s mid-file").format(
                seconds=f"{timeout:g}")) from None
        except OSError as e:  # after requests' errors: they are OSErrors too
            raise CannotWrite(reason(e)) from None
    size = part.stat().st_size
    if limit is not None and size > limit:
        part.unlink()
        raise too_large(url, limit)
    if total is not None and size != total:
        raise IncompleteError(_("the server sent {size} of {total} bytes").format(
            size=size, total=total))



def too_large(url: str, limit: int) -> PicoGPTError:
    """The error for a server that sends (or announces) more than limit bytes."""
    return PicoGPTError(_("{url} sends more than {mb} MB, far more than the file it should be; "
                          "check the download address (--base_url or PICOGPT_BASE_URL).").format(
                              url=url, mb=limit >> 20))
