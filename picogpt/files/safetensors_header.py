"""The header of a safetensors file, read and checked: the one reader of it, for GPT-2's Hugging
Face folders (hf.py) and the LLaMA kind's (llama_hf.py). A header is hostile input: its sizes
and offsets are checked against the file before any tensor is read. Also the one writer, for the
model.safetensors a --model llama run keeps (float32 tensors only)."""

import json
import math
from pathlib import Path

import numpy as np

from ..errors import PicoGPTError, _

DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}  # what becomes float32
MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header's size
LFS_POINTER = b"version https://git-lfs"  # how a Git LFS pointer file begins


def safetensors_header(file: Path) -> dict[str, tuple[str, int, tuple[int, ...]]]:
    """Each tensor's dtype, where its bytes start in the file, and its shape, checked against
    the file: an 8-byte little-endian header size, a JSON header of name -> {dtype, shape,
    data_offsets}, then the tensors' bytes (offsets count from the end of the header)."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        start = f.read(max(8, len(LFS_POINTER)))
        if start.startswith(LFS_POINTER):
            raise PicoGPTError(_("{file} is a Git LFS pointer ({size} bytes), not the weights: "
                                 "the folder was cloned without git-lfs. Run 'git lfs install' "
                                 "and 'git lfs pull' in the folder, or download the file "
                                 "itself.").format(file=file, size=size))
        n_header = int.from_bytes(start[:8], "little")
        f.seek(8)
        raw = f.read(n_header) if 0 < n_header <= min(MAX_HEADER, size - 8) else None
    try:
        header = json.loads(raw) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # RecursionError: "[[[..."
        header = None
    if not isinstance(header, dict):
        raise PicoGPTError(_("{file} is not a safetensors file ({size} bytes, and its first 8 "
                             "bytes do not give the size of a JSON header that follows); "
                             "download or save it again.").format(file=file, size=size))
    tensors, n_data = {}, size - 8 - n_header
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = meta["dtype"], tuple(meta["shape"]), meta["data_offsets"]
            numbers = (*shape, begin, end)
            itemsize = np.dtype(DTYPES[dtype]).itemsize if dtype in DTYPES else 1
            # an empty tensor's other dimensions must fit in the file too: numpy cannot even
            # make an empty array of shape [0, 10**30]
            valid = (all(isinstance(n, int) and n >= 0 for n in numbers) and begin <= end <= n_data
                     and math.prod(n or 1 for n in shape) * itemsize <= size
                     and (dtype not in DTYPES or math.prod(shape) * itemsize == end - begin))
        except (KeyError, TypeError, ValueError):
            valid = False
        if not valid:
            raise PicoGPTError(_("{file} is truncated or damaged: tensor {key} lies outside its "
                                 "{size} bytes or does not fit its shape; download or save it "
                                 "again.").format(file=file, key=key, size=size))

        tensors[key] = (dtype, 8 + n_header + begin, shape)
    return tensors


def safetensors_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """arrays (float32) as one safetensors file: the header's size in 8 little-endian bytes, the
    JSON header (padded with spaces to a multiple of 8, as safetensors pads it), then each
    tensor's bytes in the header's order."""
    header, offset = {}, 0
    for name in sorted(arrays):
        array = arrays[name]
        assert array.dtype == np.float32, (name, array.dtype)
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return b"".join([len(raw).to_bytes(8, "little"), raw,
                     *(np.ascontiguousarray(arrays[name], "<f4").tobytes()
                       for name in sorted(arrays))])
