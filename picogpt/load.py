"""Reading a GPT-2 from disk: checkpoint -> params, hparams, vocabulary, and the .npy cache.

Owns every read and write under `models_dir` except the download itself, which `download.py`
does (every network access is there). It must not print or touch the model math.

Layout of `models_dir/<size>/`: OpenAI's seven files, `download.json` (the byte size of each
file picogpt downloaded, to spot a file damaged later) and `params/`, the checkpoint converted
to one `.npy` per tensor with a `manifest.json` of shapes, CRC-32s, sizes and modification
times. TensorFlow is needed only to build `params/`. The files are read back and checked
against their CRC-32s once, right after writing; later runs memory-map them after comparing
each file's size and modification time with the manifest's (a full check of a 1558M model took
2 s of every start), and never import TensorFlow nor need the checkpoint files again. A file
whose size or time changed is still used if its CRC-32 matches (a copy that kept every byte).

A model that `python -m picogpt.train` wrote lives beside the sizes as `models_dir/<name>/`:
hparams.json, GPT-2's vocabulary and params/ only (`save_model`), loaded by its name.
"""

import os
import shutil
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from .download import (
    FILES,
    download_missing,
    download_url,
    model_lock,
    read_json,
    write_json_atomic,
)
from .encoder import END_OF_TEXT, Encoder
from .errors import PicoGPTError

MODEL_SIZES = ("124M", "355M", "774M", "1558M")
N_VOCAB, N_MERGES = 50257, 50000  # what GPT-2's encoder.json and vocab.bpe hold
# Version of params/: 2 stores linear weights column-major. Same [n_in, n_out] shape and values,
# but x @ w then runs OpenBLAS's dot-product kernel, which read the 124M weights at 32 GB/s
# where the row-major layout read at 26 GB/s: decode went from 45 to 49.5 tok/s. 3 records each
# file's size and modification time, checked at start instead of a CRC-32 of every byte.
PARAMS_FORMAT = 3
CHECKPOINT = ("checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index",
              "model.ckpt.meta")  # what only the conversion reads
HPARAMS = ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer")


def load_encoder_hparams_and_params(model_size: str = "124M", models_dir: str = "models",
                                    base_url: str | None = None) -> tuple[Encoder, dict, dict]:
    """Download a GPT-2 size if needed and return its (encoder, hparams, params)."""
    model_dir = Path(models_dir) / model_size
    released = model_size in MODEL_SIZES  # else a folder of one's own: picogpt.train's
    if not released and not (model_dir / "hparams.json").is_file():
        raise PicoGPTError(f"unknown model size {model_size!r}; choose one of "
                           f"{', '.join(MODEL_SIZES)}, or the name of a model folder in "
                           f"{models_dir} (python -m picogpt.train writes one).")
    arrays = read_params(model_dir)  # once converted, the checkpoint files are not needed
    if released:
        download_missing(model_dir, download_url(model_size, base_url),
                         [name for name in FILES if arrays is None or name not in CHECKPOINT])
    hparams = read_hparams(model_dir)
    encoder = read_encoder(model_dir)
    if arrays is None and not released and checkpoint_fingerprint(model_dir) is None:
        raise PicoGPTError(f"{model_dir / 'params'} is missing or damaged, and {model_dir} has "
                           f"no checkpoint to rebuild it from; train the model again.")
    if arrays is None:
        with model_lock(model_dir):
            arrays = read_params(model_dir) or build_params(model_dir)
    check_shapes(arrays, hparams, model_dir)
    return encoder, hparams, nest(arrays)


def read_hparams(model_dir: Path) -> dict[str, int]:
    """hparams.json, checked to hold the five integers the model needs."""
    hparams = read_json(model_dir / "hparams.json")
    if not isinstance(hparams, dict) or not all(
            isinstance(hparams.get(key), int) and hparams[key] > 0 for key in HPARAMS):
        raise PicoGPTError(f"{model_dir / 'hparams.json'} is not GPT-2 hparams (it needs positive "
                           f"integers {', '.join(HPARAMS)}); delete it to download it again.")
    if hparams["n_embd"] % hparams["n_head"]:
        raise PicoGPTError(f"{model_dir / 'hparams.json'}: n_embd={hparams['n_embd']} is not a "
                           f"multiple of n_head={hparams['n_head']}; delete it to download again.")
    return hparams


def read_encoder(model_dir: Path) -> Encoder:
    """The BPE encoder from encoder.json and vocab.bpe, checked to be GPT-2's vocabulary."""
    encoder = read_json(model_dir / "encoder.json")
    if not isinstance(encoder, dict) or len(encoder) != N_VOCAB or encoder.get(
            "<|endoftext|>") != END_OF_TEXT:
        raise PicoGPTError(f"{model_dir / 'encoder.json'} is not GPT-2's token table ({N_VOCAB} "
                           f"tokens, <|endoftext|> = {END_OF_TEXT}); delete it to download again.")
    try:
        lines = (model_dir / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        lines = []
    # line 0 is "#version: 0.2". Each half of a merge is a token too: reusing encoder.json's
    # string for it, not a second copy, kept ~5 MiB less in memory for the whole run.
    same = {token: token for token in encoder}
    merges = [tuple(same.get(half, half) for half in line.split()) for line in lines[1:] if line]
    if len(merges) != N_MERGES or any(len(merge) != 2 for merge in merges):
        raise PicoGPTError(f"{model_dir / 'vocab.bpe'} is not GPT-2's merge list ({N_MERGES} "
                           f"pairs); delete it to download again.")
    return Encoder(encoder, merges)


def stamp(path: Path) -> list[int]:
    """A file's size and modification time: cheap to read, and both change when it is written."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def checkpoint_fingerprint(model_dir: Path) -> dict[str, list[int]] | None:
    """Stamps of the checkpoint files (a change means params/ is stale); None once deleted."""
    names = ("model.ckpt.data-00000-of-00001", "model.ckpt.index")
    if not all((model_dir / name).is_file() for name in names):
        return None
    return {name: stamp(model_dir / name) for name in names}


def read_params(model_dir: Path) -> dict[str, np.ndarray] | None:
    """The converted tensors, memory-mapped, or None if params/ is absent, stale or damaged."""
    # Mapped, not read: copies in memory get 2 MB pages, on which a decode step ran ~4% faster
    # (19.7 against 20.6 ms, 124M), but making them added 0.3-0.45 s to every start here, more
    # than a 40-token run wins back. Mapped files cost nothing to open and share the page cache.
    params_dir = model_dir / "params"
    manifest = read_json(params_dir / "manifest.json")
    source = checkpoint_fingerprint(model_dir)
    if not isinstance(manifest, dict) or manifest.get("format") != PARAMS_FORMAT or (
            source is not None and manifest.get("source") != source):
        return None
    arrays = {}
    try:
        for name, meta in manifest["tensors"].items():
            file = params_dir / f"{name}.npy"
            array = np.asarray(np.load(file, mmap_mode="r"))
            if list(array.shape) != meta["shape"] or array.dtype != np.float32:
                return None
            # touched since it was verified: by a copy (cp -r) that kept every byte, or not
            if stamp(file) != meta["stamp"] and crc32(array) != meta["crc32"]:
                return None
            arrays[name] = array
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing or malformed
        return None
    return arrays or None


def crc32(array: np.ndarray) -> int:
    """CRC-32 of an array's bytes in memory order (row- or column-major alike)."""
    return zlib.crc32(array.ravel(order="K"))


def build_params(model_dir: Path) -> dict[str, np.ndarray]:
    """Convert the TensorFlow checkpoint into params/, check it, then read it back."""
    try:
        arrays = write_params(model_dir, read_checkpoint(model_dir),
                              source=checkpoint_fingerprint(model_dir))
    except KeyboardInterrupt:  # the CLI prints this and exits 130
        raise KeyboardInterrupt(f"conversion stopped; nothing half-written is kept in "
                                f"{model_dir}, and the next run converts again.") from None
    freed = sum((model_dir / name).stat().st_size for name in CHECKPOINT
                if (model_dir / name).is_file())
    tqdm.write(f"picogpt: converted {model_dir} to params/. The TensorFlow checkpoint files "
               f"(model.ckpt.*, checkpoint) are no longer needed: deleting them frees "
               f"{freed / 1e6:,.0f} MB.", file=sys.stderr)
    return arrays


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


def save_model(model_dir: Path, hparams: dict[str, int], params: dict, vocab_dir: Path) -> None:
    """Write a model folder that loads like a converted download: hparams.json, GPT-2's
    encoder.json and vocab.bpe from vocab_dir, and params/ (no TensorFlow checkpoint)."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copyfile(vocab_dir / name, model_dir / name)
    write_json_atomic(model_dir / "hparams.json", {key: hparams[key] for key in HPARAMS})
    write_params(model_dir, flatten(params).items(), source=None)


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
            raise PicoGPTError(f"{file} does not read back as written (disk full or failing?); "
                               f"free some space and run again.")
        tensors[name] = {"shape": list(array.shape), "crc32": checksum, "stamp": stamp(file)}
    return tensors


def read_checkpoint(model_dir: Path):
    """Yield (name, float32 array) for each tensor of the TensorFlow checkpoint in model_dir."""
    # TensorFlow's start-up lines on stderr come from oneDNN, which reading variables never uses
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:  # here only: the first load of a size, never once params/ exists
        import tensorflow as tf
    except ImportError:
        raise PicoGPTError(f"converting OpenAI's checkpoint in {model_dir} needs TensorFlow, "
                           f"which is not installed for Python {sys.version.split()[0]}. Install "
                           f"it (pip install tensorflow, on a Python it supports: 3.10 to 3.13), "
                           f"or run a Hugging Face folder with --hf.") from None
    try:
        reader = tf.train.load_checkpoint(str(model_dir / "model.ckpt"))
        names = sorted(reader.get_variable_to_shape_map())
        # a bar on a terminal only (disable=None): a log or a pipe gets the line build_params
        # writes when it is done, or the error
        bar = tqdm(names, desc=f"picogpt: converting the TensorFlow checkpoint in {model_dir} "
                               f"to NumPy files, once", unit="tensor", leave=False, disable=None)
        for name in bar:
            array = reader.get_tensor(name).astype(np.float32)
            if array.ndim == 3:  # the checkpoint stores conv1d weights as [1, n_in, n_out]
                array = array[0]
            yield name.removeprefix("model/").replace("/", "."), array
    except (tf.errors.OpError, IndexError, ValueError) as e:  # a truncated file: IndexError
        reason = (e.message if isinstance(e, tf.errors.OpError) else str(e)).splitlines()[0]
        raise PicoGPTError(f"cannot read the checkpoint in {model_dir} ({reason[:200]}); "
                           f"delete its model.ckpt.* files to download them again.") from None


def nest(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Flat names like "h3.attn.c_attn.w" -> params["blocks"][3]["attn"]["c_attn"]["w"]."""
    n_layer = len({name.split(".")[0] for name in arrays if name.startswith("h")})
    params: dict[str, Any] = {"blocks": [{} for _ in range(n_layer)]}
    for name, array in arrays.items():
        *path, leaf = name.split(".")
        node = params
        if path and path[0].startswith("h"):  # the one rename: h{i} -> blocks[i]
            node, path = params["blocks"][int(path[0][1:])], path[1:]
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = array
    return params


def flatten(params: dict) -> dict[str, np.ndarray]:
    """The inverse of nest: params["blocks"][3]["attn"]["c_attn"]["w"] -> "h3.attn.c_attn.w"."""
    flat = {}

    def walk(node, name: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{name}.{key}" if name else key)
        else:
            flat[name] = node

    walk({key: value for key, value in params.items() if key != "blocks"}, "")
    for i, block in enumerate(params["blocks"]):
        walk(block, f"h{i}")
    return flat


def expected_shapes(hparams: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor a GPT-2 with these hparams has."""
    n_embd = hparams["n_embd"]
    block = {"ln_1.g": (n_embd,), "ln_1.b": (n_embd,), "ln_2.g": (n_embd,), "ln_2.b": (n_embd,),
             "attn.c_attn.w": (n_embd, 3 * n_embd), "attn.c_attn.b": (3 * n_embd,),
             "attn.c_proj.w": (n_embd, n_embd), "attn.c_proj.b": (n_embd,),
             "mlp.c_fc.w": (n_embd, 4 * n_embd), "mlp.c_fc.b": (4 * n_embd,),
             "mlp.c_proj.w": (4 * n_embd, n_embd), "mlp.c_proj.b": (n_embd,)}
    return {"wte": (hparams["n_vocab"], n_embd), "wpe": (hparams["n_ctx"], n_embd),
            "ln_f.g": (n_embd,), "ln_f.b": (n_embd,),
            **{f"h{i}.{name}": shape for i in range(hparams["n_layer"])
               for name, shape in block.items()}}


def check_shapes(arrays: dict[str, np.ndarray], hparams: dict[str, int], model_dir: Path) -> None:
    """Raise if hparams.json does not describe the tensors the checkpoint holds."""
    expected = expected_shapes(hparams)
    for name in sorted(expected.keys() | arrays.keys()):
        want = expected.get(name, "no such tensor")
        have = arrays[name].shape if name in arrays else "no such tensor"
        if want != have:
            said = ", ".join(f"{key}={hparams[key]}" for key in HPARAMS)
            raise PicoGPTError(f"{model_dir / 'hparams.json'} ({said}) does not match the "
                               f"checkpoint: {name} should be {want} but is {have}. The folder "
                               f"mixes two models; delete it to download again.")
