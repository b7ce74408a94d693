"""The LLaMA family's block as the table of model kinds (kinds.py) reads it: the shape of every
weight (Hugging Face's names with "model." dropped, layers.{i} -> h{i}), its parameter groups, the
check that its heads fit together, and its tables cut to a tokenizer's size."""

from ..errors import PicoGPTError, _
from ..optim import GROUPS
from ..tree import flatten


def llama_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor of a LLaMA-kind model with these hparams: Hugging
    Face's names with "model." dropped and layers.{i} -> h{i}, weights [n_out, n_in]."""
    e, f, d = hparams["n_embd"], hparams["n_ffn"], hparams["d_head"]
    q, kv = hparams["n_head"] * d, hparams["n_kv_head"] * d
    block = {"input_layernorm.weight": (e,), "post_attention_layernorm.weight": (e,),
             "self_attn.q_proj.weight": (q, e), "self_attn.k_proj.weight": (kv, e),
             "self_attn.v_proj.weight": (kv, e), "self_attn.o_proj.weight": (e, q),
             "mlp.gate_proj.weight": (f, e), "mlp.up_proj.weight": (f, e),
             "mlp.down_proj.weight": (e, f)}
    if hparams["qkv_bias"]:  # Qwen2
        block |= {"self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,),
                  "self_attn.v_proj.bias": (kv,)}
    if hparams["qk_norm"]:  # Qwen3
        block |= {"self_attn.q_norm.weight": (d,), "self_attn.k_norm.weight": (d,)}
    shapes = {"embed_tokens.weight": (hparams["n_vocab"], e), "norm.weight": (e,)}
    if not hparams["tied"]:
        shapes["lm_head.weight"] = (hparams["n_vocab"], e)
    return shapes | {f"h{i}.{name}": shape for i in range(hparams["n_layer"])
                     for name, shape in block.items()}


def llama_groups(params: dict) -> dict[str, list[str]]:
    """The parameter groups of a LLaMA-kind tree, by Hugging Face's names: the token table and
    an untied head are embeddings, every norm's weight a gain, a bias a bias, any other weight a
    matrix."""
    groups = {group: [] for group in GROUPS}
    for name in flatten(params):
        group = ("embeddings" if name.split(".")[0] in ("embed_tokens", "lm_head") else
                 "gains" if name.rsplit(".", 2)[-2].endswith("norm") else
                 "biases" if name.endswith(".bias") else "matrices")
        groups[group].append(name)
    return groups


def llama_fits(hparams: dict, source: str, fix: str) -> None:
    """Raise unless the query heads split into groups, one per key/value head."""
    if hparams["n_head"] % hparams["n_kv_head"]:
        raise PicoGPTError(_("{source}: n_head={n_head} is not a multiple of n_kv_head="
                             "{n_kv_head}; {fix}.").format(
            source=source, n_head=hparams["n_head"], n_kv_head=hparams["n_kv_head"], fix=fix))


def llama_fit_vocabulary(hparams: dict, params: dict, n_vocab: int) -> tuple[dict, dict]:
    """The embedding (and an untied head) cut to the tokenizer's n_vocab rows: Qwen pads its
    151,665 tokens to 151,936 rows, and a row no token has must never be sampled."""
    if n_vocab >= params["embed_tokens"]["weight"].shape[0]:
        return hparams, params
    cut = {"embed_tokens": {"weight": params["embed_tokens"]["weight"][:n_vocab]}}
    if "lm_head" in params:
        cut["lm_head"] = {"weight": params["lm_head"]["weight"][:n_vocab]}
    return {**hparams, "n_vocab": n_vocab}, {**params, **cut}
