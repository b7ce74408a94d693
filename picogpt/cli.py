"""The `picogpt` command: prompt in, GPT-2's continuation streamed out.

Owns printing (text on stdout, messages on stderr), exit codes and turning flags into calls.
The data flows one way: prompt -> encoder.encode -> generate -> encoder.decode -> stdout.
"""

import codecs
import ctypes
import sys
from collections.abc import Iterable, Iterator

import fire

from .encoder import Encoder
from .errors import PicoGPTError
from .generate import generate
from .load import load_encoder_hparams_and_params


def run(prompt: str = "", n_tokens: int = 40, model_size: str = "124M",
        models_dir: str = "models", top_k: int | None = None, temperature: float = 1.0,
        seed: int | None = None, base_url: str | None = None) -> None:
    """Print GPT-2's continuation of a prompt as it is generated.

    Args:
        prompt: Text to continue. Empty generates unconditionally. Quote text with commas twice,
            as in '"hello, world"', or fire reads it as a list.
        n_tokens: How many tokens to generate.
        model_size: GPT-2 size to use: 124M, 355M, 774M or 1558M. Downloaded on first use.
        models_dir: Folder that holds (or will hold) the downloaded models.
        top_k: Sample among the k most likely tokens. Unset means greedy (always the most likely).
        temperature: With top_k, divides the logits: below 1 is more conservative, above 1 wilder.
        seed: With top_k, makes sampling repeatable.
        base_url: Where to download models from; defaults to $PICOGPT_BASE_URL, then OpenAI's.
    """
    if not isinstance(prompt, str):
        raise PicoGPTError(f"the prompt reached picogpt as {type(prompt).__name__} {prompt!r}, not "
                           f"text; quote it twice, as in picogpt '\"hello, world\"'.")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise PicoGPTError(f"the prompt holds {prompt[e.start]!r} at character {e.start}, which "
                           f"is not valid Unicode text; pass the prompt as UTF-8.") from None
    reuse_freed_memory()
    encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir, base_url)
    input_ids = encoder.encode(prompt)
    ids = generate(input_ids, params, hparams["n_head"], n_tokens, top_k=top_k,
                   temperature=temperature, seed=seed)
    for text in stream_text(ids, encoder):
        print(text, end="", flush=True)
    print(flush=True)


def reuse_freed_memory() -> None:
    """Have glibc keep freed memory for reuse instead of handing it back to the OS at once."""
    # Each layer frees arrays of a few MB and allocates new ones. Handed back to the OS, they
    # return as fresh pages to fault in and zero: ~42,000 page faults and ~20% of the time of a
    # 512-token prompt, none with these settings. Only the process owner (the CLI) sets them.
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl): nothing to tune
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks up to 32 MiB come from the heap
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: freed heap memory stays for the next step


def stream_text(ids: Iterable[int], encoder: Encoder) -> Iterator[str]:
    """The text of ids as they arrive; a character split across tokens waits for its last byte."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for next_id in ids:
        yield utf8.decode(encoder.decode_bytes([next_id]))
    yield utf8.decode(b"", final=True)  # bytes left over at the end become U+FFFD, as in decode


def main() -> None:
    """Entry point of the `picogpt` command."""
    try:
        fire.Fire(run, name="picogpt")
    except PicoGPTError as e:
        print(f"picogpt: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # keep what was printed; 130 is the shell's code for Ctrl-C
        print(file=sys.stderr)
        sys.exit(130)
