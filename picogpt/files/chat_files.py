"""What a Hugging Face chat model's folder says about chatting: its template, its named special
tokens, and the tokens that end a reply; and the template rendered. It reads and checks, and
writes nothing.

A chat model was trained on conversations written in one format (Qwen's ChatML:
`<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n`). The folder ships that format as a
Jinja template, and `render` writes the messages with it, as transformers' `apply_chat_template`
does. A template is code that came in a download, so it runs in jinja2's immutable sandbox (no
attribute starting with "_", no method that changes a list or a dict), with the few helpers
transformers gives templates; its output is capped, and so are the sizes of the numbers and
repeated strings it makes.

- The template: chat_template.jinja (transformers 5 saves it there) or tokenizer_config.json's
  "chat_template" (older folders; a list of named templates takes the one named "default").
- The named special tokens the template may write (bos_token, eos_token ...), from
  tokenizer_config.json, as transformers hands them to the template.
- The end tokens: generation_config.json's eos_token_id (a number or a list, as Qwen2.5's
  [151645, 151643]), else config.json's, else the vocabulary's end token.
"""

import json
from datetime import datetime
from pathlib import Path

from ..errors import PicoGPTError, _, reason
from .store import read_json

TEMPLATE_FILE, CONFIG_FILE = "chat_template.jinja", "tokenizer_config.json"
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
         "mask_token")
MAX_TEMPLATE = 1 << 20  # bytes: Qwen3's template is ~4 KB
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


def read_chat(folder: Path, n_vocab: int, end: int | None) -> dict:
    """{"template": str, "tokens": {name: text}, "ends": {id, ...}} of a chat model's folder;
    a folder without a template is refused in one line."""
    config = read_json(folder / CONFIG_FILE) if (folder / CONFIG_FILE).is_file() else {}
    config = config if isinstance(config, dict) else {}
    return {"template": read_template(folder, config),
            "tokens": {name: token.get("content") if isinstance(token, dict) else token
                       for name in NAMED if isinstance(token := config.get(name), str | dict)},
            "ends": end_tokens(folder, n_vocab, end)}


def read_template(folder: Path, config: dict) -> str:
    """The folder's chat template: chat_template.jinja, else tokenizer_config.json's."""
    file = folder / TEMPLATE_FILE
    if file.is_file():
        if file.stat().st_size > MAX_TEMPLATE:
            raise PicoGPTError(_("{file} is {size} bytes, more than a chat template needs; "
                                 "use the template the model was released with.").format(
                                     file=file, size=file.stat().st_size))
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise PicoGPTError(_("cannot read {file}: {reason}.").format(
                file=file, reason=reason(e))) from None
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, {"name": "tool_use"
        template = next((item.get("template") for item in template if isinstance(item, dict)
                         and item.get("name") == "default"), None)
    if not isinstance(template, str):
        raise PicoGPTError(_("{folder} has no chat template (a {file} file, or \"chat_template\" "
                             "in {config}), so it is not a chat model: drop --chat to continue "
                             "a text instead.").format(folder=folder, file=TEMPLATE_FILE,
                                                        config=CONFIG_FILE))
    return template


def end_tokens(folder: Path, n_vocab: int, end: int | None) -> set[int]:
    """The ids that end a reply: generation_config.json's eos_token_id, else config.json's,
    else the vocabulary's end token; each must be one of the model's tokens."""
    for name in ("generation_config.json", "config.json"):
        said = read_json(folder / name) if (folder / name).is_file() else None
        ids = said.get("eos_token_id") if isinstance(said, dict) else None
        if ids is None:
            continue
        ids = [ids] if isinstance(ids, int) else ids
        if not (isinstance(ids, list) and ids and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_vocab
                for i in ids)):
            raise PicoGPTError(_("{file}'s eos_token_id is {value}, not one or more of the "
                                 "model's {n_vocab} token ids; save the model again.").format(
                                     file=folder / name, value=repr(ids)[:100], n_vocab=n_vocab))
        return set(ids)
    if end is None:
        raise PicoGPTError(_("{folder} names no token that ends a reply (eos_token_id in "
                             "generation_config.json or config.json); save the model's "
                             "generation config beside it.").format(folder=folder))
    return {end}


def chat_ids(encoder, template: str, messages: list[dict], tokens: dict, **options) -> list[int]:
    """The ids of the conversation rendered by template, as apply_chat_template gives them:
    the special tokens the template writes found in the text, no begin token added (a template
    that wants one writes it)."""
    return encoder.encode(render(template, messages, tokens, **options))
