"""A training-only block with a switch for each change between GPT-2's block and LLaMA's, for
measuring each change alone (scripts/benchmarks/why_llama.py; docs/why-llama.md).

llama/model.py is the LLaMA block as a learner reads it and as Hugging Face's checkpoints hold
it; this module is the same block with switches that take each change back, so one change at a
time can be trained on GPT-2's block (`python -m picogpt.train --task poems --variant rope`):

    norm       "rms" (LLaMA) or "layer" (GPT-2's LayerNorm, with its bias)
    positions  "rope" (LLaMA) or "learned" (GPT-2's table, wpe)
    mlp        "swiglu" (LLaMA), "gelu" (GPT-2's, tanh form) or "relu2" (ReLU squared)
    n_kv_head  key/value heads (GPT-2: n_head)
    bias       a bias on every linear (GPT-2) or none (LLaMA)
    qk_norm    an RMSNorm on each head's q and k (Qwen3)
    tied       the embedding unembeds (both) or an untied head, lm_head
    zero_proj  o_proj and down_proj start at zero (the speedrun's init), not small
    line_end   a learned table of each character's distance to its line's end (SongNet's
               signal), added as wpe is; hparams["line_ends"] are the ids that end a line

With GPT-2's switches it computes model.gpt2's logits, and with LLaMA's llama/model.py's (tests
hold both). Weights are named as llama/model.py's; a learned table is "wpe", a LayerNorm's and a
linear's bias "bias". `loss_and_grads` is the fast step, as llama/fasttrain.py's, in
llama/variant_step.py; the engine side (`extend`, `prefill`, `decode_step`) runs its KV cache,
llama/engine.py's. NumPy, float32.
"""

import numpy as np

from .. import kvcache
from ..errors import PicoGPTError, _
from ..optim import GROUPS
from ..tree import flatten
from . import engine
from .engine import LlamaCache
from .kind import llama_fits
from .train import default_n_ffn
from .variant_step import (  # noqa: F401 (loss_and_grads: the kind's step)
    LINE_ROOM,
    final_logits,
    line_distances,
    loss_and_grads,
    stream,
)

# The switches of each block: LLaMA's as llama/train.py trains it, and GPT-2's
LLAMA = {"norm": "rms", "positions": "rope", "mlp": "swiglu", "bias": False, "qk_norm": False,
         "tied": True, "zero_proj": False, "line_end": False}
GPT2 = {**LLAMA, "norm": "layer", "positions": "learned", "mlp": "gelu", "bias": True}
CHOICES = {"norm": ("rms", "layer"), "positions": ("rope", "learned"),
           "mlp": ("swiglu", "gelu", "relu2")}
# --variant's names: what each is, the block it changes and how; "half": n_head / 2 key/value
# heads, each shared by two query heads (LLaMA's default here), else n_head
VARIANTS = {
    "gpt2": ("GPT-2's block, through this module", GPT2, {}, "all"),
    "llama": ("LLaMA's block, through this module", LLAMA, {}, "half"),
    "rope": ("rotary positions alone on GPT-2's block", GPT2, {"positions": "rope"}, "all"),
    "rmsnorm": ("RMSNorm alone on GPT-2's block", GPT2, {"norm": "rms"}, "all"),
    "swiglu": ("SwiGLU alone on GPT-2's block", GPT2, {"mlp": "swiglu"}, "all"),
    "gqa": ("shared key/value heads alone on GPT-2's block", GPT2, {}, "half"),
    "relu2": ("ReLU squared for SwiGLU, on LLaMA's block", LLAMA, {"mlp": "relu2"}, "half"),
    "qk-norm": ("q/k norms on LLaMA's block", LLAMA, {"qk_norm": True}, "half"),
    "zero-proj": ("o_proj and down_proj from zero, on LLaMA's block", LLAMA,
                  {"zero_proj": True}, "half"),
    "line-end": ("each character's distance to its line's end, on LLaMA's block", LLAMA,
                 {"line_end": True}, "half"),
    "untied": ("an untied head on LLaMA's block", LLAMA, {"tied": False}, "half"),
}


def variant_hparams(name: str, n_vocab: int, n_ctx: int, n_embd: int, n_head: int,
                    n_layer: int, line_ends=()) -> dict:
    """The hparams of --variant name at a run's shape (line_ends: the ids that end a line, for
    the line-end table; the poems task gives its punctuation, line break and start token)."""
    _about, base, changed, kv = VARIANTS[name]
    n_kv_head = n_head // 2 if kv == "half" and n_head % 2 == 0 else n_head
    hp = hparams(n_vocab, n_ctx, n_embd, n_head, n_layer, {**base, **changed}, n_kv_head)
    return hp | ({"line_ends": sorted(int(i) for i in line_ends)} if hp["line_end"] else {})


def shapes(hp: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every weight of a variant with these hparams."""
    return {name: leaf.shape for name, leaf in
            flatten(init_params(hp, np.random.default_rng(0))).items()}


def groups(params: dict) -> dict[str, list[str]]:
    """The parameter groups: tables (embed_tokens, lm_head, wpe, wle), gains, biases, matrices."""
    found, tables = {group: [] for group in GROUPS}, ("embed_tokens", "lm_head", "wpe", "wle")
    for name in flatten(params):
        group = ("embeddings" if name.split(".")[0] in tables else
                 "biases" if name.endswith(".bias") else
                 "gains" if name.rsplit(".", 2)[-2].endswith("norm") else "matrices")
        found[group].append(name)
    return found


def hparams(n_vocab: int, n_ctx: int, n_embd: int, n_head: int, n_layer: int, switches: dict,
            n_kv_head: int | None = None) -> dict:
    """The shape and switches of a variant (n_kv_head: n_head unless given); the MLP's width is
    GPT-2's 4 n_embd, or SwiGLU's 8/3 n_embd (the same weights in three matrices)."""
    n_ffn = default_n_ffn(n_embd) if switches["mlp"] == "swiglu" else 4 * n_embd
    return {"model": "variant", "n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd,
            "n_head": n_head, "n_kv_head": n_kv_head or n_head, "d_head": n_embd // n_head,
            "n_ffn": n_ffn, "n_layer": n_layer, "rope_theta": 10000.0,
            "norm_eps": 1e-6 if switches["norm"] == "rms" else 1e-5, **switches}


def init_params(hp: dict, rng: np.random.Generator) -> dict:
    """GPT-2's and LLaMA's first weights: normal(0, 0.02), the two residual writers scaled by
    1 / sqrt(2 n_layer) (or zero: zero_proj), wpe and wle normal(0, 0.01), gains 1, biases 0."""
    e, d, f = hp["n_embd"], hp["d_head"], hp["n_ffn"]
    residual = 0.0 if hp["zero_proj"] else 0.02 / (2 * hp["n_layer"]) ** 0.5

    def weight(n_out, n_in, std=0.02):
        layer = {"weight": rng.normal(0.0, std, (n_out, n_in)).astype(np.float32)}
        return layer | ({"bias": np.zeros(n_out, np.float32)} if hp["bias"] else {})

    def norm(n=e):
        gain = {"weight": np.ones(n, np.float32)}
        return gain | ({"bias": np.zeros(n, np.float32)} if hp["norm"] == "layer" else {})

    def block():
        attn = {"q_proj": weight(hp["n_head"] * d, e), "k_proj": weight(hp["n_kv_head"] * d, e),
                "v_proj": weight(hp["n_kv_head"] * d, e),
                "o_proj": weight(e, hp["n_head"] * d, residual)}
        if hp["qk_norm"]:
            attn |= {"q_norm": {"weight": np.ones(d, np.float32)},
                     "k_norm": {"weight": np.ones(d, np.float32)}}
        mlp = {"up_proj": weight(f, e), "down_proj": weight(e, f, residual)}
        if hp["mlp"] == "swiglu":
            mlp["gate_proj"] = weight(f, e)
        return {"input_layernorm": norm(), "self_attn": attn,
                "post_attention_layernorm": norm(), "mlp": mlp}

    params = {"embed_tokens": {"weight": rng.normal(0.0, 0.02, (hp["n_vocab"], e))
                               .astype(np.float32)}}
    if hp["positions"] == "learned":
        params["wpe"] = {"weight": rng.normal(0.0, 0.01, (hp["n_ctx"], e)).astype(np.float32)}
    if hp.get("line_end"):
        params["wle"] = {"weight": rng.normal(0.0, 0.01, (LINE_ROOM + 1, e)).astype(np.float32)}
    params["blocks"] = [block() for _ in range(hp["n_layer"])]
    params["norm"] = norm()
    if not hp["tied"]:
        params["lm_head"] = {"weight": rng.normal(0.0, 0.02, (hp["n_vocab"], e))
                             .astype(np.float32)}
    return params


def logits(ids, params: dict, hp: dict) -> np.ndarray:
    """[..., n_seq] ids -> [..., n_seq, n_vocab]."""
    return final_logits(stream(ids, params, hp)[0], params, hp)


def trace(ids, params: dict, hp: dict, names=None) -> tuple[np.ndarray, dict]:
    """The logits of one [n_seq] row and each block's pattern ("blocks.{i}.attn.pattern")."""
    x, kept, _angles = stream(np.asarray(ids)[None], params, hp)
    out = final_logits(x[0], params, hp)
    values = {f"blocks.{i}.attn.pattern": k["pattern"][0] for i, k in enumerate(kept)}
    return out, {k: v for k, v in values.items() if names is None or k in names}


class VariantCache(LlamaCache):
    """The LLaMA kind's cache (n_kv_head heads a block), which also keeps the ids it has seen:
    a new character's distance to its line's end depends on the lines before it."""

    seen = None  # this cache's own ids, [*batch, n]; the first layers[0].n_past are current

    def ids(self, new) -> np.ndarray:
        """Every id so far, the shared prompt's first, then new's [..., n_new]; keeps new."""
        own = np.asarray(new)
        if self.seen is not None:
            own = np.concatenate([self.seen[..., : self.layers[0].n_past], own], axis=-1)
        self.seen = own
        if self.prompt is None:
            return own
        before = self.prompt.seen[..., : self.prompt.n_past]
        return np.concatenate([np.broadcast_to(before, own.shape[:-1] + before.shape[-1:]), own],
                              axis=-1)

    def keep(self, rows: list[int]) -> None:
        """Drop every batch row but these, their ids too."""
        super().keep(rows)
        if self.seen is not None:  # kept only for the line-end table
            self.seen = self.seen[rows]


KVCache = VariantCache  # the name generate.py asks an engine for


def extend(ids, params: dict, hp: dict, cache: VariantCache) -> np.ndarray:
    """The variant on new positions only, through the cache: the last position's logits."""
    lines = None
    if hp.get("line_end"):
        lines = line_distances(cache.ids(ids), hp["line_ends"])[..., -np.shape(ids)[-1] :]
    x = stream(ids, params, hp, cache.n_past, [layer.attend for layer in cache.layers], lines)[0]
    return final_logits(x[..., -1, :], params, hp)


def prefill(ids, params: dict, hp: dict, cache: VariantCache, chunk: int | None = None):
    """A prompt into the cache, as kvcache.prefill: the last logits."""
    return kvcache.prefill(ids, params, hp, cache, chunk, extend_with=extend)


def decode_step(next_ids, params: dict, hp: dict, cache: VariantCache) -> np.ndarray:
    """One new position for each batch row, as kvcache.decode_step."""
    return kvcache.decode_step(next_ids, params, hp, cache, extend_with=extend)


def window_stream(inputs, params: dict, hp: dict) -> np.ndarray:
    """The last residual stream of one scoring window: [n] ids -> [n, n_embd]."""
    return stream(np.asarray(inputs)[None], params, hp)[0][0]


def n_ctx(params: dict, hp: dict) -> int:
    """The longest context: the learned table's rows, or the n_ctx it trained at."""
    return hp["n_ctx"]


def fits(hparams: dict, source: str, fix: str) -> None:
    """Raise unless the heads fit and each switch is one the variant has."""
    llama_fits(hparams, source, fix)
    for key, choices in CHOICES.items():
        if hparams[key] not in choices:
            raise PicoGPTError(_("{source}: {key}={value!r} is not one of {choices}; {fix}.")
                               .format(source=source, key=key, value=hparams[key],
                                       choices=", ".join(choices), fix=fix))
    ends = hparams.get("line_ends")  # the kind's check made it a list of ids, or absent
    if hparams.get("line_end") and (ends is None or any(i >= hparams["n_vocab"] for i in ends)):
        raise PicoGPTError(_("{source}: line_end needs line_ends, a list of the ids that end a "
                             "line, each under n_vocab ({n_vocab}); {fix}.").format(
                                 source=source, n_vocab=hparams["n_vocab"], fix=fix))


n_vocab = engine.n_vocab  # the name generate.py asks an engine for: the head's rows
