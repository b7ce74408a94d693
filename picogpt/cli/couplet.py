"""The picogpt command on a couplet model (an encoder-decoder python -m picogpt.train --task
couplet wrote): answer a 上句 with 下句, score a 联, and refuse in one line what only a GPT-2 does
(a poem's form, a stop text, the explore page). The model's functions are tasks/couplet.py's."""

from ..errors import PicoGPTError, _, whole_number
from ..files.loaded_model import LoadedModel
from ..score import summary
from ..tasks.couplet import answer, first_line, score_pair
from .terminal import print_scores

# the flags of picogpt that only a GPT-2 takes, with the value that means "not given"
GPT_ONLY = {"acrostic": None, "line": None, "rhyme": False, "lines": None, "stop": None,
            "candidates": 0, "ignore_end": False, "repetition_penalty": 1.0}


def refuse_gpt_only(given: dict) -> None:
    """Raise PicoGPTError for a flag given that a couplet model cannot take."""
    for name, unset in GPT_ONLY.items():
        if given.get(name, unset) != unset:
            raise PicoGPTError(_("--{name} is for a GPT-2, which writes a text; a couplet model "
                                 "writes one 下句 as long as its 上句 (a mask on its logits), so "
                                 "drop --{name}.").format(name=name))


def first_of(prompt: str, loaded: LoadedModel) -> str:
    """The prompt's 上句, checked (characters the model knows, within its context): PicoGPTError
    before anything is said or run."""
    first = first_line(prompt, loaded.encoder)
    if len(first) + 1 > loaded.n_ctx:
        raise PicoGPTError(_("the 上句 has {n} characters; this model's context of {n_ctx} holds "
                             "{most} at most.").format(n=len(first), n_ctx=loaded.n_ctx,
                                                       most=loaded.n_ctx - 1))
    return first


def answer_text(first: str, loaded: LoadedModel, n_samples: int, top_k: int | None,
                top_p: float | None, temperature: float, seed: int | None) -> list[str]:
    """Print the 下句 (or n_samples of them, each under a line naming it) for a 上句 first_of
    checked, and return them. top_k (the flag's, or sampler.json's) is checked against the
    model's vocabulary first, as generate checks a GPT-2's."""
    if top_k is not None:
        whole_number("top_k", top_k, 1, loaded.hparams["n_vocab"],
                     _("1 is greedy; leave it unset for greedy decoding"))
    lines = answer(first, loaded.params, loaded.hparams, loaded.encoder, top_k=top_k,
                   top_p=top_p, temperature=temperature, seed=seed, n_samples=n_samples)
    if n_samples == 1:
        print(lines[0], flush=True)
        return lines
    for i, line in enumerate(lines):
        print("=" * 20, _("sample {i} of {n}").format(i=i + 1, n=n_samples), "=" * 20)
        print(line, flush=True)
    return lines


def score_couplet(text: str, loaded: LoadedModel, top: int, as_json: bool) -> None:
    """picogpt "上句，下句" --score on a couplet model: each character of the 下句 and its end,
    given the 上句, by the model's own distribution."""
    first, mark, second = text.strip().partition("，")
    second = second.rstrip("。？！； \n")
    if not mark or not second:
        raise PicoGPTError(_("give a couplet model a 联 to score, 上句 and 下句 with ， between "
                             "them: 「海阔凭鱼跃，天高任鸟飞」."))
    first = first_line(first, loaded.encoder)
    outside = loaded.encoder.outside(second)
    if outside:
        raise PicoGPTError(_("the 下句 holds {chars}, which this model's vocabulary lacks; "
                             "choose other characters.").format(chars=" ".join(outside)))
    ids, scores = score_pair(first, second, loaded.params, loaded.hparams, loaded.encoder, top)
    print_scores(ids, scores, summary(second, scores), loaded.encoder, top, as_json)


def refuse_explore(loaded: LoadedModel) -> None:
    """The explore page runs a GPT-2's text a token at a time: a couplet model is refused."""
    if loaded.kind.seq2seq:
        raise PicoGPTError(_("the explore page steps through a GPT-2's text a token at a time; "
                             "{name} is a couplet model (an encoder-decoder): run it as picogpt "
                             "\"上句\" --model_size {name}, or see inside it with --explain "
                             "page.html.").format(name=loaded.name))
