"""picogpt: GPT-2 inference in pure NumPy.

The model's functions (`picogpt.model`) and `generate` are importable from here, so a learner
can write `from picogpt import gpt2, generate`.
"""

from .encoder import Encoder
from .errors import PicoGPTError
from .generate import generate
from .load import load_encoder_hparams_and_params
from .model import attention, ffn, gelu, gpt2, layer_norm, linear, mha, softmax, transformer_block

__all__ = ["Encoder", "PicoGPTError", "attention", "ffn", "gelu", "generate", "gpt2",
           "layer_norm", "linear", "load_encoder_hparams_and_params", "mha", "softmax",
           "transformer_block"]
