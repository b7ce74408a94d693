"""OpenAI's model folder: its hparams, its vocabulary, its TensorFlow checkpoint converted once.

It holds `load_encoder_hparams_and_params`: it reads hparams.json and the vocabulary, and converts
the TensorFlow checkpoint into the store (files/store.py) the first time a size is used.

Layout of `models_dir/<size>/`: OpenAI's seven files, `download.json` (the byte size of each
file picogpt downloaded, to spot a file damaged later) and `params/`, the checkpoint converted
to one `.npy` per tensor. TensorFlow is needed only to build `params/`; later runs never import
it nor need the checkpoint files again. A model that `python -m picogpt.train` wrote lives
beside the sizes as `models_dir/<name>/`: hparams.json, its vocabulary (GPT-2's or its own;
vocab_files.py reads either) and params/ only.
"""

import os
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..encoder import Encoder
from ..errors import PicoGPTError, _
from .download import FILES, download_missing, download_url
from .folder_vocab import read_vocab
from .params import check_finite, check_hparams, check_shapes, fit_vocabulary, nest
from .store import first_not_finite, model_lock, read_json, read_params, source_stamps, write_params

MODEL_SIZES = ("124M", "355M", "774M", "1558M")
N_CTX = 1024  # every released size's context
# their shapes as OpenAI's hparams.json give them: (n_layer, n_embd, n_head)
RELEASED_SHAPES = {"124M": (12, 768, 12), "355M": (24, 1024, 16), "774M": (36, 1280, 20),
                   "1558M": (48, 1600, 25)}
CHECKPOINT = ("checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index",
              "model.ckpt.meta")  # what only the conversion reads


def load_encoder_hparams_and_params(model_size: str = "124M", models_dir: str = "models",
                                    base_url: str | None = None) -> tuple[Encoder, dict, dict]:
    """Download a GPT-2 size if needed and return its (encoder, hparams, params)."""
    model_dir = Path(models_dir) / model_size
    released = model_size in MODEL_SIZES  # else a folder of one's own: picogpt.train's
    if not released and not (model_dir / "hparams.json").is_file():
        raise PicoGPTError(_("unknown model size {size}; choose one of {sizes}, or the name of "
                             "a model folder in {models_dir} (python -m picogpt.train writes "
                             "one).").format(size=repr(model_size), sizes=", ".join(MODEL_SIZES),
                                             models_dir=models_dir))
    arrays = read_params(model_dir)  # once converted, the checkpoint files are not needed
    if released:
        download_missing(model_dir, download_url(model_size, base_url),
                         [name for name in FILES if arrays is None or name not in CHECKPOINT])
    hparams = read_hparams(model_dir)
    encoder = read_encoder(model_dir)
    if arrays is None and not released and source_stamps(model_dir) is None:
        raise PicoGPTError(_("{params} is missing or damaged, and {folder} has no checkpoint to "
                             "rebuild it from; train the model again.").format(
                                 params=model_dir / "params", folder=model_dir))
    if arrays is None:
        with model_lock(model_dir):
            arrays = read_params(model_dir) or build_params(model_dir)
    check_shapes(arrays, hparams, str(model_dir / "hparams.json"), _("the checkpoint"),
                 _("The folder mixes two models; delete it to download again."))
    if encoder.n_vocab > hparams["n_vocab"]:  # ids past the weights' rows would have no row
        raise PicoGPTError(_("{folder}'s vocabulary holds {n} tokens, but its weights have "
                             "{rows} rows (n_vocab in hparams.json): the vocabulary is not this "
                             "model's. {fix}").format(
            folder=model_dir, n=encoder.n_vocab, rows=hparams["n_vocab"],
            fix=_("Delete {folder} to download it again.").format(folder=model_dir) if released
            else _("Train the model again.")))
    check_finite(first_not_finite(model_dir, arrays), str(model_dir / "params"),
                 _("Delete {folder} to download it again.").format(folder=model_dir) if released
                 else _("Train the model again."))
    return (encoder, *fit_vocabulary(hparams, nest(arrays), encoder.n_vocab))


def read_hparams(model_dir: Path) -> dict[str, int]:
    """hparams.json, checked to hold the five integers the model needs."""
    return check_hparams(read_json(model_dir / "hparams.json"), str(model_dir / "hparams.json"),
                         _("delete it to download it again"))


def read_encoder(model_dir: Path):
    """The folder's vocabulary: GPT-2's own for a released size, checked to be whole; a trained
    model's own (byte-level BPE, or WordPiece) otherwise."""
    return read_vocab(model_dir, _("delete it to download it again")
                      if model_dir.name in MODEL_SIZES else _("train the model again"),
                      gpt2=model_dir.name in MODEL_SIZES)


def build_params(model_dir: Path) -> dict[str, np.ndarray]:
    """Convert the TensorFlow checkpoint into params/, check it, then read it back."""
    try:
        arrays = write_params(model_dir, read_checkpoint(model_dir),
                              source=source_stamps(model_dir))
    except KeyboardInterrupt:  # the CLI prints this and exits 130
        raise KeyboardInterrupt(_("conversion stopped; nothing half-written is kept in "
                                  "{folder}, and the next run converts again.").format(
                                      folder=model_dir)) from None
    freed = sum((model_dir / name).stat().st_size for name in CHECKPOINT
                if (model_dir / name).is_file())
    tqdm.write(_("picogpt: converted {folder} to params/. The TensorFlow checkpoint files "
                 "(model.ckpt.*, checkpoint) are no longer needed: deleting them frees {mb} "
                 "MB.").format(folder=model_dir, mb=f"{freed / 1e6:,.0f}"), file=sys.stderr)
    return arrays


def read_checkpoint(model_dir: Path):
    """Yield (name, float32 array) for each tensor of the TensorFlow checkpoint in model_dir."""
    # TensorFlow's start-up lines on stderr come from oneDNN, which reading variables never uses
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:  # here only: the first load of a size, never once params/ exists
        import tensorflow as tf
    except ImportError:
        raise PicoGPTError(_("converting OpenAI's checkpoint in {folder} needs TensorFlow, "
                             "which is not installed for Python {python}. Install it (pip "
                             "install tensorflow, on a Python it supports: 3.10 to 3.13), or run "
                             "a Hugging Face folder with --hf.").format(
                                 folder=model_dir, python=sys.version.split()[0])) from None
    try:
        reader = tf.train.load_checkpoint(str(model_dir / "model.ckpt"))
        names = sorted(reader.get_variable_to_shape_map())
        # a bar on a terminal only (disable=None): a log or a pipe gets the line build_params
        # writes when it is done, or the error
        bar = tqdm(names, desc=_("picogpt: converting the TensorFlow checkpoint in {folder} to "
                                 "NumPy files, once").format(folder=model_dir),
                   unit="tensor", leave=False, disable=None)
        for name in bar:
            array = reader.get_tensor(name).astype(np.float32)
            if array.ndim == 3:  # the checkpoint stores conv1d weights as [1, n_in, n_out]
                array = array[0]
            yield name.removeprefix("model/").replace("/", "."), array
    except (tf.errors.OpError, IndexError, ValueError) as e:  # a truncated file: IndexError
        reason = (e.message if isinstance(e, tf.errors.OpError) else str(e)).splitlines()[0]
        raise PicoGPTError(_("cannot read the checkpoint in {folder} ({reason}); delete its "
                             "model.ckpt.* files to download them again.").format(
                                 folder=model_dir, reason=reason[:200])) from None

