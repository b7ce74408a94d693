"""Reading a GPT-2 saved in Hugging Face's format: `load_hf(path) -> (encoder, hparams, params)`.

Owns finding the folder (a path, or a model id in the local Hugging Face cache), reading
config.json, the tokenizer files and model.safetensors, and renaming Hugging Face's tensor names
to OpenAI's (`transformer.h.3.attn.c_attn.weight` -> `blocks[3]["attn"]["c_attn"]["w"]`). It
returns what `load_encoder_hparams_and_params` returns, so every command works on it. It never
touches the network and never writes: a model that is not on disk is an error, not a download.

GPT-2's Conv1D layers store weights as [n_in, n_out] in both formats, so no tensor is
transposed; float32 tensors are memory-mapped straight from the file.
"""

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .encoder import END_OF_TEXT, Encoder
from .errors import PicoGPTError
from .load import HPARAMS, expected_shapes, nest

WEIGHTS, CONFIG, VOCAB, MERGES = "model.safetensors", "config.json", "vocab.json", "merges.txt"
# settings of GPT2Config that would change the math if they were not GPT-2's own
SAME_MATH = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
             "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
             "reorder_and_upcast_attn": False, "add_cross_attention": False}


def load_hf(path: str) -> tuple[Encoder, dict[str, int], dict[str, Any]]:
    """A Hugging Face GPT-2 folder, or a model id in the local cache: (encoder, hparams, params)."""
    folder = find_folder(path)
    hparams = read_config(folder)
    encoder = read_tokenizer(folder)
    arrays = read_safetensors(folder)
    check_tensors(arrays, hparams, folder)
    return encoder, hparams, nest(arrays)


def hub_cache() -> Path:
    """The local Hugging Face cache: $HF_HUB_CACHE, else $HF_HOME/hub, else the default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    default_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface"
    return Path(os.environ.get("HF_HOME", default_home)) / "hub"


def find_folder(path: str) -> Path:
    """path itself if it is a folder, else the snapshot of model id `path` in the cache."""
    if Path(path).is_dir():
        return Path(path)
    repo = hub_cache() / f"models--{path.replace('/', '--')}"
    ref = repo / "refs" / "main"
    snapshots = sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime)
    if ref.is_file() and (repo / "snapshots" / ref.read_text().strip()).is_dir():
        return repo / "snapshots" / ref.read_text().strip()
    if snapshots:
        return snapshots[-1]  # no refs/main: the newest snapshot
    raise PicoGPTError(f"--hf {path}: no such folder, and no model {path!r} in the Hugging Face "
                       f"cache {hub_cache()}. picogpt downloads nothing from the hub: give a "
                       f"folder, or download it first (huggingface-cli download {path}).")


def read_json_file(file: Path) -> Any:
    """A JSON file's contents, or a one-line error naming the file."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PicoGPTError(f"cannot read {file}: {getattr(e, 'strerror', None) or e}.") from None


def read_config(folder: Path) -> dict[str, int]:
    """config.json as picogpt's hparams, refusing a model that is not GPT-2's architecture."""
    if not (folder / CONFIG).is_file():
        raise PicoGPTError(f"{folder} has no {CONFIG}; it is not a Hugging Face model folder.")
    config = read_json_file(folder / CONFIG)
    if not isinstance(config, dict) or config.get("model_type") != "gpt2":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise PicoGPTError(f"{folder / CONFIG} describes a {kind!r} model; picogpt runs GPT-2's "
                           f"architecture only (model_type \"gpt2\", as in gpt2 or distilgpt2).")
    for key, value in SAME_MATH.items():
        if config.get(key, value) != value:
            raise PicoGPTError(f"{folder / CONFIG} sets {key}={config[key]!r}; picogpt computes "
                               f"GPT-2 with {key}={value!r} only.")
    hparams = {"n_vocab": config.get("vocab_size"), "n_ctx": config.get("n_positions"),
               "n_embd": config.get("n_embd"), "n_head": config.get("n_head"),
               "n_layer": config.get("n_layer")}
    if not all(isinstance(v, int) and v > 0 for v in hparams.values()) or (
            hparams["n_embd"] % hparams["n_head"]):
        raise PicoGPTError(f"{folder / CONFIG} does not give GPT-2's sizes as positive whole "
                           f"numbers (vocab_size, n_positions, n_embd a multiple of n_head, "
                           f"n_layer): {hparams}.")
    if config.get("n_inner") not in (None, 4 * hparams["n_embd"]):
        raise PicoGPTError(f"{folder / CONFIG} sets n_inner={config['n_inner']}; picogpt's "
                           f"GPT-2 has an MLP of 4 * n_embd = {4 * hparams['n_embd']}.")
    return {key: hparams[key] for key in HPARAMS}


def read_tokenizer(folder: Path) -> Encoder:
    """The byte-level BPE from vocab.json and merges.txt (encoder.json and vocab.bpe by
    Hugging Face's names)."""
    missing = [name for name in (VOCAB, MERGES) if not (folder / name).is_file()]
    if missing:
        raise PicoGPTError(f"{folder} has no {' or '.join(missing)}: picogpt needs GPT-2's "
                           f"tokenizer files beside the weights (save the tokenizer there too, "
                           f"e.g. tokenizer.save_pretrained).")
    vocab = read_json_file(folder / VOCAB)
    if not isinstance(vocab, dict) or vocab.get("<|endoftext|>") != END_OF_TEXT:
        raise PicoGPTError(f"{folder / VOCAB} is not a GPT-2 vocabulary (it needs <|endoftext|> "
                           f"= {END_OF_TEXT}).")
    try:
        lines = (folder / MERGES).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(f"cannot read {folder / MERGES}: {e}.") from None
    merges = [tuple(line.split()) for line in lines if line and not line.startswith("#version")]
    if not merges or any(len(merge) != 2 for merge in merges):
        raise PicoGPTError(f"{folder / MERGES} is not a BPE merge list (one pair per line).")
    return Encoder(vocab, merges)


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors under picogpt's flat names ("h3.attn.c_attn.w")."""
    file = folder / WEIGHTS
    if not file.is_file():
        others = [p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".h5")]
        hint = (f"it holds {', '.join(sorted(others))}: load it with transformers and re-save "
                f"it with model.save_pretrained(folder, safe_serialization=True)"
                if others else "save the model with save_pretrained")
        raise PicoGPTError(f"{folder} has no {WEIGHTS}; {hint}.")
    from safetensors import SafetensorError, safe_open

    arrays, offsets = {}, safetensors_offsets(file)
    try:
        with safe_open(str(file), framework="numpy") as f:
            for key in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                name = flat_name(key)
                if name is None:
                    continue
                if key in offsets:  # float32: mapped from the file, not copied
                    arrays[name] = np.memmap(file, "<f4", "r", *offsets[key])
                else:
                    arrays[name] = f.get_tensor(key).astype(np.float32)
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise PicoGPTError(f"cannot read {file} ({str(e).splitlines()[0][:200]}).") from None
    return arrays


def safetensors_offsets(file: Path) -> dict[str, tuple[int, tuple]]:
    """Where each little-endian float32 tensor's bytes start in the file, and its shape."""
    # the format: an 8-byte little-endian header size, a JSON header of name -> {dtype, shape,
    # data_offsets}, then the tensors' bytes, offsets counted from the end of the header
    with open(file, "rb") as f:
        n_header = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n_header))
    return {key: (8 + n_header + meta["data_offsets"][0], tuple(meta["shape"]))
            for key, meta in header.items() if key != "__metadata__" and meta["dtype"] == "F32"}


def flat_name(key: str) -> str | None:
    """Hugging Face's tensor name -> picogpt's flat name; None for the causal-mask buffers."""
    key = key.removeprefix("transformer.")  # save_pretrained writes it; the hub's gpt2 does not
    if key.startswith("lm_head."):
        return "lm_head"  # the output layer: check_tensors wants it tied to wte
    if key.endswith((".attn.bias", ".attn.masked_bias")):  # older files store the mask
        return None
    *path, leaf = key.split(".")  # "h", "3", "attn", "c_attn", "weight"
    if path[0] == "h":
        path = [f"h{path[1]}", *path[2:]]
    if leaf == "bias":
        return ".".join([*path, "b"])
    if path[-1] in ("wte", "wpe"):
        return path[-1]
    return ".".join([*path, "w" if path[-1].startswith("c_") else "g"])  # linear or layer norm


def check_tensors(arrays: dict[str, np.ndarray], hparams: dict[str, int], folder: Path) -> None:
    """Refuse tensors that do not fit config.json, or an output layer that is not wte."""
    lm_head = arrays.pop("lm_head", None)
    expected = expected_shapes(hparams)
    for name in sorted(expected.keys() | arrays.keys()):
        want = expected.get(name, "no such tensor")
        have = arrays[name].shape if name in arrays else "no such tensor"
        if want != have:
            raise PicoGPTError(f"{folder / WEIGHTS} does not fit {folder / CONFIG}: {name} "
                               f"should be {want} but is {have}.")
    if lm_head is not None and not np.array_equal(lm_head, arrays["wte"]):
        raise PicoGPTError(f"{folder / WEIGHTS} has an lm_head.weight that differs from wte; "
                           f"picogpt's GPT-2 uses wte as its output layer (tied weights).")
