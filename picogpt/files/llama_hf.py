"""A Hugging Face folder of the LLaMA kind (config.json's model_type llama, qwen2 or qwen3), read
as picogpt's (encoder, hparams, params), and converted once to the float32 store GPT-2 uses.

The weights are one model.safetensors or shards that model.safetensors.index.json lists (its
paths must name files inside the folder: an index is downloaded, hostile input). Each tensor is
float32, float16 or bfloat16 on disk and float32 in picogpt, so a bfloat16 download takes twice
its size once converted. The conversion is written once, never into the folder (a hub cache or
a folder of someone else's stays as it was), but under the user's cache directory
($XDG_CACHE_HOME or ~/.cache)/picogpt/converted/<folder>-<hash of its path>, as the store
(files/store.py) memory-mapped at every later start. The store remembers the size and time of
each file it was made from and is made again when they change.

Names stay Hugging Face's, with "model." dropped and `layers.{i}` -> params["blocks"][i]
(picogpt/llama/model.py reads them so); hparams are the contract's (see `read_llama_config`).
Anything this kind would compute otherwise than transformers (another activation, a sliding
window, a rope scaling, biases where picogpt has none) is refused in one line before any work.
"""

import hashlib
import os
import shutil
import sys
import zlib
from pathlib import Path, PurePosixPath

import numpy as np
from tqdm import tqdm

from ..errors import N_, PicoGPTError, _, reason
from .folder_vocab import read_vocab
from .params import expected_shapes, fit_vocabulary, nest
from .safetensors_header import safetensors_header
from .store import (
    first_not_finite,
    model_lock,
    read_json,
    read_params,
    write_json_atomic,
    write_params,
)

CONFIG, WEIGHTS, INDEX = "config.json", "model.safetensors", "model.safetensors.index.json"
MODEL_TYPES = ("llama", "qwen2", "qwen3")  # config.json's model_type values of the LLaMA kind
DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}  # what becomes float32
FIX = N_("Save the model and its config together with save_pretrained.")


def of_llama_kind(config) -> bool:
    """Whether a config.json (read as config) describes a model of the LLaMA kind: the one place
    a Hugging Face model_type becomes picogpt's kind ({"model": "llama"}, read_llama_config)."""
    return isinstance(config, dict) and config.get("model_type") in MODEL_TYPES


def load_llama(folder: Path, config: dict, store: Path | None = None) -> tuple:
    """(encoder, hparams, params) of a LLaMA-kind folder whose config.json is config; its
    float32 store in store (by default under the user's cache: `store_dir`)."""
    hparams = read_llama_config(config, folder / CONFIG)
    encoder = read_vocab(folder, _("save the model's tokenizer beside the weights with "
                                   "tokenizer.save_pretrained"))
    if encoder.n_vocab > hparams["n_vocab"]:
        raise PicoGPTError(_("{folder}'s vocabulary holds {n} tokens, but {config} gives the "
                             "model {n_vocab} (vocab_size); the tokenizer is not this model's. "
                             "Save the two together with save_pretrained.").format(
                                 folder=folder, n=encoder.n_vocab, config=CONFIG,
                                 n_vocab=hparams["n_vocab"]))
    params = read_weights(folder, hparams, store)
    return encoder, *fit_vocabulary(hparams, params, encoder.n_vocab)


def read_weights(folder: Path, hparams: dict, store: Path | None = None) -> dict:
    """The params of a folder whose config gave hparams: its float32 store (in store, by default
    under the user's cache: `store_dir`), made first if the store is missing or was made from
    other files."""
    shards = shard_files(folder)
    tensors = tensor_index(folder, shards, hparams)  # shapes checked before any conversion
    stamps = source_stamps(folder, shards)
    store = store or store_dir(folder)
    arrays = read_store(store, stamps)
    if arrays is None:
        with model_lock(store):
            arrays = read_store(store, stamps) or convert(tensors, hparams, store, stamps)
    bad = first_not_finite(store, arrays)
    if bad is not None:
        raise PicoGPTError(_("{folder}'s weights hold NaN or infinity in {name}: a model with "
                             "such weights gives no numbers to sample from.").format(
                                 folder=folder, name=bad))
    return nest(arrays)


def read_llama_config(config: dict, file: Path) -> dict:
    """config.json as the kind's hparams: {"model": "llama", n_vocab, n_ctx, n_embd, n_head,
    n_kv_head, d_head, n_ffn, n_layer, rope_theta, norm_eps, tied, qkv_bias, qk_norm}."""
    kind = config["model_type"]
    sizes = {"n_vocab": "vocab_size", "n_ctx": "max_position_embeddings",
             "n_embd": "hidden_size", "n_head": "num_attention_heads", "n_ffn": "intermediate_size",
             "n_layer": "num_hidden_layers"}
    hparams = {ours: config.get(theirs) for ours, theirs in sizes.items()}
    hparams["n_kv_head"] = config.get("num_key_value_heads") or hparams["n_head"]
    head_dim = config.get("head_dim")
    if head_dim is None and isinstance(hparams["n_head"], int) and hparams["n_head"] > 0 \
            and isinstance(hparams["n_embd"], int):
        head_dim = hparams["n_embd"] // hparams["n_head"]
    hparams["d_head"] = head_dim
    if not all(isinstance(value, int) and not isinstance(value, bool) and value > 0
               for value in hparams.values()):
        raise PicoGPTError(_("{file} does not give the sizes of a {kind} model as positive whole "
                             "numbers ({names}); {fix}").format(
                                 file=file, kind=kind, names=", ".join(sizes.values()), fix=_(FIX)))
    if hparams["n_head"] % hparams["n_kv_head"]:
        raise PicoGPTError(_("{file}: num_attention_heads={n_head} is not a multiple of "
                             "num_key_value_heads={n_kv_head}; {fix}").format(
                                 file=file, n_head=hparams["n_head"],
                                 n_kv_head=hparams["n_kv_head"], fix=_(FIX)))
    rope = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    scaling = config.get("rope_scaling") or rope
    rope_type = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    different = {"hidden_act": (config.get("hidden_act", "silu"), "silu"),
                 "rope_type": (rope_type or "default", "default"),
                 "use_sliding_window": (bool(config.get("use_sliding_window")), False),
                 "attention_bias": (bool(config.get("attention_bias")) and kind != "qwen2", False),
                 "mlp_bias": (bool(config.get("mlp_bias")), False)}
    for key, (value, wanted) in different.items():
        if value != wanted:
            raise PicoGPTError(_("{file} sets {key}={value}; picogpt computes the {kind} kind "
                                 "with {key}={wanted} only, as Qwen2.5, Qwen3 and Llama 3 "
                                 "have it.").format(file=file, key=key, value=repr(value),
                                                    kind=kind, wanted=repr(wanted)))
    theta = config.get("rope_theta", rope.get("rope_theta", 10000.0))
    eps = config.get("rms_norm_eps", 1e-6)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
               for v in (theta, eps)):
        raise PicoGPTError(_("{file} gives rope_theta={theta} and rms_norm_eps={eps}; both must "
                             "be positive numbers. {fix}").format(file=file, theta=repr(theta),
                                                                  eps=repr(eps), fix=_(FIX)))
    return {"model": "llama", **hparams, "rope_theta": float(theta), "norm_eps": float(eps),
            "tied": bool(config.get("tie_word_embeddings", False)),
            "qkv_bias": kind == "qwen2", "qk_norm": kind == "qwen3"}


def flat_name(key: str) -> str | None:
    """Hugging Face's tensor name -> the store's flat name (`model.layers.3.mlp.up_proj.weight`
    -> `h3.mlp.up_proj.weight`); None for a buffer transformers recomputes (rotary_emb)."""
    if "rotary_emb." in key:  # older Llama files keep rope's inv_freq: picogpt computes it
        return None
    parts = key.removeprefix("model.").split(".")
    if parts[0] == "layers" and len(parts) > 2:
        parts = [f"h{parts[1]}", *parts[2:]]
    return ".".join(parts)


def nest_llama(arrays: dict[str, np.ndarray]) -> dict:
    """Checkpoint names -> nested params: `model.layers.3.mlp.up_proj.weight` ->
    params["blocks"][3]["mlp"]["up_proj"]["weight"]."""
    return nest({flat_name(key): array for key, array in arrays.items()
                 if flat_name(key) is not None})


def shard_files(folder: Path) -> list[str]:
    """The safetensors files that hold the weights: model.safetensors, or the shards the index
    lists, each a file inside the folder."""
    if (folder / WEIGHTS).is_file():
        return [WEIGHTS]
    if not (folder / INDEX).is_file():
        raise PicoGPTError(_("{folder} has neither {weights} nor {index}; save the model with "
                             "save_pretrained.").format(folder=folder, weights=WEIGHTS,
                                                        index=INDEX))
    names = shard_names(read_json(folder / INDEX), folder / INDEX)
    for name in names:
        if not (folder / name).is_file():
            raise PicoGPTError(_("{folder} lacks {name}, a shard its {index} lists; download the "
                                 "model again.").format(folder=folder, name=name, index=INDEX))
    return names


def shard_names(index, file: Path) -> list[str]:
    """The shards an index (its parsed JSON, read from file) lists, each a plain file name: an
    index is downloaded, and a path such as ../../.ssh/id_rsa must never be opened."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str)
                                                   for v in weight_map.values()):
        raise PicoGPTError(_("{file} has no weight_map of tensor names to files; download or "
                             "save it again.").format(file=file))
    names = list(dict.fromkeys(weight_map.values()))
    for name in names:
        path = PurePosixPath(name)
        if name in ("", "..") or path.is_absolute() or "\\" in name or name != path.name:
            raise PicoGPTError(_("{file} names the shard {name}, which is not a file inside the "
                                 "folder; picogpt reads only shards beside the index.").format(
                                     file=file, name=repr(name)))
    return names


def tensor_index(folder: Path, shards: list[str], hparams: dict) -> dict[str, tuple]:
    """Each tensor the model uses: flat name -> (file, dtype, offset, shape), checked against
    the shapes hparams give, from the files' headers alone."""

    tensors = {}
    for shard in shards:
        for key, (dtype, offset, shape) in safetensors_header(folder / shard).items():
            name = flat_name(key)
            if name is not None:
                tensors[name] = (folder / shard, dtype, offset, shape)
    if hparams["tied"]:
        tensors.pop("lm_head.weight", None)  # transformers ties it to the embedding too
    expected = expected_shapes(hparams)
    for name in sorted(expected.keys() | tensors.keys()):
        want = expected.get(name)
        have = tensors[name][3] if name in tensors else None
        if want != have:
            none = _("no such tensor")
            raise PicoGPTError(_("{config} and the weights of {folder} disagree: {name} should "
                                 "be {want} but is {have}. {fix}").format(
                                     config=CONFIG, folder=folder, name=name,
                                     want=none if want is None else want,
                                     have=none if have is None else have, fix=_(FIX)))
        if tensors[name][1] not in DTYPES:
            raise PicoGPTError(_("{file} stores {name} as {dtype}; picogpt reads F32, F16 and "
                                 "BF16 weights. Save the model as float32.").format(
                                     file=tensors[name][0], name=name, dtype=tensors[name][1]))
    return tensors


def source_stamps(folder: Path, shards: list[str]) -> dict:
    """What identifies the files the store is made from: each shard's size and time, and
    config.json's CRC-32."""
    stamps = {name: [(folder / name).stat().st_size, (folder / name).stat().st_mtime_ns]
              for name in shards}
    return {**stamps, CONFIG: zlib.crc32((folder / CONFIG).read_bytes())}


def store_dir(folder: Path) -> Path:
    """Where the float32 store of folder lives: the user's cache, never the folder itself."""
    where = folder.resolve()
    name = where.name
    if where.parent.name == "snapshots":  # a hub snapshot: models--Qwen--Qwen3-0.6B-<commit>
        name = f"{where.parent.parent.name}-{where.name[:12]}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(where).encode("utf-8")).hexdigest()[:12]
    return cache / "picogpt" / "converted" / f"{name}-{digest}"


def read_store(store: Path, stamps: dict) -> dict[str, np.ndarray] | None:
    """The stored float32 tensors by flat name, if the store was made from these files."""
    manifest = read_json(store / "params" / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("source") != stamps:
        return None
    return read_params(store)


def convert(tensors: dict, hparams: dict, store: Path, stamps: dict) -> dict[str, np.ndarray]:
    """Write every tensor as float32 into the store, saying first how much disk it takes."""
    needed = sum(4 * int(np.prod(tensor[3])) for tensor in tensors.values())
    free = shutil.disk_usage(store).free
    tqdm.write(_("converting the weights to float32 once: {size} in {store}").format(
        size=megabytes(needed), store=store), file=sys.stderr)
    if needed > free:
        raise PicoGPTError(_("converting the weights takes {needed} of disk, but {store} has "
                             "{free} free; free some space (or set XDG_CACHE_HOME to a disk "
                             "with room) and run again.").format(
                                 needed=megabytes(needed), store=store, free=megabytes(free)))
    arrays = ((name, read_tensor(*tensors[name])) for name in
              tqdm(sorted(tensors), desc=_("converting"), unit=" tensors", file=sys.stderr,
                   leave=False))
    try:
        written = write_params(store, arrays, source=stamps)
        write_json_atomic(store / "hparams.json", hparams)
    except OSError as e:
        raise PicoGPTError(_("cannot write the converted weights to {store}: {reason}. Set "
                             "XDG_CACHE_HOME to a folder you can write.").format(
                                 store=store, reason=reason(e))) from None
    return written


def read_tensor(file: Path, dtype: str, offset: int, shape: tuple) -> np.ndarray:
    """One tensor of a safetensors file as a float32 array in memory."""
    count = int(np.prod(shape))
    raw = np.fromfile(file, DTYPES[dtype], count, offset=offset).reshape(shape)
    if dtype == "BF16":  # bfloat16 is the top half of a float32's bits; NumPy has no bfloat16
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def megabytes(n_bytes: int) -> str:
    """A size as people read it: 1.9 GB, 532 MB, 87 kB."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.1f} GB"
    return f"{n_bytes / 1e6:.0f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:.0f} kB"
