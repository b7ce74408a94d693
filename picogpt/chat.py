"""Chat: a conversation rendered by the model's own template, and replies that reuse the cache.

A chat model was trained on conversations written in one format (Qwen's ChatML:
`<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n`). The model folder ships that
format as a Jinja template (`chat_template`), and `render` writes the messages with it, as
transformers' `apply_chat_template` does; the reply is generated after the text and ends at one
of the model's end tokens (`<|im_end|>`).

A template is code that came in a download, so it runs in jinja2's immutable sandbox (no
attribute starting with "_", no method that changes a list or a dict), with the few helpers
transformers gives templates; its output is capped, and so are the sizes of the numbers and
repeated strings it makes.

`Conversation` keeps the KV cache between turns. Each turn the whole conversation is rendered
again (a template may write an earlier turn differently once a later one exists: Qwen3's drops
the <think> block of earlier replies), and only the ids after the longest prefix the cache
already holds are run through the model. It holds no printing and no files.
"""

import json
from collections.abc import Iterator
from datetime import datetime
from types import ModuleType

import numpy as np

from . import kvcache
from .errors import PicoGPTError, _, reason
from .sampling import Sampling

MAX_RENDERED = 1 << 20  # characters a template may write: a long conversation is ~100 KB
MAX_MADE = 1 << 20  # elements a template may make by repeating a string or list, digits of a power
THINK = ("<think>", "</think>")  # where Qwen3 writes its reasoning before the answer


def sandbox():
    """jinja2's immutable sandbox as transformers sets it up for chat templates: blocks trimmed,
    `loopcontrols`, and the helpers `raise_exception`, `tojson` (no HTML escaping) and
    `strftime_now`; `*` and `**` checked so that a template cannot make a huge value."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context, operator, left, right):
            if operator == "**" and abs(right if isinstance(right, int | float) else 0) * len(
                    str(int(left)) if isinstance(left, int | float) else "1") > MAX_MADE:
                raise jinja2.exceptions.SecurityError("a power too large to compute")
            sized = [len(side) for side in (left, right) if isinstance(side, str | list | tuple)]
            times = [side for side in (left, right) if isinstance(side, int)]
            if operator == "*" and sized and times and sized[0] * times[0] > MAX_MADE:
                raise jinja2.exceptions.SecurityError("a repetition too long to make")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception,
                       strftime_now=lambda format: datetime.now().strftime(format))
    return env


def render(template: str, messages: list[dict], tokens: dict, **options) -> str:
    """The conversation written in the model's format, ending where the reply begins:
    `template` run on messages ([{"role": "user", "content": "..."}]), the tokenizer's named
    special tokens (tokens: {"bos_token": ..., "eos_token": ...}) and options (as
    enable_thinking=False), with add_generation_prompt=True."""
    import jinja2

    try:
        compiled = sandbox().from_string(template)
        written, size = [], 0
        for piece in compiled.generate(messages=messages, add_generation_prompt=True,
                                       **tokens, **options):
            size += len(piece)
            if size > MAX_RENDERED:
                raise PicoGPTError(_("the chat template wrote more than {n} characters for "
                                     "this conversation, so it was stopped; use the template "
                                     "the model was released with.").format(n=MAX_RENDERED))
            written.append(piece)
    except (jinja2.exceptions.TemplateError, TypeError, ValueError, ArithmeticError,
            LookupError, AttributeError, RecursionError, MemoryError) as e:
        raise PicoGPTError(_("the chat template failed: {reason}. Use the template the model "
                             "was released with.").format(
                                 reason=" ".join(reason(e).split())[:300])
                           ) from None
    return "".join(written)


class Conversation:
    """A conversation's KV cache and the ids it holds, kept from one turn to the next."""

    def __init__(self, params: dict, n_head: int | dict, n_ctx: int,
                 engine: ModuleType = kvcache):
        """engine holds the model's `KVCache`, `prefill` and `decode_step` (kvcache.py's for
        GPT-2, llama/engine.py's for the LLaMA kind, which takes its hparams where GPT-2's
        takes n_head); the cache starts small and grows as the conversation does."""
        self.params, self.n_head, self.n_ctx, self.engine = params, n_head, n_ctx, engine
        self.cache = engine.KVCache(params, n_head, 64, batch=(1,))
        self.ids: list[int] = []  # the ids whose keys and values the cache holds

    def reply(self, ids: list[int], n_tokens: int, sampling: Sampling, rng: np.random.Generator,
              ends: set[int]) -> Iterator[int]:
        """Yield the reply's ids after the whole conversation so far (ids: rendered and encoded,
        ending where the reply begins), up to n_tokens, the end token not yielded."""
        if len(ids) + n_tokens > self.n_ctx:
            raise PicoGPTError(_("the conversation is {n} tokens; with n_tokens={n_tokens} it "
                                 "passes the model's limit of {n_ctx} tokens. Start a new "
                                 "conversation, or lower --n_tokens.").format(
                                     n=len(ids), n_tokens=n_tokens, n_ctx=self.n_ctx))
        same = next((i for i, (a, b) in enumerate(zip(ids, self.ids)) if a != b),
                    min(len(ids), len(self.ids)))
        same = min(same, len(ids) - 1)  # at least one new position gives the next logits
        self.cache.rewind(same)  # the positions after the shared prefix are written over
        self.ids = list(ids)
        logits = self.engine.prefill([ids[same:]], self.params, self.n_head, self.cache)[0]
        seen = None
        if sampling.repetition_penalty != 1.0:
            seen = np.zeros((1, logits.shape[-1]), bool)
            seen[0, ids] = True
        for step in range(n_tokens):
            token = sampling.pick(sampling.filter(logits[None], seen)[0], rng)
            if token in ends:  # not cached: the template writes it into the next turn's ids
                return
            yield token
            if step == n_tokens - 1:
                return
            logits = self.engine.decode_step(np.array([token]), self.params, self.n_head,
                                             self.cache)[0]
            self.ids.append(token)
            if seen is not None:
                seen[0, token] = True


def chat_ids(encoder, template: str, messages: list[dict], tokens: dict, **options) -> list[int]:
    """The ids of the conversation rendered by template, as apply_chat_template gives them:
    the special tokens the template writes found in the text, no begin token added (a template
    that wants one writes it)."""
    return encoder.encode(render(template, messages, tokens, **options))
