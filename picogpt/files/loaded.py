"""Which model a command runs: an OpenAI size, a folder picogpt.train wrote, or a Hugging Face
folder (`--hf`), loaded once, and named for the pages.

Owns `load_model`, which turns the command's model flags (--model_size, --models_dir,
--base_url, --hf) into (encoder, hparams, params, model): the loaders are load.py's and
hf.py's; `model` says what was loaded ("GPT-2 124M", a trained model that is not GPT-2, a Hugging
Face folder), for the pages' titles and the command's messages.
"""

from pathlib import Path

from ..cli.command import reuse_freed_memory
from ..encoder import Encoder
from ..errors import PicoGPTError
from .hf import load_hf
from .load import MODEL_SIZES, load_encoder_hparams_and_params


def load_model(model_size: str, models_dir: str, base_url: str | None,
               hf: str | None) -> tuple[Encoder, dict, dict, dict]:
    """(encoder, hparams, params, model) for the model flags; model names what was loaded for
    the pages: {"name", "kind" ("released", "trained" or "hf"), "where", and its shape}."""
    if hf is not None and (model_size, models_dir, base_url) != ("124M", "models", None):
        raise PicoGPTError("--hf names the model to run; drop --model_size, --models_dir and "
                           "--base_url, which choose one of OpenAI's downloads.")
    reuse_freed_memory()
    if hf is not None:
        encoder, hparams, params = load_hf(hf)
        model = {"name": hf, "kind": "hf", "where": hf}
    else:
        encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir,
                                                                   base_url)
        model = {"name": model_size, "where": str(Path(models_dir) / model_size),
                 "kind": "released" if model_size in MODEL_SIZES else "trained"}
    shape = {key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}
    return encoder, hparams, params, {**model, **shape}
