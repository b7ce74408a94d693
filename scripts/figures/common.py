"""What the figure programs share: one colour map per kind of matrix, token labels, and saving a
picture with the command that made it.

Every picture in docs/ carries, in its PNG text chunk "Source", the command that wrote it
(tests/test_scripts.py checks that the command's program exists and that the doc showing the
picture names it). Matplotlib draws them: `pip install ".[test,figures]"`.
"""

import struct
import sys
import zlib
from pathlib import Path

import numpy as np

# the same matrix always in the same colours
SIMILARITY = {"cmap": "RdBu_r", "vmin": -1, "vmax": 1}  # cosine similarity of positions
ATTENTION = {"cmap": "Blues", "vmin": 0, "vmax": 1}  # attention weights
SCORES = {"cmap": "Blues", "vmin": 0, "vmax": 1}  # head scores


def command() -> str:
    """The command line of the running figure program, as a reader would type it."""
    module = Path(sys.argv[0]).with_suffix("").relative_to(Path(__file__).parents[2])
    return " ".join(["python -m", ".".join(module.parts), *sys.argv[1:]])


def save(figure, path: Path, source: str | None = None) -> None:
    """Save a matplotlib figure as PNG with the command that made it in its "Source" chunk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight", metadata={"Source": source or command()})


def stamp(path: Path, source: str | None = None) -> None:
    """Add the "Source" text chunk to a PNG some other program wrote (a browser's screenshot)."""
    data = path.read_bytes()
    text = b"Source\0" + (source or command()).encode("latin-1", "replace")
    chunk = (struct.pack(">I", len(text)) + b"tEXt" + text
             + struct.pack(">I", zlib.crc32(b"tEXt" + text)))
    end = 8 + 25  # the 8-byte signature, then IHDR: 4 length + 4 type + 13 data + 4 CRC
    path.write_bytes(data[:end] + chunk + data[end:])


def source(path: Path) -> str | None:
    """The "Source" text chunk of a PNG, or None."""
    data, at = path.read_bytes(), 8
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, value = data[at + 8 : at + 8 + length].partition(b"\0")
            if key == b"Source":
                return value.decode("latin-1")
        at += 12 + length
    return None


def token_labels(encoder, ids) -> list[str]:
    """Each token's text for an axis: visible escapes, bytes of part of a character."""
    from picogpt.show import shown

    return [shown(encoder, i) or " " for i in ids]


def heatmap(axes, matrix: np.ndarray, labels: list[str] | None, colours: dict, title: str,
            colour_bar: bool = True):
    """A matrix as a picture, tokens on both axes if labels are given."""
    image = axes.imshow(matrix, interpolation="nearest", **colours)
    axes.set_title(title, fontsize=10)
    if labels is not None:
        axes.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        axes.set_yticks(range(len(labels)), labels, fontsize=7)
    if colour_bar:
        axes.figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    return image


def use_language(language: str) -> None:
    """Draw the next pictures' text in a font for `language`: "en", or "zh" (Noto Sans CJK SC,
    Debian's fonts-noto-cjk; without it matplotlib would draw each Chinese character as a box)."""
    import matplotlib
    from matplotlib import font_manager

    if language == "zh":
        names = {font.name for font in font_manager.fontManager.ttflist}
        if "Noto Sans CJK SC" not in names:
            raise SystemExit("Chinese labels need a CJK font: apt-get install fonts-noto-cjk")
        matplotlib.rcParams["font.family"] = ["Noto Sans CJK SC", "DejaVu Sans"]
    else:
        matplotlib.rcParams["font.family"] = ["DejaVu Sans"]
