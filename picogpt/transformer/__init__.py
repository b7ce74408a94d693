"""The 2017 encoder-decoder (Vaswani et al.), the couplet model: a kind of model beside GPT-2.

Its rooms: model.py, the forward pass (what `from picogpt.transformer import ...` reads);
decoding.py, the decode loop and a couplet model's inference; backward.py, its backward pass and
loss; inside.py, its trace and 对位 score.
"""

# The decode loop's room is decoding.py, not decode.py: loading a submodule sets the package's
# attribute of its name, and `decode` here is model.py's function (the decoder's forward pass)
from .model import (
    NEG,
    causal_mask,
    decode,
    decoder_layer,
    embed,
    encode,
    encoder_layer,
    init_params,
    logits,
    multi_head_attention,
    padding_mask,
    relu,
    residual,
    sinusoidal_positions,
    tables,
)

__all__ = ["NEG", "causal_mask", "decode", "decoder_layer", "embed", "encode", "encoder_layer",
           "init_params", "logits", "multi_head_attention", "padding_mask",
           "relu", "residual", "sinusoidal_positions", "tables"]
