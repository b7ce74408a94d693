"""The inputs each of the ten functions is tried on, chosen so that each known slip shows.

Owns the cases (what each input is, for the message, and the arguments), the small model they
share, and random weights of GPT-2 124M's shape for the whole gpt2 and the final text. Every
case is made from a fixed seed, so the same inputs come back on every run. Must not print.
"""

from functools import cache

import numpy as np

from ..encoder import N_VOCAB
from ..files.openai import N_CTX, RELEASED_SHAPES
from .hints import N_

FUNCTIONS = ("gelu", "softmax", "layer_norm", "linear", "ffn", "attention", "mha",
             "transformer_block", "gpt2", "generate")
# Beyond the ten, checked when the learner's file has them: the 2017 encoder-decoder's
# cross-attention (docs/couplet.md's exercise), as transformer.multi_head_attention computes it,
# and the LLaMA block's RMSNorm and rotary positions (docs/gpt2-to-llama.md), as llama/model.py's
EXTRAS = ("cross_attention", "rms_norm", "rope")
SMALL = {"n_vocab": 60, "n_ctx": 16, "n_embd": 16, "n_head": 4, "n_layer": 2}
N_LAYER, N_EMBD, N_HEAD = RELEASED_SHAPES["124M"]
# GPT-2 124M's layer shape, two blocks deep: big enough for its slips, quick to check
GPT2_SHAPE = {"n_vocab": N_VOCAB, "n_ctx": N_CTX, "n_embd": N_EMBD, "n_head": N_HEAD, "n_layer": 2}
PROMPT_IDS = [36235, 39141, 18765, 1143, 326, 9061]  # "Alan Turing theorized that computers"
NOT_WRITTEN = N_("not written yet: line {line} still raises NotImplementedError")


def random_params(hparams: dict, rng: np.random.Generator, std: float) -> dict:
    """GPT-2's params tree with random float32 weights, biases, gains and shifts."""
    n_embd = hparams["n_embd"]

    def normal(*shape, scale=std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    def linear(n_in, n_out):
        return {"w": normal(n_in, n_out), "b": normal(n_out)}

    def norm():
        return {"g": 1 + normal(n_embd, scale=0.1), "b": normal(n_embd, scale=0.1)}

    return {"wte": normal(hparams["n_vocab"], n_embd), "wpe": normal(hparams["n_ctx"], n_embd),
            "blocks": [{"ln_1": norm(), "ln_2": norm(),
                        "attn": {"c_attn": linear(n_embd, 3 * n_embd),
                                 "c_proj": linear(n_embd, n_embd)},
                        "mlp": {"c_fc": linear(n_embd, 4 * n_embd),
                                "c_proj": linear(4 * n_embd, n_embd)}}
                       for _ in range(hparams["n_layer"])],
            "ln_f": norm()}


@cache
def gpt2_shaped_params() -> dict:
    """Random weights of GPT-2 124M's shape, two blocks instead of twelve (kept fast)."""
    return random_params(GPT2_SHAPE, np.random.default_rng(124), std=0.1)  # 0.02 repeats one token


def cases(name: str) -> list[tuple[str, tuple, dict]]:
    """The inputs name is tried on: (what they are, positional args, keyword args)."""
    rng = np.random.default_rng((FUNCTIONS + EXTRAS).index(name))

    def normal(*shape, scale=1.0):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    def linear(n_in, n_out):
        return {"w": normal(n_in, n_out, scale=0.5), "b": normal(n_out, scale=0.5)}

    small = random_params(SMALL, rng, std=0.3)
    block = small["blocks"][0]
    mask = (1 - np.tri(5, dtype=np.float32)) * np.float32(-1e10)
    return {
        "gelu": lambda: [(N_("x from -5 to 5, shape [5, 8]"),
                          (np.linspace(-5, 5, 40, dtype=np.float32).reshape(5, 8),), {})],
        "softmax": lambda: [
            (N_("random scores [3, 6]"), (normal(3, 6, scale=2),), {}),
            (N_("large logits, up to 1000 [3, 6]"), (normal(3, 6, scale=400),), {})],
        "layer_norm": lambda: [
            (N_("random rows [4, 8]"), (normal(4, 8, scale=3) + 1,),
             {"g": 1 + normal(8, scale=0.1), "b": normal(8, scale=0.1)}),
            (N_("nearly constant rows [4, 8] (spread 0.001)"),
             (normal(4, 8, scale=1e-3) + np.float32(0.5),),
             {"g": 1 + normal(8, scale=0.1), "b": normal(8, scale=0.1)})],
        "linear": lambda: [(N_("x [4, 6], a square w [6, 6]"), (normal(4, 6),), linear(6, 6)),
                           (N_("x [4, 6], w [6, 10]"), (normal(4, 6),), linear(6, 10))],
        "ffn": lambda: [(N_("x [4, 6], c_fc w [6, 24], c_proj w [24, 6]"), (normal(4, 6),),
                         {"c_fc": linear(6, 24), "c_proj": linear(24, 6)})],
        "attention": lambda: [
            (N_("q, k, v [5, 4] and a causal mask"),
             (normal(5, 4, scale=2), normal(5, 4, scale=2), normal(5, 4), mask), {}),
            (N_("q [3, 8], k [6, 8], v [6, 5], a mask of zeros"),
             (normal(3, 8, scale=2), normal(6, 8, scale=2), normal(6, 5),
              np.zeros((3, 6), np.float32)), {})],
        "mha": lambda: [(N_("x [6, 16], n_head 4"), (normal(6, 16),),
                         {**block["attn"], "n_head": 4})],
        "transformer_block": lambda: [(N_("x [6, 16], n_head 4"), (normal(6, 16),),
                                       {**block, "n_head": 4})],
        "gpt2": lambda: [
            (N_("ids [7, 3, 11, 3, 0] on a small model (n_vocab 60, n_embd 16, n_head 4)"),
             ([7, 3, 11, 3, 0],), {**small, "n_head": 4}),
            (N_("GPT-2's shape: n_vocab 50257, n_ctx 1024, n_embd 768, n_head 12 (2 blocks)"),
             (PROMPT_IDS,), {**gpt2_shaped_params(), "n_head": 12})],
        "generate": lambda: [(N_("ids [7, 3, 11], 6 new ids, on the small model"),
                              ([7, 3, 11], small, 4, 6), {})],
        "cross_attention": lambda: [  # a 下句 of 5 positions reads a 上句 of 7
            (N_("x [5, 16] (the decoder's), memory [7, 16] (the encoder's output), n_head 4"),
             (normal(5, 16), normal(7, 16)),
             {**{name: linear(16, 16) for name in ("q", "k", "v", "c_proj")}, "n_head": 4})],
        "rms_norm": lambda: [  # rows off 0, so a mean taken away shows; then rows near eps
            (N_("rows [4, 8] around 1, eps 1e-6"), (normal(4, 8) + 1,),
             {"weight": 1 + normal(8, scale=0.1), "eps": 1e-6}),
            (N_("small rows [4, 8] (spread 0.01), eps 1e-4"), (normal(4, 8, scale=1e-2),),
             {"weight": 1 + normal(8, scale=0.1), "eps": 1e-4})],
        "rope": lambda: [  # positions 3 to 7, so position 0's "no turn" cannot hide a slip
            (N_("x [2, 5, 8] (2 heads, 5 positions from 3, d_head 8)"),
             (normal(2, 5, 8),), turns(3, 5, 8)),
            (N_("x [5, 16] (5 positions from 0, d_head 16)"), (normal(5, 16),), turns(0, 5, 16))],
    }[name]()


def turns(n_past: int, n_seq: int, d_head: int) -> dict:
    """rope's cos and sin for positions n_past ... n_past + n_seq - 1 (rope_theta 10,000)."""
    from ..llama.model import rope_angles

    cos, sin = rope_angles(n_past, n_seq, d_head, 10000.0)
    return {"cos": cos, "sin": sin}


