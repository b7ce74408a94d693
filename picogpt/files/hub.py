"""A model id of the Hugging Face hub (`--hf uer/gpt2-chinese-poem`) as a folder on disk.

`hub_folder(model_id)` gives the snapshot in the user's Hugging Face cache when it already holds
what picogpt reads (then nothing is sent), else downloads exactly those files through
`huggingface_hub`: model.safetensors, config.json and one vocabulary (vocab.json + merges.txt,
or vocab.txt with tokenizer_config.json and special_tokens_map.json, or else tokenizer.json with
tokenizer_config.json), never the .bin, .h5, msgpack or onnx copies. HF_ENDPOINT, HF_HOME,
HF_HUB_CACHE, HF_HUB_OFFLINE and HF_TOKEN work as they do for huggingface_hub; each failure is
one sentence.
"""

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from ..errors import PicoGPTError, _, reason
from .llama_hf import megabytes, of_llama_kind, shard_names
from .store import read_json

WEIGHTS, CONFIG = "model.safetensors", "config.json"
INDEX = "model.safetensors.index.json"  # the LLaMA kind's weights in shards, which it lists
# what a model of the LLaMA kind reads besides its weights: every tokenizer file the repo has
# (tokenizer.json holds what vocab.json lacks: added tokens, the normalizer, the regex), and the
# end tokens and chat template of generation_config.json and tokenizer_config.json (or
# chat_template.jinja, where transformers 5 saves the template)
LLAMA_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "generation_config.json", "chat_template.jinja")
VOCABULARIES = (("vocab.json", "merges.txt"),  # byte-level BPE: GPT-2's
                ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"))  # WordPiece
WHOLE = (("vocab.json", "merges.txt"), ("vocab.txt",), ("tokenizer.json",))  # read_vocab's
# either kind, as transformers 5 saves it: fetched when the repo has neither of the above
DESCRIBED = ("tokenizer.json", "tokenizer_config.json")
MODEL_ID = re.compile(r"([\w.-]+/)?[\w.-]+")  # "gpt2", "uer/gpt2-chinese-poem"


def hub_cache() -> Path:
    """The local Hugging Face cache, by the hub client's rules: $HF_HUB_CACHE, else the older
    $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
    ~/.cache/huggingface/hub."""
    home = os.environ.get("HF_HOME") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path("~/.cache")) / "huggingface"
    cache = (os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
             or Path(home) / "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def is_model_id(name: str) -> bool:
    """Whether name can be a hub model id rather than a path: one or two names, one slash."""
    return bool(MODEL_ID.fullmatch(name)) and not name.startswith(".") and ".." not in name


def cached_folder(model_id: str) -> Path | None:
    """The snapshot of model_id that refs/main names (the newest one if there is no refs/main),
    if it holds everything picogpt reads; None otherwise."""
    repo = hub_cache() / f"models--{model_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    named = repo / "snapshots" / ref.read_text().strip() if ref.is_file() else None
    if named is None or not named.is_dir():
        snapshots = sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime)
        named = snapshots[-1] if snapshots else None
    return named if named is not None and is_complete(named) else None


def is_complete(folder: Path) -> bool:
    """Whether folder holds the weights (one file, or an index and every shard it lists), the
    config and a whole vocabulary. picogpt downloads the weights last, so a folder that holds
    them holds whatever else it fetched."""
    return (folder / CONFIG).is_file() and has_weights(folder) and any(
        all((folder / name).is_file() for name in names) for names in WHOLE)


def has_weights(folder: Path) -> bool:
    """Whether folder holds model.safetensors, or an index whose shards are all there."""
    if (folder / WEIGHTS).is_file():
        return True
    try:
        return (folder / INDEX).is_file() and all(
            (folder / name).is_file()
            for name in shard_names(read_json(folder / INDEX), folder / INDEX))
    except PicoGPTError:
        return False


def hub_folder(model_id: str) -> Path:
    """The folder of model_id: the cached snapshot, or one downloaded now."""
    return cached_folder(model_id) or download(model_id)


def download(model_id: str) -> Path:
    """Download what picogpt reads of model_id into the Hugging Face cache; its snapshot folder."""
    from huggingface_hub import HfApi, hf_hub_download

    def fetch(name: str) -> Path:  # from the main branch: huggingface_hub records refs/main
        return Path(hf_hub_download(model_id, name, cache_dir=hub_cache()))

    with hub_errors(model_id), quiet_retries():
        # the file list, their sizes and the commit, before any download
        info = HfApi().model_info(model_id, files_metadata=True)
        sizes = {sibling.rfilename: sibling.size for sibling in info.siblings or []}
        # the config first: a model of the LLaMA kind reads more files (LLAMA_FILES)
        # (only from a repo with weights picogpt reads: else it is refused before any download)
        weights = WEIGHTS in sizes or INDEX in sizes
        config = read_json(fetch(CONFIG)) if CONFIG in sizes and weights else None
        wanted = files_to_fetch(model_id, set(sizes), config)
        if wanted[-1] == INDEX:  # the shards it lists come after it, the weights last
            index = fetch(INDEX)
            shards = shard_names(read_json(index), index)
            wanted = [*wanted, *shards]
        say_sizes(model_id, wanted, sizes, config)
        paths = [fetch(name) for name in wanted]
    return paths[-1].parent


def say_sizes(model_id: str, wanted: list[str], sizes: dict, config) -> None:
    """For a model of the LLaMA kind, whose weights picogpt converts: say the disk the download
    takes, and about what the float32 copy will (twice a bfloat16 or float16 download's)."""
    known = [sizes.get(name) for name in wanted]
    if not of_llama_kind(config) or not all(isinstance(size, int) for size in known):
        return  # GPT-2's weights are read as they are; or a hub that does not say
    weights = sum(sizes[name] for name in wanted if name.endswith(".safetensors"))
    tqdm.write(_("downloading {model_id}: {size} into {cache}").format(
        model_id=model_id, size=megabytes(sum(known)), cache=hub_cache()), file=sys.stderr)
    dtype = config.get("dtype", config.get("torch_dtype"))
    factor = 2 if dtype in ("bfloat16", "float16") else 1
    tqdm.write(_("then converting its weights to float32 takes about {size} more").format(
        size=megabytes(factor * weights)), file=sys.stderr)


def files_to_fetch(model_id: str, files: set[str], config=None) -> list[str]:
    """The files of the repo that picogpt reads, weights last (a sharded repo's index, whose
    shards follow it); a repo without them is refused. config: the repo's config.json, read
    first, since a model of the LLaMA kind reads more files (LLAMA_FILES)."""
    if of_llama_kind(config) and (WEIGHTS in files or INDEX in files):
        return [CONFIG, *(name for name in LLAMA_FILES if name in files),
                WEIGHTS if WEIGHTS in files else INDEX]
    if WEIGHTS not in files:
        others = sorted(name for name in files if name.endswith((".bin", ".h5", ".msgpack",
                                                                 ".onnx", ".pt", ".ckpt")))
        held = (_("it holds {others}").format(others=", ".join(others)) if others
                else _("it holds no weights at all"))
        raise PicoGPTError(_("--hf {model_id}: the repo has no {weights} ({held}), and picogpt "
                             "reads only safetensors. Load it with transformers, save it with "
                             "model.save_pretrained(folder) (which writes {weights}) and run "
                             "--hf folder.").format(model_id=model_id, weights=WEIGHTS,
                                                    held=held))
    if CONFIG not in files:
        raise PicoGPTError(_("--hf {model_id}: the repo has no {config}; it is not a model "
                             "saved with transformers' save_pretrained.").format(
                                 model_id=model_id, config=CONFIG))
    vocabulary = [name for names in VOCABULARIES for name in names if name in files]
    if not any(all(name in files for name in names) for names in WHOLE[:2]):
        vocabulary = list(dict.fromkeys([*vocabulary, *(n for n in DESCRIBED if n in files)]))
    return [CONFIG, *vocabulary, WEIGHTS]


@contextlib.contextmanager
def hub_errors(model_id: str) -> Iterator[None]:
    """Each way the hub can fail, as one PicoGPTError sentence; Ctrl-C says what stopped."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub import errors as hub

    where = _("the hub at {endpoint}").format(endpoint=constants.ENDPOINT)
    try:
        yield
    except KeyboardInterrupt:  # huggingface_hub removes a file it did not finish
        raise KeyboardInterrupt(_("stopped downloading {model_id}; nothing half-downloaded is "
                                  "kept, and the next run downloads it again.").format(
                                      model_id=model_id)) from None
    except hub.GatedRepoError:
        raise PicoGPTError(_("--hf {model_id}: the model is gated on {where}; accept its terms "
                             "on its page, then set HF_TOKEN to a token of yours (or run "
                             "'hf auth login').").format(model_id=model_id, where=where)
                           ) from None
    except hub.RepositoryNotFoundError:
        raise PicoGPTError(_("--hf {model_id}: no such folder, and no model {name} on {where} "
                             "(or it is private: set HF_TOKEN to a token that may read it). "
                             "Check the id, as in --hf gpt2 or --hf uer/gpt2-chinese-poem."
                             ).format(model_id=model_id, name=repr(model_id), where=where)
                           ) from None
    except (hub.OfflineModeIsEnabled, hub.LocalEntryNotFoundError) as e:
        if not constants.is_offline_mode():  # a file's HEAD failed: the hub went away
            raise unreachable(model_id, where, e) from None
        raise PicoGPTError(_("--hf {model_id}: HF_HUB_OFFLINE is set and the Hugging Face cache "
                             "{cache} does not hold the model's {weights}, {config} and "
                             "vocabulary; unset HF_HUB_OFFLINE to download them once.").format(
                                 model_id=model_id, cache=hub_cache(), weights=WEIGHTS,
                                 config=CONFIG)) from None
    except hub.HfHubHTTPError as e:
        raise PicoGPTError(_("--hf {model_id}: {where} answered {status} ({reason}); try again "
                             "later.").format(model_id=model_id, where=where,
                                              status=e.response.status_code,
                                              reason=e.response.reason_phrase)) from None
    except (httpx2.TransportError, OSError) as e:
        raise unreachable(model_id, where, e) from None


def unreachable(model_id: str, where: str, error: Exception) -> PicoGPTError:
    """The hub could not be reached, or stopped answering in the middle of a file."""
    return PicoGPTError(_("--hf {model_id}: cannot download from {where} ({error}); nothing "
                          "half-downloaded is kept. Check the connection and run again.").format(
                              model_id=model_id, where=where, error=reason(error)))



@contextlib.contextmanager
def quiet_retries() -> Iterator[None]:
    """huggingface_hub's warnings off (it logs each retry of a cut download); bars stay on."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
