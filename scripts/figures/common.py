"""What the figure programs share: writing a picture."""

import struct
import zlib
from pathlib import Path

import numpy as np


def write_png(path: Path, gray: np.ndarray) -> None:
    """A greyscale PNG of values in [0, 1], one byte per pixel, no library needed."""
    pixels = (np.clip(gray, 0, 1) * 255).astype(np.uint8)
    rows = b"".join(b"\0" + row.tobytes() for row in pixels)  # filter type 0 for each row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", pixels.shape[1], pixels.shape[0], 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def upscale(gray: np.ndarray, factor: int) -> np.ndarray:
    """Each value as a factor x factor square, so a small matrix is visible in a picture."""
    return np.kron(gray, np.ones((factor, factor)))
