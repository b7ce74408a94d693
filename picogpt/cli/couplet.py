"""The picogpt command on a couplet model (an encoder-decoder python -m picogpt.train --task
couplet wrote): answer a 上句 with 下句, score a 联, and refuse in one line what only a GPT-2 does
(a poem's form, a stop text, the explore page). The model's functions are
transformer/decoding.py's."""

import numpy as np

from ..errors import PicoGPTError, _, whole_number
from ..files.loaded_model import LoadedModel
from ..sampling import Sampling, sample_rngs
from ..score import summary
from ..tasks.poems import PUNCTUATION
from ..transformer.decoding import Written, lines, score_pair, written
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


def is_pair(text: str) -> bool:
    """Whether text is a whole 联: 上句 and 下句 with ， between them."""
    first, mark, second = text.strip().partition("，")
    return bool(first and mark and second.strip().rstrip(PUNCTUATION))


def first_line(prompt: str, encoder) -> str:
    """The 上句 of a prompt ("海阔凭鱼跃" or "海阔凭鱼跃，"), checked: PicoGPTError for no 上句 or
    a character the model's vocabulary lacks."""
    if is_pair(prompt):
        raise PicoGPTError(_("a couplet model answers a 上句 alone, as 「{first}」; a whole 联 "
                             "goes with --explain page.html (the poet's 下句 fed in) or with "
                             "--score.").format(first=prompt.strip().partition("，")[0]))
    first = prompt.strip().rstrip(PUNCTUATION)
    if not first or any(mark in first for mark in PUNCTUATION + "\n"):
        raise PicoGPTError(_("give a couplet model one 上句 to answer, as 「海阔凭鱼跃」 (its "
                             "characters only, or with ，); got {prompt!r}.").format(
                                 prompt=prompt))
    outside = encoder.outside(first)
    if outside:
        raise PicoGPTError(_("the 上句 holds {chars}, which this model's vocabulary lacks (it "
                             "never saw them twice in training); choose other characters.").format(
                                 chars=" ".join(outside)))
    return first


def first_of(prompt: str, loaded: LoadedModel) -> str:
    """The prompt's 上句, checked (characters the model knows, within its context): PicoGPTError
    before anything is said or run."""
    first = first_line(prompt, loaded.encoder)
    if len(first) + 1 > loaded.n_ctx:
        raise PicoGPTError(_("the 上句 has {n} characters; this model's context of {n_ctx} holds "
                             "{most} at most.").format(n=len(first), n_ctx=loaded.n_ctx,
                                                       most=loaded.n_ctx - 1))
    return first


def answer_text(first: str, loaded: LoadedModel, n_samples: int, sampling: Sampling,
                seed: int | None, distinct: bool = False) -> Written:
    """Print the 下句 (or n_samples of them, each under a line naming it) for a 上句 first_of
    checked, and return what decoding.py's loop wrote (the ids and their probabilities). top_k (the
    flag's, or sampler.json's) is checked against the model's vocabulary first, as generate
    checks a GPT-2's."""
    if sampling.top_k is not None:
        whole_number("top_k", sampling.top_k, 1, loaded.hparams["n_vocab"],
                     _("1 is greedy; leave it unset for greedy decoding"))
    encoder = loaded.encoder
    src = np.array([encoder.encode(first)] * n_samples)  # [n_samples, length]
    made = written(src, loaded.params, loaded.hparams, encoder, sampling,
                   sample_rngs(seed, n_samples), distinct=distinct)
    said = lines(made, encoder)
    if n_samples == 1:
        print(said[0], flush=True)
        return made
    for i, line in enumerate(said):
        print("=" * 20, _("sample {i} of {n}").format(i=i + 1, n=n_samples), "=" * 20)
        print(line, flush=True)
    return made


def pair_of(text: str, loaded: LoadedModel) -> tuple[str, str]:
    """The 上句 and 下句 of 「上句，下句」, each checked against the model's vocabulary."""
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
    return first, second


def pair_for_page(text: str, loaded: LoadedModel, given: dict) -> tuple[str, str]:
    """The 上句 and 下句 of a whole 联 for --explain, checked: as long as each other (the length
    mask the page shows), within the context, and no sampler flag (nothing is sampled)."""
    for name, unset in (("top_k", None), ("top_p", None), ("temperature", 1.0), ("seed", None),
                        ("n_samples", 1), ("distinct", None)):
        if given.get(name, unset) != unset:
            raise PicoGPTError(_("--{name} does nothing on a whole 联: its 下句 is the poet's, "
                                 "fed in, not sampled; drop --{name}, or give the 上句 alone "
                                 "to have the model write one.").format(name=name))
    first, second = pair_of(text, loaded)
    first_of(first, loaded)
    if len(second) != len(first):
        raise PicoGPTError(_("the 下句 has {m} characters and the 上句 {n}; a couplet model "
                             "writes a 下句 as long as its 上句 (a mask on its logits), so give a "
                             "联 of two 句 of one length.").format(m=len(second), n=len(first)))
    return first, second


def score_couplet(text: str, loaded: LoadedModel, top: int, as_json: bool) -> None:
    """picogpt "上句，下句" --score on a couplet model: each character of the 下句 and its end,
    given the 上句, by the model's own distribution."""
    first, second = pair_of(text, loaded)
    ids, scores = score_pair(first, second, loaded.params, loaded.hparams, loaded.encoder, top)
    print_scores(ids, scores, summary(second, scores), loaded.encoder, top, as_json)


def refuse_explore(loaded: LoadedModel) -> None:
    """The explore page runs a GPT-2's text a token at a time: a couplet model is refused."""
    if loaded.kind.seq2seq:
        raise PicoGPTError(_("the explore page steps through a GPT-2's text a token at a time; "
                             "{name} is a couplet model (an encoder-decoder): run it as picogpt "
                             "\"上句\" --model_size {name}, or see inside it with --explain "
                             "page.html.").format(name=loaded.name))
