"""The params tree: GPT-2's tensor names, their nesting, the shapes hparams give them.

It holds the one rename between a flat name and the nested dict the model splats
("h3.attn.c_attn.w" <-> params["blocks"][3]["attn"]["c_attn"]["w"]), the shape each tensor must
have for given hparams, and the checks that they fit. Every loader and training use it.
"""

import re
from typing import Any

import numpy as np

from ..errors import PicoGPTError, _

HPARAMS = ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer")  # what hparams.json holds
# ... and, for the 2017 encoder-decoder a couplet model is (tasks/couplet.py), these besides
SEQ2SEQ = ("model", "n_dec_layer", "norm_first")
# ... and for the LLaMA block (picogpt/llama/), these besides
LLAMA = ("n_kv_head", "d_head", "n_ffn", "rope_theta", "norm_eps", "tied", "qkv_bias", "qk_norm")
BLOCK = re.compile(r"h\d+")  # a block's part of a flat name


def nest(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Flat names like "h3.attn.c_attn.w" -> params["blocks"][3]["attn"]["c_attn"]["w"]; an h{i}
    anywhere in a name is block i of the "blocks" beside it ("encoder.h0.attn.q.w" is the 2017
    Transformer's params["encoder"]["blocks"][0]["attn"]["q"]["w"])."""
    params: dict[str, Any] = {}
    for name, array in sorted(arrays.items(), key=lambda item: block_order(item[0])):
        *path, leaf = name.split(".")
        node = params
        for key in path:
            if BLOCK.fullmatch(key):  # the one rename: h{i} -> blocks[i]
                blocks = node.setdefault("blocks", [])
                blocks.extend({} for _ in range(int(key[1:]) + 1 - len(blocks)))
                node = blocks[int(key[1:])]
            else:
                node = node.setdefault(key, {})
        node[leaf] = array
    if "wte" in params:  # a GPT-2 always has its list of blocks, even an empty one
        params.setdefault("blocks", [])
    return params


def block_order(name: str) -> list:
    """A name's sort key in which h2 comes before h10."""
    return [(0, int(part[1:]), "") if BLOCK.fullmatch(part) else (1, 0, part)
            for part in name.split(".")]


def flatten(params: dict) -> dict[str, np.ndarray]:
    """The inverse of nest: params["blocks"][3]["attn"]["c_attn"]["w"] -> "h3.attn.c_attn.w"."""
    flat = {}

    def walk(node, name: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                if key == "blocks":
                    for i, block in enumerate(child):
                        walk(block, f"{name}.h{i}" if name else f"h{i}")
                else:
                    walk(child, f"{name}.{key}" if name else key)
        else:
            flat[name] = node

    walk(params, "")
    return flat


def fit_vocabulary(hparams: dict, params: dict, n_vocab: int) -> tuple[dict, dict]:
    """hparams and params with wte cut to the vocabulary's n_vocab rows. A model padded past its
    tokenizer (nanoGPT pads GPT-2's vocabulary to 50,304 rows, a multiple of 64, for speed)
    then never gives an id its vocabulary lacks; the rows cut were never a token's."""
    if "wte" not in params or params["wte"].shape[0] <= n_vocab:  # an encoder-decoder's own
        return hparams, params
    return {**hparams, "n_vocab": n_vocab}, {**params, "wte": params["wte"][:n_vocab]}


def expected_shapes(hparams: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor a GPT-2 (or, with "model": "transformer", the
    2017 encoder-decoder) with these hparams has."""
    if hparams.get("model") == "transformer":
        return seq2seq_shapes(hparams)
    n_embd = hparams["n_embd"]
    block = {"ln_1.g": (n_embd,), "ln_1.b": (n_embd,), "ln_2.g": (n_embd,), "ln_2.b": (n_embd,),
             "attn.c_attn.w": (n_embd, 3 * n_embd), "attn.c_attn.b": (3 * n_embd,),
             "attn.c_proj.w": (n_embd, n_embd), "attn.c_proj.b": (n_embd,),
             "mlp.c_fc.w": (n_embd, 4 * n_embd), "mlp.c_fc.b": (4 * n_embd,),
             "mlp.c_proj.w": (4 * n_embd, n_embd), "mlp.c_proj.b": (n_embd,)}
    return {"wte": (hparams["n_vocab"], n_embd), "wpe": (hparams["n_ctx"], n_embd),
            "ln_f.g": (n_embd,), "ln_f.b": (n_embd,),
            **{f"h{i}.{name}": shape for i in range(hparams["n_layer"])
               for name, shape in block.items()}}


def seq2seq_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor of the 2017 encoder-decoder with these hparams,
    as transformer.init_params makes it (one table, "embed"; d_ff = 4 * n_embd)."""
    d = hparams["n_embd"]
    linear = {"w": (d, d), "b": (d,)}
    attn = {f"{part}.{key}": shape for part in ("q", "k", "v", "c_proj")
            for key, shape in linear.items()}
    norm = {"g": (d,), "b": (d,)}
    mlp = {"mlp.c_fc.w": (d, 4 * d), "mlp.c_fc.b": (4 * d,), "mlp.c_proj.w": (4 * d, d),
           "mlp.c_proj.b": (d,)}

    def block(kinds: tuple[str, ...], norms: int) -> dict:
        return {**{f"{kind}.{k}": v for kind in kinds for k, v in attn.items()},
                **{f"ln_{i}.{k}": v for i in range(1, norms + 1) for k, v in norm.items()}, **mlp}

    shapes = {"embed": (hparams["n_vocab"], d)}
    for stack, n, kinds in (("encoder", hparams["n_layer"], ("attn",)),
                            ("decoder", hparams["n_dec_layer"], ("attn", "cross_attn"))):
        shapes |= {f"{stack}.h{i}.{name}": shape for i in range(n)
                   for name, shape in block(kinds, len(kinds) + 1).items()}
        shapes |= {f"{stack}.ln_f.{k}": v for k, v in norm.items()}
    return shapes


def check_hparams(hparams: Any, source: str, fix: str, names=HPARAMS) -> dict[str, int]:
    """hparams, checked to hold GPT-2's five sizes as positive whole numbers that fit together.
    The error names source, the sizes as source calls them (names), and the fix."""
    if not isinstance(hparams, dict) or not all(
            isinstance(hparams.get(key), int) and not isinstance(hparams[key], bool)
            and hparams[key] > 0 for key in HPARAMS):
        raise PicoGPTError(_("{source} is not GPT-2 hparams (it needs positive integers "
                             "{names}); {fix}.").format(source=source, names=", ".join(names),
                                                        fix=fix))
    if hparams["n_embd"] % hparams["n_head"]:
        raise PicoGPTError(_("{source}: n_embd={n_embd} is not a multiple of n_head={n_head}; "
                             "{fix}.").format(source=source, n_embd=hparams["n_embd"],
                                              n_head=hparams["n_head"], fix=fix))
    if hparams.get("model") is not None:  # an encoder-decoder (a couplet model)
        n_dec = hparams.get("n_dec_layer")
        if hparams["model"] != "transformer" or not (
                isinstance(n_dec, int) and not isinstance(n_dec, bool) and n_dec > 0) or \
                not isinstance(hparams.get("norm_first"), bool):
            raise PicoGPTError(_("{source} names a model picogpt does not know (model "
                                 "{model!r}; picogpt knows GPT-2 and the 2017 transformer, whose "
                                 "hparams also give n_dec_layer and norm_first); {fix}.").format(
                source=source, model=hparams["model"], fix=fix))
        return {key: hparams[key] for key in (*HPARAMS, *SEQ2SEQ)}
    return {key: hparams[key] for key in HPARAMS}


def check_shapes(arrays: dict[str, np.ndarray], hparams: dict[str, int], source: str,
                 weights: str, fix: str) -> None:
    """Raise if the hparams read from source do not describe the tensors in weights."""
    # Blocks past the first one weights lack are not listed: an n_layer of 10**9 would list
    # 12 * 10**9 names (memory runs out) where the first missing block already says it. An
    # encoder-decoder's blocks are encoder.h0 ... and decoder.h0 ...: each stack is counted.
    def held(stack: str) -> int:  # the blocks h0, h1, ... of stack ("" for GPT-2's) in arrays
        return len({name[len(stack):].split(".")[0] for name in arrays
                    if name.startswith(f"{stack}h")})

    seq2seq = hparams.get("model") == "transformer"
    capped = {"n_layer": min(hparams["n_layer"], held("encoder." if seq2seq else "") + 1)}
    if seq2seq:
        capped["n_dec_layer"] = min(hparams["n_dec_layer"], held("decoder.") + 1)
    expected = expected_shapes({**hparams, **capped})
    for name in sorted(expected.keys() | arrays.keys()):
        want, have = expected.get(name), arrays[name].shape if name in arrays else None
        if want != have:
            said = ", ".join(f"{key}={hparams[key]}" for key in HPARAMS)
            none = _("no such tensor")
            raise PicoGPTError(_("{source} ({said}) does not match {weights}: {name} should be "
                                 "{want} but is {have}. {fix}").format(
                                     source=source, said=said, weights=weights, name=name,
                                     want=none if want is None else want,
                                     have=none if have is None else have, fix=fix))


def finite(array: np.ndarray) -> bool:
    """Whether every number of array is finite: no NaN, no infinity. One pass over it."""
    # float32's own sum is the fast pass (SIMD, no copy); it is not finite when a number is
    # not, or when finite numbers overflow it, so then each number is looked at. Overflow and
    # inf - inf are expected here, not warned about
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(array.sum())) or bool(np.isfinite(array).all())


def check_finite(name: str | None, weights: str, fix: str) -> None:
    """Refuse weights whose tensor name (the first not finite, None if none) holds NaN or
    infinity: every number the model gives would be NaN, and no page or sampler can use it."""
    if name is not None:
        raise PicoGPTError(_("{weights} holds NaN or infinity in {name}: a model with such "
                             "weights gives no numbers to sample from. {fix}").format(
                                 weights=weights, name=name, fix=fix))
