"""`picogpt MESSAGE --hf FOLDER --chat`: one reply from a chat model, or, with no message, a
conversation held on the terminal (each line a turn, Ctrl-D to end).

The folder's template writes the conversation and the folder names the end tokens the reply
stops at (files/chat_files.py reads and renders them); kvcache.py's Conversation keeps the
cache between turns. A reply that begins with a <think> block (Qwen3 with --thinking) shows
the block on stderr, dimmed on a terminal, apart from the answer.
"""

import codecs
import sys
from collections.abc import Iterable

from .. import kvcache
from ..encoder import added_bytes
from ..errors import PicoGPTError, _
from ..files.chat_files import THINK, chat_ids, read_chat, read_template
from ..files.hf import find_folder
from ..files.loaded_model import load_model
from ..files.store import read_json
from ..sampling import Sampling, sample_rngs
from .terminal import call_first, reading_notice

PROMPT = "> "  # what a conversation shows when it waits for the next turn
DIM, PLAIN = "\x1b[2m", "\x1b[0m"  # the terminal's faint text, for the thinking


def check_chat(chat: bool, hf: str | None, system: str | None, thinking: bool,
               others: dict) -> None:
    """Raise PicoGPTError, before anything loads, for flags that do not go with --chat (or
    need it)."""
    if not chat:
        if system is not None or thinking:
            raise PicoGPTError(_("--system and --thinking set a chat's turns; add --chat."))
        return
    if hf is None:
        raise PicoGPTError(_("--chat runs a chat model saved in Hugging Face's format: add --hf "
                             "FOLDER_OR_MODEL_ID, as in --hf Qwen/Qwen2.5-0.5B-Instruct."))
    given = [name for name, value in others.items() if value]
    if given:
        raise PicoGPTError(_("--{name} does not work with --chat, which prints one reply at a "
                             "time; drop --{name}.").format(name=given[0]))


def chat_text(message: str, hf: str, system: str | None, thinking: bool, n_tokens: int,
              sampling: Sampling, seed: int | None) -> None:
    """Print the model's reply to message, or hold a conversation when message is empty."""
    folder = find_folder(hf)
    config = read_json(folder / "tokenizer_config.json")
    read_template(folder, config if isinstance(config, dict) else {})  # refused before loading
    loaded = load_model(hf=hf)
    encoder, chat = loaded.encoder, read_chat(folder, loaded.n_vocab, loaded.encoder.end)
    conversation = kvcache.Conversation(loaded.params, loaded.kind.runs_with(loaded.hparams),
                                        loaded.n_ctx, loaded.kind.engine)
    rng = sample_rngs(seed, 1)[0]
    messages = [{"role": "system", "content": system}] if system is not None else []

    def turn(text: str, quiet=lambda: None) -> None:
        messages.append({"role": "user", "content": text})
        ids = chat_ids(encoder, chat["template"], messages, chat["tokens"],
                       enable_thinking=thinking)
        reply = []
        print_reply(call_first(quiet, conversation.reply(ids, n_tokens, sampling, rng,
                                                         chat["ends"])), encoder, ids, reply)
        messages.append({"role": "assistant", "content": encoder.decode(reply)})

    if message:
        with reading_notice(loaded.where) as quiet:
            turn(message, quiet)
        return
    terminal = sys.stdin.isatty()
    while True:
        print(PROMPT if terminal else "", end="", flush=True)  # input() would write it to stderr
        try:
            text = input()
        except EOFError:
            print() if terminal else None
            return
        if text.strip():
            turn(text)


def print_reply(ids: Iterable[int], encoder, after: list[int], into: list[int]) -> None:
    """Stream the reply's text to stdout, a <think> block in it to stderr (faint on a
    terminal); every id is also appended to into."""
    marks = [getattr(encoder, "encoder", {}).get(mark) for mark in THINK]
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out, previous, answer_start = sys.stdout, after[-1:], False
    for token in ids:
        into.append(token)
        if token in marks and token is not None:
            out.write(utf8.decode(b"", final=True))
            thinking = token == marks[0]
            if thinking:
                out.flush()
                out = sys.stderr
                out.write(DIM if out.isatty() else "")
            else:
                out.write((PLAIN if out.isatty() else "") + "\n")
                out.flush()
                out, answer_start = sys.stdout, True
            previous = [token]
            continue
        text = utf8.decode(added_bytes(encoder, previous, token))
        previous = [token]
        if answer_start:  # the blank line the model writes after </think>
            text = text.lstrip("\n")
            answer_start = not text
        out.write(text)
        out.flush()
    out.write(utf8.decode(b"", final=True) + (PLAIN if out is sys.stderr and out.isatty()
                                                else ""))
    sys.stdout.write("\n")
    sys.stdout.flush()
