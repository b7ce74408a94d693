"""The engine's side of the LLaMA kind: its KV cache, prefill and decode steps, scoring windows.

kvcache.py's cache, for grouped-query attention: a layer stores only the n_kv_head key/value
heads (Qwen2.5-0.5B: 2 of 14, a seventh of the memory multi-head attention would take), and its
`attend` hands model.py's grouped attention all of them. Positions of new tokens start at the
cache's n_past, so their rotations (rope) continue where the prompt left off. The functions take
the model's hparams where GPT-2's take n_head (kinds.py: Kind.runs_with). The blocks are
llama/fast.py's copies of model.py's, shaped for a decode step's few rows.
"""

import numpy as np

from .. import kvcache
from ..kvcache import KVCache, LayerCache
from .fast import linear, llama_block
from .model import rms_norm, rope_angles

SCORE_CHUNK = 256  # positions per pass through a block when scoring, as score.py's


class GroupedLayerCache(LayerCache):
    """One block's keys and values, n_kv_head heads of them: [*batch, n_kv_head, n, d_head]."""

    def filled(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored keys and values, each head read by a group of query heads."""
        k, v = super().filled()  # [*batch, n_kv_head, n_past, d_head] each
        return k[..., None, :, :], v[..., None, :, :]  # [*batch, n_kv_head, 1, n_past, d_head]

    def attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """gqa's attention step: store the new k and v, then attend with q in its groups."""
        # [*batch, n_head, n_new, d_head], [*batch, n_kv_head, n_new, d_head] x2 -> like q
        *batch, n_head, n_new, d_head = q.shape
        n_kv_head = k.shape[-3]
        groups = q.reshape(*batch, n_kv_head, n_head // n_kv_head, n_new, d_head)
        return super().attend(groups, k, v).reshape(q.shape)


class LlamaCache(KVCache):
    """A GroupedLayerCache per block; kvcache.KVCache's rows, prompt sharing and rewinding."""

    def __init__(self, params: dict, hparams: dict, n_positions: int, batch: tuple = (),
                 prompt: "LlamaCache | None" = None):
        shape = (*batch, hparams["n_kv_head"], n_positions, hparams["d_head"])
        dtype = params["embed_tokens"]["weight"].dtype
        prompts = prompt.layers if prompt else [None] * len(params["blocks"])
        self.layers = [GroupedLayerCache(shape, dtype, p) for p in prompts]
        self.prompt = prompt


KVCache = LlamaCache  # the name generate.py asks an engine for


def n_vocab(params: dict) -> int:
    """Tokens the model can give: its output layer's rows."""
    return len(params.get("lm_head", params["embed_tokens"])["weight"])


def n_ctx(params: dict, hparams: dict) -> int:
    """The longest context: config.json's max_position_embeddings (rope has no table)."""
    return hparams["n_ctx"]


def run_blocks(x: np.ndarray, params: dict, hparams: dict, n_past: int, attends) -> np.ndarray:
    """The blocks on x, whose first position is n_past, each with its attention step."""
    # [..., n_new, n_embd] -> [..., n_new, n_embd]
    cos, sin = rope_angles(n_past, x.shape[-2], hparams["d_head"], hparams["rope_theta"])
    for block, attend in zip(params["blocks"], attends):
        x = llama_block(x, **block, cos=cos, sin=sin, n_head=hparams["n_head"],
                        n_kv_head=hparams["n_kv_head"], norm_eps=hparams["norm_eps"],
                        attend=attend)
    return x


def final_logits(x: np.ndarray, params: dict, hparams: dict) -> np.ndarray:
    """The logits of residual rows: the final norm, then the output layer."""
    # [..., n_embd] -> [..., n_vocab]
    head = params.get("lm_head", params["embed_tokens"])  # tied: the embedding unembeds
    return linear(rms_norm(x, **params["norm"], eps=hparams["norm_eps"]), **head)


def extend(ids, params: dict, hparams: dict, cache: LlamaCache) -> np.ndarray:
    """llama on new positions only, through the cache: the last position's logits."""
    # [..., n_new] ids -> [..., n_vocab]; the cache gains n_new positions
    x = params["embed_tokens"]["weight"][np.asarray(ids)]  # [..., n_new, n_embd]
    x = run_blocks(x, params, hparams, cache.n_past, [layer.attend for layer in cache.layers])
    return final_logits(x[..., -1, :], params, hparams)


def prefill(ids, params: dict, hparams: dict, cache: LlamaCache,
            chunk: int | None = None) -> np.ndarray:
    """Run a prompt's ids into the cache in chunks, as kvcache.prefill: the last logits."""
    # [..., n_prompt] -> [..., n_vocab]
    return kvcache.prefill(ids, params, hparams, cache, chunk, extend_with=extend)


def decode_step(next_ids, params: dict, hparams: dict, cache: LlamaCache) -> np.ndarray:
    """One new position for each batch row, as kvcache.decode_step: its next token's logits."""
    # [n_rows] ids -> [n_rows, n_vocab] (a cache without a batch: [] -> [n_vocab])
    return kvcache.decode_step(next_ids, params, hparams, cache, extend_with=extend)


def window_stream(inputs, params: dict, hparams: dict) -> np.ndarray:
    """The last residual stream of one scoring window, from position 0: [n] ids -> [n, n_embd]."""
    cache = LlamaCache(params, hparams, len(inputs))
    x = params["embed_tokens"]["weight"][np.asarray(inputs)]  # [n, n_embd]
    out = []
    for start in range(0, len(inputs), SCORE_CHUNK):  # chunks: the scores stay small
        rows = x[start : start + SCORE_CHUNK]
        out.append(run_blocks(rows, params, hparams, start,
                              [layer.attend for layer in cache.layers]))
    return np.concatenate(out)
