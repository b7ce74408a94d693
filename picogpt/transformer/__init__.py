"""The 2017 encoder-decoder (Vaswani et al.), the couplet model: a kind of model beside GPT-2.

Its rooms: model.py, the forward pass (what `from picogpt.transformer import ...` reads);
backward.py, its backward pass and loss; inside.py, its trace and 对位 score.
"""

from .model import (
    NEG,
    causal_mask,
    decode,
    decoder_layer,
    embed,
    encode,
    encoder_layer,
    greedy_seq2seq,
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
           "greedy_seq2seq", "init_params", "logits", "multi_head_attention", "padding_mask",
           "relu", "residual", "sinusoidal_positions", "tables"]
