"""What a Hugging Face chat model's folder says about chatting: its template, its named special
tokens, and the tokens that end a reply. It reads and checks, and writes nothing.

- The template: chat_template.jinja (transformers 5 saves it there) or tokenizer_config.json's
  "chat_template" (older folders; a list of named templates takes the one named "default").
- The named special tokens the template may write (bos_token, eos_token ...), from
  tokenizer_config.json, as transformers hands them to the template.
- The end tokens: generation_config.json's eos_token_id (a number or a list, as Qwen2.5's
  [151645, 151643]), else config.json's, else the vocabulary's end token.
"""

from pathlib import Path

from ..errors import PicoGPTError, _, reason
from .store import read_json

TEMPLATE_FILE, CONFIG_FILE = "chat_template.jinja", "tokenizer_config.json"
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
         "mask_token")
MAX_TEMPLATE = 1 << 20  # bytes: Qwen3's template is ~4 KB


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
