"""Training the LLaMA block: its hparams, first weights, step, and the measurements' forward.

Everything `python -m picogpt.train --model llama` does differently from a GPT-2 lives here, in
the order a run needs it, so the kind's row of the table of model kinds can point at it:

- `hparams`: the shape the run's flags give, as the converted store's hparams.json holds it
  (llama/model.py's contract): key/value heads (n_kv_head, default half the query heads: each
  shared by two), the SwiGLU width (n_ffn, default 8/3 n_embd up to a multiple of 32, so the
  three matrices hold GPT-2's two 4 n_embd ones' weights), rope_theta (default 10,000, LLaMA's);
  a tied head, no biases, no q/k norms;
- `init_params`: normal(0, 0.02) for every matrix and the embedding, o_proj and down_proj (the
  two that write onto the residual stream) scaled down by sqrt(2 n_layer), as GPT-2's init in
  picogpt/train does; norm weights 1;
- `loss_and_grads` (and `step`, with hparams bound): llama/fasttrain.py's;
- `logits` and `trace` (each block's attention pattern, for the head probes); a run's samples
  come from the kind's engine (llama/engine.py, through generate.py), as a trained model's do.

NumPy only; no I/O.
"""

import numpy as np

from . import fasttrain
from .inside import run_with_hooks
from .model import HPARAMS, linear, llama


def default_n_kv_head(n_head: int) -> int:
    """Half the query heads when they pair up (each key/value head shared by two), else all."""
    return n_head // 2 if n_head % 2 == 0 else n_head


def default_n_ffn(n_embd: int) -> int:
    """SwiGLU's width: 8/3 n_embd, up to a multiple of 32 (LLaMA rounds to 256, at its size)."""
    return -(-8 * n_embd // 3 // 32) * 32


def hparams(n_vocab: int, n_ctx: int, n_embd: int, n_head: int, n_layer: int,
            n_kv_head: int | None = None, n_ffn: int | None = None,
            rope_theta: float | None = None) -> dict:
    """The model's shape, as hparams.json of its converted store holds it."""
    return {"model": "llama", "n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd,
            "n_head": n_head, "n_kv_head": n_kv_head or default_n_kv_head(n_head),
            "d_head": n_embd // n_head, "n_ffn": n_ffn or default_n_ffn(n_embd),
            "n_layer": n_layer, "rope_theta": float(rope_theta or 10000.0), "norm_eps": 1e-6,
            "tied": True, "qkv_bias": False, "qk_norm": False}


def init_params(hparams: dict, rng: np.random.Generator) -> dict:
    """First weights: normal(0, 0.02) matrices, the residual writers' scaled by
    1 / sqrt(2 n_layer), norm weights of 1; Hugging Face's names, [n_out, n_in]."""
    n_embd, n_layer, d_head = hparams["n_embd"], hparams["n_layer"], hparams["d_head"]
    residual = 0.02 / (2 * n_layer) ** 0.5  # each block adds two outputs onto the stream

    def weight(n_out, n_in, std=0.02):
        return {"weight": rng.normal(0.0, std, (n_out, n_in)).astype(np.float32)}

    def norm():
        return {"weight": np.ones(n_embd, np.float32)}

    n_q, n_kv, n_ffn = hparams["n_head"] * d_head, hparams["n_kv_head"] * d_head, hparams["n_ffn"]
    return {"embed_tokens": weight(hparams["n_vocab"], n_embd),
            "blocks": [{"input_layernorm": norm(),
                        "self_attn": {"q_proj": weight(n_q, n_embd), "k_proj": weight(n_kv, n_embd),
                                      "v_proj": weight(n_kv, n_embd),
                                      "o_proj": weight(n_embd, n_q, residual)},
                        "post_attention_layernorm": norm(),
                        "mlp": {"gate_proj": weight(n_ffn, n_embd),
                                "up_proj": weight(n_ffn, n_embd),
                                "down_proj": weight(n_embd, n_ffn, residual)}}
                       for _ in range(n_layer)],
            "norm": norm()}


def forward_hparams(hparams: dict) -> dict:
    """The hparams llama() and the steps read."""
    return {name: hparams[name] for name in HPARAMS}


def loss_and_grads(batch, params: dict, hparams: dict) -> tuple[float, dict]:
    """The training step's loss and gradients on (inputs, targets) windows (llama/fasttrain)."""
    return fasttrain.loss_and_grads(*batch, params, **forward_hparams(hparams))


def step(hparams: dict):
    """The training step with hparams bound: (batch, params) -> the loss and gradients."""
    return lambda batch, params: loss_and_grads(batch, params, hparams)


def logits(ids, params: dict, hparams: dict) -> np.ndarray:
    """llama(): [..., n_seq] ids -> [..., n_seq, n_vocab]."""
    return llama(ids, **params, **forward_hparams(hparams))


def trace(ids, params: dict, hparams: dict, names=None) -> tuple[np.ndarray, dict]:
    """The logits of one [n_seq] row and its named values (llama/inside.py's names: each block's
    "blocks.{i}.attn.pattern" is [n_head, n_seq, n_seq], as inside.trace names GPT-2's), for the
    head probes; names keeps only those. The forward is llama/model.py's, run by llama/inside."""
    values = {}

    def keep(name: str, value: np.ndarray, row: int = 0) -> None:
        if names is None or name in names:
            values[name] = value

    ln_final = run_with_hooks(ids, params, forward_hparams(hparams), keep)  # [n_seq, n_embd]
    return linear(ln_final, **params.get("lm_head", params["embed_tokens"])), values
