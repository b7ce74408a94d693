"""Reading a GPT-2 saved in Hugging Face's format: `load_hf(path) -> (encoder, hparams, params)`.

It finds the folder (a path, or a hub id that files/hub.py fetches), reads config.json and
model.safetensors, and renames Hugging Face's tensor names to OpenAI's
(`transformer.h.3.attn.c_attn.weight` -> `blocks[3]["attn"]["c_attn"]["w"]`). It returns what
`load_encoder_hparams_and_params` returns, so every command runs on it, and it never writes.

GPT-2's Conv1D layers store weights as [n_in, n_out] in both formats, so no tensor is
transposed. model.safetensors is read here, not through a library: float32 tensors are mapped
straight from the file, float16 and bfloat16 ones (NumPy has no bfloat16) become float32, and
a file that is not what it claims to be (a Git LFS pointer, a truncated download) gets a
sentence that names the problem.
"""

import json
from pathlib import Path

import numpy as np

from ..encoder import Encoder
from ..errors import PicoGPTError, _, reason
from ..kinds import Kind, kind_of
from .folder_vocab import read_vocab
from .hub import hub_cache, hub_folder, is_model_id  # noqa: F401 (hub_cache: hf's too)
from .llama_hf import load_llama, of_llama_kind
from .params import check_finite, check_hparams, check_shapes, finite, fit_vocabulary, nest
from .safetensors_header import DTYPES, safetensors_header
from .store import read_json

WEIGHTS, CONFIG = "model.safetensors", "config.json"
# settings of GPT2Config that would change the math if they were not GPT-2's own
SAME_MATH = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
             "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
             "reorder_and_upcast_attn": False, "add_cross_attention": False}


def load_hf(path: str, store: Path | None = None) -> tuple[Encoder, dict, dict]:
    """A Hugging Face folder, or a model id of the hub: (encoder, hparams, params). config.json
    is read here, and only here: GPT-2's (model_type gpt2) or the LLaMA kind's (llama, qwen2,
    qwen3), whose hparams say {"model": "llama"} and whose float32 store goes in store (by
    default under the user's cache; GPT-2's weights are read as they are)."""
    folder = find_folder(path)
    config = read_json(folder / CONFIG)
    if of_llama_kind(config):
        return load_llama(folder, config, store)
    hparams = read_config(folder)
    encoder = read_vocab(folder, _("save the model's tokenizer beside the weights with "
                                   "tokenizer.save_pretrained"))
    if encoder.n_vocab > hparams["n_vocab"]:  # a larger model's wte may hold unused rows
        raise PicoGPTError(_("{folder}'s vocabulary holds {n} tokens, but {config} gives the "
                             "model {n_vocab} (vocab_size): ids past {last} have no row in wte. "
                             "The tokenizer is not this model's; save the two together with "
                             "save_pretrained.").format(
                                 folder=folder, n=encoder.n_vocab, config=CONFIG,
                                 n_vocab=hparams["n_vocab"], last=hparams["n_vocab"] - 1))
    arrays = read_safetensors(folder)
    lm_head = arrays.pop("lm_head", None)
    check_shapes(arrays, hparams, str(folder / CONFIG), str(folder / WEIGHTS),
                 _("Save the model and its config together with save_pretrained."))
    # Every weight, at every load: picogpt writes nothing into a Hugging Face folder to remember
    # it, and the pass costs a little next to the first step, which reads every weight too
    # (docs/troubleshooting.md has the figures)
    check_finite(next((name for name, array in arrays.items() if not finite(array)), None),
                 str(folder / WEIGHTS), _("Save the model again from weights that are finite."))
    if lm_head is not None and not np.array_equal(lm_head, arrays["wte"]):
        raise PicoGPTError(_("{file} has an lm_head.weight that differs from wte; picogpt's "
                             "GPT-2 uses wte as its output layer (tied weights).").format(
                                 file=folder / WEIGHTS))
    return (encoder, *fit_vocabulary(hparams, nest(arrays), encoder.n_vocab))


def find_folder(path: str) -> Path:
    """path itself if it is a folder, else model id `path` from the Hugging Face cache,
    downloaded there first if the cache does not hold what picogpt reads (hub.py)."""
    if Path(path).is_dir():
        return Path(path)
    if not is_model_id(path):
        raise PicoGPTError(_("--hf {path}: no such folder. Give a folder saved with "
                             "save_pretrained, or a model id of the hub such as gpt2 or "
                             "uer/gpt2-chinese-poem.").format(path=path))
    return hub_folder(path)


def hf_kind(path: str) -> Kind:
    """The kind of the model of a Hugging Face folder, from its config.json without its weights:
    the LLaMA kind's row when config.json says so; GPT-2's otherwise, and for a hub id not on
    disk (loading it then says what it is)."""
    folder = Path(path)
    config = read_json(folder / CONFIG) if folder.is_dir() else None
    return kind_of({"model": "llama"} if of_llama_kind(config) else {})


def read_config(folder: Path) -> dict[str, int]:
    """config.json as picogpt's hparams, refusing a model that is not GPT-2's architecture."""
    if not (folder / CONFIG).is_file():
        raise PicoGPTError(_("{folder} has no {config}; it is not a Hugging Face model "
                             "folder.").format(folder=folder, config=CONFIG))
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except RecursionError:  # "[" * 100000: deeper than json's reader can go
        raise PicoGPTError(_("cannot read {file}: its JSON is nested too deeply.").format(
            file=folder / CONFIG)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PicoGPTError(_("cannot read {file}: {reason}.").format(
            file=folder / CONFIG, reason=reason(e))) from None
    if not isinstance(config, dict) or config.get("model_type") != "gpt2":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise PicoGPTError(_("{file} describes a {kind} model; picogpt runs GPT-2's "
                             "architecture (model_type \"gpt2\", as in gpt2 or "
                             "distilgpt2) and the LLaMA kind's (llama, qwen2, qwen3)."
                             ).format(file=folder / CONFIG, kind=repr(kind)))
    for key, value in SAME_MATH.items():
        if config.get(key, value) != value:
            raise PicoGPTError(_("{file} sets {key}={value}; picogpt computes GPT-2 with "
                                 "{key}={wanted} only.").format(
                                     file=folder / CONFIG, key=key, value=repr(config[key]),
                                     wanted=repr(value)))
    names = {"n_vocab": "vocab_size", "n_ctx": "n_positions", "n_embd": "n_embd",
             "n_head": "n_head", "n_layer": "n_layer"}
    hparams = check_hparams({ours: config.get(theirs) for ours, theirs in names.items()},
                            str(folder / CONFIG), _("it is not a GPT-2 config"),
                            names=names.values())
    if config.get("n_inner") not in (None, 4 * hparams["n_embd"]):
        raise PicoGPTError(_("{file} sets n_inner={n_inner}; picogpt's GPT-2 has an MLP of "
                             "4 * n_embd = {width}.").format(
                                 file=folder / CONFIG, n_inner=config["n_inner"],
                                 width=4 * hparams["n_embd"]))
    return hparams


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors that picogpt uses, as float32, under its flat names."""
    file = folder / WEIGHTS
    if not file.is_file():
        others = [p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".h5")]
        hint = (_("it holds {others}: load it with transformers and re-save it with "
                  "model.save_pretrained(folder, safe_serialization=True)").format(
                      others=", ".join(sorted(others)))
                if others else _("save the model with save_pretrained"))
        raise PicoGPTError(_("{folder} has no {weights}; {hint}.").format(
            folder=folder, weights=WEIGHTS, hint=hint))
    arrays = {}
    for key, (dtype, offset, shape) in safetensors_header(file).items():
        name = flat_name(key)
        if name is None:
            continue
        if dtype not in DTYPES:
            raise PicoGPTError(_("{file} stores {key} as {dtype}; picogpt reads F32, F16, BF16 "
                                 "and F64 weights. Save the model as float32.").format(
                                     file=file, key=key, dtype=dtype))
        count = int(np.prod(shape))
        array = (np.memmap(file, DTYPES[dtype], "r", offset, (count,)).reshape(shape) if count
                 else np.zeros(shape, DTYPES[dtype]))
        if dtype == "BF16":  # bfloat16 is the top half of a float32's bits
            array = (array.astype(np.uint32) << 16).view(np.float32)
        arrays[name] = array if array.dtype == np.float32 else array.astype(np.float32)
    return arrays


def flat_name(key: str) -> str | None:
    """Hugging Face's tensor name -> picogpt's flat name; None for the causal-mask buffers."""
    key = key.removeprefix("transformer.")  # save_pretrained writes it; the hub's gpt2 does not
    if key.startswith("lm_head."):
        return "lm_head"  # the output layer: load_hf wants it tied to wte
    if key.endswith((".attn.bias", ".attn.masked_bias")):  # older files store the mask
        return None
    *path, leaf = key.split(".")  # "h", "3", "attn", "c_attn", "weight"
    if path and path[0] == "h" and len(path) > 1:
        path = [f"h{path[1]}", *path[2:]]
    if leaf == "bias":
        return ".".join([*path, "b"])
    if path and path[-1] in ("wte", "wpe"):
        return path[-1]
    return ".".join([*path, "w" if path and path[-1].startswith("c_") else "g"])
