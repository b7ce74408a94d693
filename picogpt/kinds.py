"""The table of model kinds: each kind of model picogpt runs and trains is one record here, as
each training task is one row of TASKS.

    gpt2         GPT-2 (model.py, fast.py, kvcache.py, inside.py; backward.py and fasttrain.py)
    transformer  the 2017 encoder-decoder of the couplet task (the package transformer/)
    llama        the LLaMA family's block: LLaMA, Qwen2/2.5, Qwen3 (the package llama/)
    variant      training only: a switch for each change between those two (llama/variant.py)

A model folder's hparams.json names its kind: {"model": "transformer", ...}. No "model" is GPT-2,
as in every folder written before the table (OpenAI's hparams.json has none). `kind_of` reads it,
once, when a folder loads; everything after asks the record: which hparams the kind has and how
they are checked, the shape of every weight, the first weights, the forward pass (logits), the
loss and its gradients, the trace, one decoding step, and the parameter groups an optimizer
treats apart (optim.py), named by tree.py's flat names; and, for a kind that writes text, the
engine generate.py and score.py run it with (its KV cache, prefill, scoring windows).

A new kind is one package of the book named for it (picogpt/llama/, say) and one entry in KINDS.
Nothing here reads a file or prints.
"""

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from . import fasttrain, inside, kvcache
from .errors import N_, PicoGPTError, _
from .generate import Running
from .llama import engine as llama_engine
from .llama import inside as llama_inside
from .llama import train as llama_train
from .llama import variant
from .llama.kind import llama_fit_vocabulary, llama_fits, llama_groups, llama_shapes
from .model import gpt2
from .optim import leaf_groups
from .train import init_params as gpt2_init
from .transformer import backward as transformer_backward
from .transformer import init_params as transformer_init
from .transformer import inside as transformer_inside
from .transformer import tables
from .transformer.kind import (
    MAX_SEQ2SEQ_CTX,
    NO_PAD,
    NORM_FIRST,
    seq2seq_forward,
    seq2seq_shapes,
    seq2seq_step,
)


def whole(value: Any) -> bool:
    """A whole number from 1 up (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def flag(value: Any) -> bool:
    """True or False."""
    return isinstance(value, bool)


def positive(value: Any) -> bool:
    """A number above 0 (a bool is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def word(value: Any) -> bool:
    """A string (which ones a kind takes, its fits check says)."""
    return isinstance(value, str)


def absent_or(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """check, or the key missing: a key a kind gained later, which older folders lack."""
    return lambda value: value is None or check(value)


def id_list(value: Any) -> bool:
    """A list of token ids (whole numbers from 0; which ones fit, its fits check says)."""
    return isinstance(value, list) and all(type(i) is int and i >= 0 for i in value)


# What each check asks for, as the error line names it
ASKS = {whole: N_("positive integers"), flag: N_("true or false"),
        positive: N_("positive numbers"), word: N_("words")}


def heads_fit(hparams: dict, source: str, fix: str) -> None:
    """Raise unless n_embd splits into n_head heads of d_head = n_embd / n_head."""
    if hparams["n_embd"] % hparams["n_head"]:
        raise PicoGPTError(_("{source}: n_embd={n_embd} is not a multiple of n_head={n_head}; "
                             "{fix}.").format(source=source, n_embd=hparams["n_embd"],
                                              n_head=hparams["n_head"], fix=fix))


@dataclass(frozen=True, repr=False)
class Kind:
    """One kind of model: what its hparams hold, its weights' shapes, and its functions.

    The functions take the params and the hparams whole, so every kind is called alike:
    forward(inputs, params, hparams) -> logits; loss_and_grads(batch, params, hparams) -> (loss,
    grads in params' structure); trace(inputs, params, hparams, names) -> (logits, {name:
    value}); decode_step(ids, params, hparams, state) -> the next token's logits, where state is
    what the kind carries from step to step (GPT-2: its KVCache; the encoder-decoder: the
    encoder's memory); init(hparams, rng) -> params; param_groups(params) -> {"matrices",
    "embeddings", "gains", "biases"}: lists of flat names.

    engine is the module that runs a text-writing kind for generate.py, score.py and a chat: its
    `KVCache` (params, n_head, n_positions, batch=(), prompt=None), `prefill` and `decode_step`
    (ids, params, n_head, cache) -> the last logits, `window_stream` (ids, params, n_head) -> a
    scoring window's last residual stream, and `final_logits` (x, params, n_head) -> logits;
    each takes, in GPT-2's n_head place, what `runs_with(hparams)` gives (GPT-2: its n_head, as
    picoGPT's generate takes it; another kind: its hparams whole)."""

    name: str  # hparams.json's "model"; "gpt2" is written as no "model" at all
    title: str  # how a message names it
    hparams: dict[str, Callable[[Any], bool]]  # each key hparams.json holds, and its check
    shapes: Callable[[dict], dict[str, tuple[int, ...]]]  # hparams -> {flat name: shape}
    stacks: dict[str, str]  # an hparam that counts blocks -> the flat prefix of those blocks
    init: Callable[[dict, np.random.Generator], dict]
    forward: Callable
    loss_and_grads: Callable
    trace: Callable
    decode_step: Callable
    param_groups: Callable[[dict], dict[str, list[str]]]
    n_vocab: Callable[[dict], int]  # params -> the tokens the model can give
    n_ctx: Callable[[dict, dict], int]  # (hparams, params) -> its longest context
    fits: Callable[[dict, str, str], None] = heads_fit  # checks across keys: (hparams, source, fix)
    # (hparams, params, n_vocab) -> both cut to a vocabulary of n_vocab tokens, for a kind whose
    # table may be padded past its tokenizer; unset, they stay as they are
    fit_vocabulary: Callable | None = None
    seq2seq: bool = False  # reads a source and writes a target (a couplet model), not a text
    engine: ModuleType | None = None  # runs a kind that writes text (see above)
    # the pages' views (--explain, --explore), for a kind that writes text: run_with_hooks(ids,
    # params, hparams, hook, rows) -> the final norm's output, the forward with each value shown
    # to hook under inside.py's names (inside.run_with_hooks); lens(x, params, hparams) -> logits,
    # the final norm and the unembedding the logit lens applies to each residual stream
    run_with_hooks: Callable | None = None
    lens: Callable | None = None
    # scoring feeds the start token before a text, so its first token is scored too (GPT-2);
    # False: the text as its tokenizer gives it (a begin token or not), its first id unscored,
    # as transformers' perplexity recipe
    scores_first: bool = True

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"

    def runs_with(self, hparams: dict) -> int | Running:
        """What the engine's functions (generate, score) take in GPT-2's n_head place: GPT-2's
        head count, or another kind's hparams with the engine they run on."""
        return hparams["n_head"] if self.name == "gpt2" else Running(hparams, self.engine)

    def saved(self, hparams: dict) -> dict:
        """hparams as this kind's hparams.json holds them: its "model" (none for GPT-2), then
        each of its keys; any other key is not the kind's and is left out."""
        named = {} if self.name == "gpt2" else {"model": self.name}
        return named | {key: hparams[key] for key in self.hparams if key in hparams}

    def checked(self, hparams: dict, source: str, fix: str,
                names: tuple[str, ...] | None = None) -> dict:
        """hparams (read from source) checked to hold each of this kind's keys as its check asks,
        and to fit together: the kind's own hparams, or PicoGPTError naming source, the keys (as
        source calls them: names, in the order of the kind's keys) and fix."""
        called = dict(zip(self.hparams, names or self.hparams))
        if not all(check(hparams.get(key)) for key, check in self.hparams.items()):
            asks = {}  # what each check asks for -> the keys it checks, in the kind's order
            for key, check in self.hparams.items():
                asks.setdefault(ASKS[check], []).append(called[key])
            needs = "; ".join(_(ask) + " " + ", ".join(keys) for ask, keys in asks.items())
            raise PicoGPTError(_("{source} is not {kind} hparams (it needs {needs}); {fix}.")
                               .format(source=source, kind=self.title, needs=needs, fix=fix))
        self.fits(hparams, source, fix)
        return self.saved(hparams)


def kind_of(hparams: dict, source: str = "hparams", fix: str = "") -> Kind:
    """The kind hparams name ("model"; none is GPT-2), or PicoGPTError naming the kinds."""
    name = hparams.get("model", "gpt2") if isinstance(hparams, dict) else "gpt2"
    if not isinstance(name, str) or name not in KINDS:
        raise PicoGPTError(_("{source} names a kind of model picogpt does not know (model "
                             "{model!r}); picogpt knows {kinds}. {fix}").format(
            source=source, model=name, kinds=", ".join(KINDS), fix=fix).strip())
    return KINDS[name]


# GPT-2 ---------------------------------------------------------------------------------------

def gpt2_shapes(hparams: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor a GPT-2 with these hparams has."""
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


def gpt2_fit_vocabulary(hparams: dict, params: dict, n_vocab: int) -> tuple[dict, dict]:
    """hparams and params with wte cut to the vocabulary's n_vocab rows. A model padded past its
    tokenizer (nanoGPT pads GPT-2's vocabulary to 50,304 rows, a multiple of 64, for speed)
    then never gives an id its vocabulary lacks; the rows cut were never a token's."""
    params = {"blocks": [], **params}  # a GPT-2 always has its list of blocks, even an empty one
    if params["wte"].shape[0] <= n_vocab:
        return hparams, params
    return {**hparams, "n_vocab": n_vocab}, {**params, "wte": params["wte"][:n_vocab]}


GPT2 = Kind(
    name="gpt2", title="GPT-2",
    hparams={key: whole for key in ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer")},
    shapes=gpt2_shapes, stacks={"n_layer": ""}, init=gpt2_init,
    forward=lambda ids, params, hparams: gpt2(ids, **params, n_head=hparams["n_head"]),
    loss_and_grads=lambda batch, params, hparams: fasttrain.loss_and_grads(
        *batch, params, hparams["n_head"]),
    trace=lambda ids, params, hparams, names=None: inside.trace(ids, params, hparams["n_head"],
                                                                names),
    decode_step=lambda ids, params, hparams, cache: kvcache.decode_step(
        ids, params, hparams["n_head"], cache),
    param_groups=leaf_groups,
    n_vocab=lambda params: params["wte"].shape[0],
    n_ctx=lambda hparams, params: params["wpe"].shape[0],
    fit_vocabulary=gpt2_fit_vocabulary, engine=kvcache,
    run_with_hooks=lambda ids, params, hparams, hook, rows=None: inside.run_with_hooks(
        ids, params, hparams["n_head"], hook, rows),
    lens=lambda x, params, hparams: inside.final_logits(x, params))


# The 2017 encoder-decoder ---------------------------------------------------------------------


def seq2seq_fits(hparams: dict, source: str, fix: str) -> None:
    """Raise unless the heads fit and n_ctx is within what a couplet model may ask for."""
    heads_fit(hparams, source, fix)
    if hparams["n_ctx"] > MAX_SEQ2SEQ_CTX:  # no tensor bounds it: its positions are sines
        raise PicoGPTError(_("{source}: n_ctx={n_ctx} is past the {most} a couplet model "
                             "(the 2017 transformer) takes; {fix}.").format(
            source=source, n_ctx=hparams["n_ctx"], most=MAX_SEQ2SEQ_CTX, fix=fix))


TRANSFORMER = Kind(
    name="transformer", title="Transformer (2017)",
    hparams={**{key: whole for key in ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer",
                                       "n_dec_layer")}, "norm_first": flag},
    shapes=seq2seq_shapes, stacks={"n_layer": "encoder.", "n_dec_layer": "decoder."},
    init=transformer_init, forward=seq2seq_forward,
    loss_and_grads=lambda batch, params, hparams: transformer_backward.loss_and_grads(
        *batch, params, hparams["n_head"], NO_PAD, hparams.get("norm_first", NORM_FIRST)),
    trace=lambda inputs, params, hparams, names=None: transformer_inside.trace_seq2seq(
        *inputs, params, hparams, names=names),
    decode_step=seq2seq_step, param_groups=leaf_groups,
    n_vocab=lambda params: tables(params)[1].shape[0],
    n_ctx=lambda hparams, params: hparams["n_ctx"],  # sinusoids: no table bounds it
    fits=seq2seq_fits, seq2seq=True)


# The LLaMA family's block (LLaMA, Qwen2/2.5, Qwen3) -------------------------------------------

LLAMA = Kind(
    name="llama", title="LLaMA",  # hparams.json: {"model": "llama", ...}
    hparams={**{key: whole for key in ("n_vocab", "n_ctx", "n_embd", "n_head", "n_kv_head",
                                       "d_head", "n_ffn", "n_layer")},
             "rope_theta": positive, "norm_eps": positive, "tied": flag, "qkv_bias": flag,
             "qk_norm": flag},
    shapes=llama_shapes, stacks={"n_layer": ""}, init=llama_train.init_params,
    forward=llama_train.logits, loss_and_grads=llama_train.loss_and_grads,
    trace=llama_train.trace, decode_step=llama_engine.decode_step, param_groups=llama_groups,
    n_vocab=llama_engine.n_vocab, n_ctx=lambda hparams, params: hparams["n_ctx"],
    fits=llama_fits, fit_vocabulary=llama_fit_vocabulary, engine=llama_engine,
    run_with_hooks=llama_inside.run_with_hooks, lens=llama_inside.final_logits,
    scores_first=False)


# The training-only variant (llama/variant.py): a switch for each change between the blocks ---


LINE_END, LINE_ENDS = absent_or(flag), absent_or(id_list)  # absent: a folder from before them
ASKS |= {LINE_END: N_("true, false or absent"), LINE_ENDS: N_("lists of ids or absent")}
VARIANT = Kind(
    name="variant", title="training variant",  # hparams.json: {"model": "variant", ...}
    hparams={**{key: whole for key in ("n_vocab", "n_ctx", "n_embd", "n_head", "n_kv_head",
                                       "d_head", "n_ffn", "n_layer")},
             "rope_theta": positive, "norm_eps": positive,
             **{key: word for key in variant.CHOICES},
             **{key: flag for key in ("bias", "qk_norm", "tied", "zero_proj")},
             "line_end": LINE_END, "line_ends": LINE_ENDS},
    shapes=variant.shapes, stacks={"n_layer": ""}, init=variant.init_params,
    forward=variant.logits, loss_and_grads=variant.loss_and_grads, trace=variant.trace,
    decode_step=variant.decode_step, param_groups=variant.groups, n_vocab=variant.n_vocab,
    n_ctx=lambda hparams, params: hparams["n_ctx"], fits=variant.fits, engine=variant)


# The table: hparams.json's "model" -> its kind
KINDS: dict[str, Kind] = {"gpt2": GPT2, "transformer": TRANSFORMER, "llama": LLAMA,
                          "variant": VARIANT}

