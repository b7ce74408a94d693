"""picogpt: GPT-2 inference in pure NumPy.

The model's functions (`picogpt.model`), the two loaders (OpenAI's checkpoint, a Hugging Face
folder) and `load_model`, which gives either as one `LoadedModel`; the two tokenizers (GPT-2's
BPE `Encoder`, BERT's `WordPiece`), the three ways to generate, `score` and `trace` are
importable from here, so a learner can write `from picogpt import gpt2, generate`.
"""

import signal
import sys
from pathlib import Path

# A command of picogpt's own (python -m picogpt..., the picogpt script) that is stopped with
# Ctrl-C while its modules load ends quietly with 130, as it does later (cli/command.ending
# takes Ctrl-C over once the command runs); a program that imports picogpt is left alone.
if sys.argv[:1] == ["-m"] or Path(sys.argv[0] if sys.argv else "").name == "picogpt":
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))

from .encoder import Encoder  # noqa: E402 (after the handler: these imports take the time)
from .errors import PicoGPTError
from .files.hf import load_hf
from .files.loaded_model import LoadedModel, load_model
from .files.openai import load_encoder_hparams_and_params
from .generate import generate, generate_samples, generate_steps
from .inside import trace
from .model import attention, ffn, gelu, gpt2, layer_norm, linear, mha, softmax, transformer_block
from .score import score
from .wordpiece import WordPiece

__all__ = ["Encoder", "LoadedModel", "PicoGPTError", "WordPiece", "attention", "ffn", "gelu",
           "generate", "generate_samples", "generate_steps", "gpt2", "layer_norm", "linear",
           "load_encoder_hparams_and_params", "load_hf", "load_model", "mha", "score", "softmax",
           "trace", "transformer_block"]
