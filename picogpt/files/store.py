"""The converted store: `params/`, one memory-mapped `.npy` per tensor, written whole or not at all.

It writes and reads `models_dir/<name>/params/` (with a manifest of shapes, CRC-32s and sizes),
holds the folder lock and the JSON helpers, and writes the folder `python -m picogpt.train` makes
(`save_model`).

The files are read back and checked against their CRC-32s once, right after writing, and the
manifest records each file's stamp then: (size, mtime_ns, ctime_ns, inode). Later runs
memory-map them after comparing each file's size and header (shape, float32) with the manifest's,
and its stamp: a file whose stamp is the one recorded is as it was written (a full check of every
byte of a 1558M model took 2 s of every start: docs/performance.md). A file whose stamp changed
(a copy, a clone, a file replaced at the same size: a user cannot set ctime) is read whole and
its CRC-32 compared with the one recorded: the same bytes run, others make the store stale, so
it is converted again or refused. Reading never writes into the folder, so a copied (cp -r),
cloned or read-only folder runs as it was written, and pays that check at each start
(docs/troubleshooting.md has the cost). A run never
replaces a folder's params/ with half of a new one: a new one is written beside it and swapped in
with a rename.
The manifest also records, for each tensor, whether its numbers are all finite (no NaN, no
infinity), checked as it is written, so a start reads that instead of every weight; a store
written before it recorded that is checked at each start (reading never writes, so the record is
not added then).

Only regular files are opened (after following symlinks): a FIFO or a device where a file of
the store or a JSON file is expected would block a run forever, so it counts as unreadable (and
one where picogpt writes, such as .lock, is refused in one line).
"""

import contextlib
import json
import os
import shutil
import stat
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import PicoGPTError, _, reason
from ..kinds import kind_of
from .params import finite, flatten

# Version of params/. 2 stores linear weights column-major: the same [n_in, n_out] shape and
# values, but x @ w then runs OpenBLAS's faster dot-product kernel (docs/performance.md). 3
# recorded each file's size and modification time, checked at start instead of every byte; a
# copy changes the times, so 4 records sizes, and the checkpoint by its index's CRC-32. Format 3
# folders still load, by their sizes.
PARAMS_FORMAT = 4
READABLE_FORMATS = (3, 4)
# the checkpoint files params/ is built from: when they change, params/ is stale
SOURCE_FILES = ("model.ckpt.data-00000-of-00001", "model.ckpt.index")


def regular(path: Path) -> bool:
    """Whether path is a regular file once symlinks are followed (a Hugging Face snapshot's
    files are symlinks into its blobs): never a FIFO, a socket or a device, which would block
    the read, or a folder."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # missing, a dangling link, a NUL in the name
        return False


def refuse_unless_regular(path: Path) -> None:
    """Raise if something other than a regular file stands at path (a FIFO, which would block
    the open forever, a socket, a device, a folder, a dangling symlink); nothing there is fine:
    picogpt is about to write it."""
    if os.path.lexists(path) and not regular(path):
        raise PicoGPTError(_("{file} is not a regular file (a FIFO, a socket, a device, a folder "
                             "or a broken symlink); delete it and run again.").format(file=path))


def read_json(path: Path) -> Any:
    """The JSON at path, or None if it is absent, not a regular file, or unreadable (JSON
    nested deeper than Python's recursion limit, "[" * 100000, is unreadable too)."""
    if not regular(path):
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at path (after symlinks), at most limit of them: a FIFO, a
    device (/dev/zero, /dev/urandom) or a folder is refused before a byte is read, and so is a
    file larger than limit, in one line each. OSError when it cannot be opened at all."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never blocks
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PicoGPTError(_("{file} is not a regular file (a FIFO, a device or a folder); "
                                 "give a text file.").format(file=path))
        data = file.read(limit + 1)  # a file that grew since: the bytes tell, not the size
    if len(data) > limit:
        raise PicoGPTError(_("{file} holds more than {mb} MB, more than picogpt reads as a text "
                             "or a prompt; give a smaller file.").format(file=path,
                                                                         mb=limit >> 20))
    return data


def write_json_atomic(path: Path, value: Any) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(value, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # a full disk, Ctrl-C: no half-written file is left behind
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def model_lock(model_dir: Path):
    """Hold an exclusive lock on model_dir while downloading into it or writing params/."""
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        refuse_unless_regular(model_dir / ".lock")
        lock = open(model_dir / ".lock", "a")
    except OSError as e:
        raise PicoGPTError(_("cannot write to {folder}: {reason}. Choose a folder you can write "
                             "with --models_dir.").format(folder=model_dir, reason=reason(e))
                           ) from None
    with lock:
        try:
            import fcntl  # POSIX only; without it concurrent runs are not serialised
        except ImportError:
            yield
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            tqdm.write(_("waiting for another picogpt that is writing to {folder} ...").format(
                folder=model_dir), file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def source_stamps(model_dir: Path) -> dict[str, dict[str, int]] | None:
    """What identifies the checkpoint params/ is built from, or None once its files are deleted:
    the data file's size, and the index's size and CRC-32. The index (a few KB) lists
    each tensor's offset, size and checksum in the data file, so another checkpoint of the same
    shape has another index; and a copy keeps every byte of it."""
    if not all((model_dir / name).is_file() for name in SOURCE_FILES):
        return None
    data, index = (model_dir / name for name in SOURCE_FILES)
    return {data.name: {"size": data.stat().st_size},
            index.name: {"size": index.stat().st_size, "crc32": zlib.crc32(index.read_bytes())}}


def built_from(recorded: dict | None, source: dict | None) -> bool:
    """Whether params/, whose manifest recorded the checkpoint as recorded, was built from the
    checkpoint now in its folder (source, from source_stamps); a deleted checkpoint leaves
    params/ as all there is."""
    if source is None or recorded == source:
        return True
    if not isinstance(recorded, dict) or any(isinstance(s, dict) for s in recorded.values()):
        return False
    # format 3: [size, modification time] each; the time is whatever the last copy left
    return {name: s[0] for name, s in recorded.items()} == {
        name: s["size"] for name, s in source.items()}


def file_stamp(path: Path) -> list[int]:
    """What tells a file apart from one put in its place: (size, mtime_ns, ctime_ns, inode). A
    copy or a replacement changes ctime and the inode, which no user sets back."""
    info = path.stat()
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def file_size(meta: dict) -> int:
    """The size the manifest records for a tensor's file (format 3: its stamp's first half)."""
    return meta["size"] if "size" in meta else meta["stamp"][0]


def crc32(array: np.ndarray) -> int:
    """CRC-32 of an array's bytes in memory order (row- or column-major alike)."""
    return zlib.crc32(array.ravel(order="K"))


def read_params(model_dir: Path) -> dict[str, np.ndarray] | None:
    """The stored tensors by flat name, memory-mapped, or None if params/ is absent, stale
    (its checkpoint changed) or damaged. Nothing is written, so a read-only folder loads."""
    # Mapped, not read: mapped files cost nothing to open and share the page cache; copies in
    # memory decode a little faster but cost more at every start (docs/performance.md)
    params_dir = model_dir / "params"
    manifest = read_json(params_dir / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        return None
    arrays = {}
    try:
        if not built_from(manifest.get("source"), source_stamps(model_dir)):
            return None
        for name, meta in manifest["tensors"].items():
            file = params_dir / f"{name}.npy"
            if not regular(file) or file.stat().st_size != file_size(meta):  # cut short,
                return None  # grown, or not a file at all (a FIFO would block the load)
                return None
            array = np.asarray(np.load(file, mmap_mode="r"))
            if list(array.shape) != meta["shape"] or array.dtype != np.float32:
                return None
            if file_stamp(file) != meta.get("file_stamp") and crc32(array) != meta["crc32"]:
                return None  # changed since it was written, at the same size
            arrays[name] = array
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):  # malformed
        return None
    return arrays or None


def write_params(model_dir: Path, named_arrays, source) -> dict[str, np.ndarray]:
    """Write (flat name, array) pairs as model_dir/params/, whole or not at all; read it back."""
    params_dir = model_dir / "params"
    tmp_dir = model_dir / f"params.tmp-{os.getpid()}"
    for stale in model_dir.glob("params.*"):  # left by a run that was killed mid-way
        shutil.rmtree(stale, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    try:
        tensors = write_tensors(named_arrays, tmp_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    write_json_atomic(tmp_dir / "manifest.json", {"format": PARAMS_FORMAT, "tensors": tensors,
                                                  "source": source})
    if params_dir.exists():  # readers that mapped the old files keep them until they exit
        params_dir.rename(model_dir / f"params.old-{os.getpid()}")
    tmp_dir.rename(params_dir)
    shutil.rmtree(model_dir / f"params.old-{os.getpid()}", ignore_errors=True)
    arrays = read_params(model_dir)
    assert arrays is not None, "params/ was just written"
    return arrays


def write_tensors(named_arrays, out_dir: Path) -> dict[str, dict]:
    """Write each (name, array) as out_dir/<name>.npy, read it back, check its CRC-32."""
    tensors = {}
    for name, array in named_arrays:
        if name.endswith(".w"):  # see PARAMS_FORMAT
            array = np.asfortranarray(array)
        file = out_dir / f"{name}.npy"
        np.save(file, array)
        written = np.load(file, mmap_mode="r")  # what later runs will map, byte for byte
        checksum = crc32(array)
        if crc32(written) != checksum:
            raise PicoGPTError(_("{file} does not read back as written (disk full or failing?); "
                                 "free some space and run again.").format(file=file))
        tensors[name] = {"shape": list(array.shape), "crc32": checksum,
                         "size": file.stat().st_size, "finite": finite(array),
                         "file_stamp": file_stamp(file)}
    return tensors


def first_not_finite(model_dir: Path, arrays: dict[str, np.ndarray]) -> str | None:
    """The first tensor of model_dir's params/ (as read_params gave arrays) that holds NaN or
    infinity, or None: as the manifest records it, written with each tensor. A store written
    before it recorded that is checked here, one pass over its weights (docs/troubleshooting.md
    has the cost), at each start: reading never writes into the folder."""
    manifest = read_json(model_dir / "params" / "manifest.json")
    tensors = manifest["tensors"] if isinstance(manifest, dict) else {}
    checked = {name: finite(arrays[name]) for name, meta in tensors.items()
               if "finite" not in meta and name in arrays}
    return next((name for name, meta in tensors.items()
                 if not meta.get("finite", checked.get(name, True))), None)


def save_model(model_dir: Path, hparams: dict[str, int], params: dict, vocab_dir: Path | None,
               extra: dict[str, Any] | None = None) -> None:
    """Write a new model folder that loads like a converted download: hparams.json, GPT-2's
    encoder.json and vocab.bpe from vocab_dir (unless it is None), params/ (no TensorFlow
    checkpoint), and each of extra as a file of that name: a str as text, anything else as
    JSON. It appears whole or not at all, and never in place of a folder that exists."""
    tmp = model_dir.with_name(f".{model_dir.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True)
        for name in ("encoder.json", "vocab.bpe") if vocab_dir is not None else ():
            shutil.copyfile(vocab_dir / name, tmp / name)
        write_json_atomic(tmp / "hparams.json", kind_of(hparams).saved(hparams))
        write_params(tmp, flatten(params).items(), source=None)
        for name, value in (extra or {}).items():
            if isinstance(value, str):  # a vocabulary's text file, such as vocab.txt
                (tmp / name).write_text(value, encoding="utf-8")
            elif isinstance(value, bytes):  # a Hugging Face model.safetensors
                (tmp / name).write_bytes(value)
            else:
                write_json_atomic(tmp / name, value)
        if model_dir.exists():  # made while this run worked: it is someone else's now
            raise FileExistsError(17, "File exists", str(model_dir))
        tmp.rename(model_dir)
    except OSError as e:
        raise PicoGPTError(_("cannot write the model to {folder}: {reason}. Choose another "
                             "--name or --models_dir.").format(folder=model_dir,
                                                               reason=reason(e))) from None

    finally:
        shutil.rmtree(tmp, ignore_errors=True)
