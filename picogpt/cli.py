"""The `picogpt` command: prompt in, GPT-2's continuation streamed out (or the prompt scored).

Owns turning flags into calls, error messages on stderr and exit codes; terminal.py lays out
what it prints. The data flows one way: prompt -> encoder.encode -> generate ->
encoder.decode -> stdout.

fire turns flags into `run`'s arguments and writes `--help`, but `main` reads the command line
first: it checks every flag name before anything loads, and hands fire the prompt and every
text flag as a quoted literal, so text reaches picogpt exactly as typed (fire would otherwise
read "hello, world" as a tuple, 123 as an int, and parse a long prompt as Python).
"""

import ctypes
import difflib
import inspect
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import fire

from .encoder import END_OF_TEXT, Encoder
from .errors import PicoGPTError
from .generate import check_settings, generate
from .hf import load_hf
from .load import load_encoder_hparams_and_params
from .page import page_data, write_page
from .sampling import Sampling, Step
from .score import check_score_settings
from .terminal import (
    call_first,
    keep,
    notice_after,
    print_samples,
    print_scores,
    print_steps,
    stream_text,
)


def run(prompt: str = "", n_tokens: int = 40, top_k: int | None = None,
        top_p: float | None = None, temperature: float = 1.0, repetition_penalty: float = 1.0,
        seed: int | None = None, n_samples: int = 1, stop: str | None = None,
        ignore_end: bool = False, prompt_file: str | None = None, score: bool = False,
        stride: int | None = None, top: int = 0, json: bool = False, candidates: int = 0,
        explain: str | None = None, model_size: str = "124M", models_dir: str = "models",
        base_url: str | None = None, hf: str | None = None) -> None:
    """Print GPT-2's continuation of a prompt as it is generated, or score the prompt.

    Each next token is the most likely one (greedy) unless --top_k or --top_p is set; then it is
    drawn at random after these filters, in this order (Hugging Face's and openai/gpt-2's):
    repetition penalty, temperature, top-k, top-p.

    Args:
        prompt: Text to continue, exactly as typed. Empty generates unconditionally.
        n_tokens: How many tokens to generate, at most, per sample.
        top_k: Sample among the k most likely tokens. Unset (and no top_p) means greedy.
        top_p: Sample among the fewest most likely tokens whose probabilities add up to p, in
            (0, 1]; the token that crosses p is kept. 1 keeps every token.
        temperature: When sampling, divides the logits first: below 1 is more conservative.
        repetition_penalty: Above 1 makes tokens of the prompt and output so far less likely
            (a positive logit is divided by it, a negative one multiplied). 1 is off.
        seed: Makes sampling repeatable; sample i always comes from (seed, i).
        n_samples: How many samples to draw; they are decoded together in one batch, and each
            is printed under a line naming it when all are done.
        stop: End a sample when its text contains this text (not printed).
        ignore_end: Keep going past <|endoftext|>, GPT-2's end of a document, instead of
            ending the sample there.
        prompt_file: Read the prompt from this UTF-8 file ('-' for standard input); one
            trailing newline is dropped.
        score: Instead of generating, print how likely GPT-2 finds each token of the prompt
            (log-probability and rank), then the count, total negative log-likelihood,
            perplexity per token and bits per byte.
        stride: With --score, tokens between the starts of two windows of a text longer than
            the context; unset is half the context (1024 // 2 for GPT-2).
        top: With --score, also print the N tokens the model expected at each position.
        json: With --score, print everything as one JSON object instead.
        candidates: For each generated token, print it with the N most likely candidates and
            their probabilities before and after the filters, then the text.
        explain: Also write this HTML page of the run, to open offline in a browser: tokens
            with ids and bytes, each step's candidates, attention of every layer and head,
            the logit lens, and the position embeddings.
        model_size: GPT-2 size to use: 124M, 355M, 774M or 1558M (downloaded on first use),
            or the name of a folder in models_dir that python -m picogpt.train wrote.
        models_dir: Folder that holds (or will hold) the downloaded models.
        base_url: Where to download models from; defaults to $PICOGPT_BASE_URL, then OpenAI's.
        hf: Instead of OpenAI's files, run a GPT-2 saved in Hugging Face's format: a folder
            with config.json, model.safetensors, vocab.json and merges.txt, or the id of a
            model already in the local Hugging Face cache (gpt2, distilgpt2, a fine-tune).
            Nothing is downloaded from the hub.
    """
    sampling = Sampling(top_k, top_p, temperature, repetition_penalty)
    if score:  # before anything loads
        check_score_settings(1, 1024 // 2 if stride is None else stride, 1024)
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 50257:
            raise PicoGPTError(f"top={top!r} is not a whole number from 0 to 50257.")
    else:
        check_settings(n_tokens, sampling, seed, n_samples, stop, candidates)
        for name, value in [("stride", stride), ("top", top or None), ("json", json or None)]:
            if value is not None:
                raise PicoGPTError(f"--{name} works with --score; add --score to score text.")
        if (candidates or explain) and n_samples > 1:
            raise PicoGPTError("--candidates and --explain show one sample; drop --n_samples.")
        if temperature != 1.0 and not sampling.sampling:  # a warning: the output is unchanged
            print(f"picogpt: --temperature {temperature} has no effect on greedy decoding (each "
                  f"token is the most likely one); add --top_k 40 or --top_p 0.9 to sample.",
                  file=sys.stderr)
    if hf is not None and (model_size, models_dir, base_url) != ("124M", "models", None):
        raise PicoGPTError("--hf names the model to run; drop --model_size, --models_dir and "
                           "--base_url, which choose one of OpenAI's downloads.")
    prompt = read_prompt(prompt, prompt_file)
    reuse_freed_memory()
    if hf is not None:
        encoder, hparams, params = load_hf(hf)
    else:
        encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir,
                                                                   base_url)
    input_ids, n_head = encoder.encode(prompt), hparams["n_head"]
    # The weights are memory-mapped: after a restart the first pass reads them all from disk
    # (minutes for 1558M on a slow disk). If no output comes within 2 s, say what is going on.
    where = hf or Path(models_dir) / model_size
    with notice_after(2.0, f"picogpt: reading the weights in {where} (after a restart they "
                           f"come from disk) ...") as quiet:
        if score:
            print_scores(prompt, input_ids, params, n_head, encoder, stride, top, json, quiet)
            return
        n_shown = max(candidates, 10 if explain else 0)  # the page shows 10 per step
        ids = generate(input_ids, params, n_head, n_tokens, top_k=top_k, top_p=top_p,
                       temperature=temperature, seed=seed, repetition_penalty=repetition_penalty,
                       stop_at_end=not ignore_end, stop=stop, encoder=encoder,
                       n_samples=n_samples, candidates=n_shown)
        steps = print_generation(call_first(quiet, ids), n_samples, n_shown, candidates, encoder,
                                 stop)
    if explain:
        settings = {"model_size": hf or model_size, "top_k": top_k, "top_p": top_p, "seed": seed,
                    "temperature": temperature, "repetition_penalty": repetition_penalty}
        prompt_ids = input_ids or [END_OF_TEXT]
        write_page(explain, page_data([*prompt_ids, *(step.token for step in steps)],
                                      len(prompt_ids), steps, params, n_head, encoder, settings))
        print(f"picogpt: wrote {explain}", file=sys.stderr)


def print_generation(ids: Iterator, n_samples: int, n_shown: int, candidates: int,
                     encoder: Encoder, stop: str | None) -> list[Step]:
    """Print what generate yields: streamed text, the samples, or each step's candidates.
    Returns the Steps, when generate made them (n_shown > 0)."""
    steps: list[Step] = []
    if n_samples > 1:
        print_samples(ids, n_samples, encoder, stop)
    elif candidates:
        print_steps(ids, steps, encoder, candidates)
        print("".join(stream_text([step.token for step in steps], encoder, stop)), flush=True)
    else:
        tokens = (keep(step, steps) for step in ids) if n_shown else ids
        for text in stream_text(tokens, encoder, stop):
            print(text, end="", flush=True)
        print(flush=True)
    return steps


def read_prompt(prompt: str, prompt_file: str | None) -> str:
    """The prompt as typed, or read from prompt_file, checked to be valid Unicode text."""
    if prompt_file is not None:
        if prompt:
            raise PicoGPTError("give the prompt as text or with --prompt_file, not both.")
        try:
            data = (sys.stdin.buffer.read() if prompt_file == "-"
                    else open(prompt_file, "rb").read())  # noqa: SIM115 (read whole, closed)
            prompt = data.decode("utf-8")
        except OSError as e:
            raise PicoGPTError(f"cannot read --prompt_file {prompt_file}: {e.strerror}.") from None
        except UnicodeDecodeError as e:
            raise PicoGPTError(f"--prompt_file {prompt_file} is not UTF-8 text (byte {e.start} "
                               f"is {data[e.start]:#04x}); save it as UTF-8.") from None
        prompt = prompt.removesuffix("\n")  # the newline an editor or echo ends a file with
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise PicoGPTError(f"the prompt holds {prompt[e.start]!r} at character {e.start}, which "
                           f"is not valid Unicode text; pass the prompt as UTF-8.") from None
    return prompt


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


def fire_command(argv: list[str]) -> list[str]:
    """Check the command line and turn it into the words fire should parse.

    The prompt and text flags become quoted literals; an unknown flag, a missing value or a
    second prompt is refused here, before anything is loaded.
    """
    params = inspect.signature(run).parameters
    command, words, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            return ["--help"]
        if arg == "--":  # everything after it is the prompt, even if it starts with dashes
            words += argv[i:]
            break
        is_short = len(arg) == 2 and arg[0] == "-"
        short = [name for name in params if arg[1] == name[0]] if is_short else []
        if len(short) == 1:  # fire's short flag: a first letter no other flag starts with
            arg = f"--{short[0]}"
        elif not arg.startswith("--"):
            words.append(arg)
            continue
        name, has_value, value = arg[2:].partition("=")
        if name not in params:
            guess = difflib.get_close_matches(name, list(params), n=1, cutoff=0.6)
            hint = f"did you mean --{guess[0]}?" if guess else "see picogpt --help."
            raise PicoGPTError(f"unknown flag --{name}; {hint}")
        if params[name].annotation is bool:
            command.append(arg)
            continue
        if not has_value:  # the value is the next word, unless that is another flag
            if i == len(argv) or argv[i].startswith("--") and argv[i][2:].split("=")[0] in params:
                raise PicoGPTError(f"--{name} needs a value, as in --{name}=... (a text that "
                                   f"starts with -- can be given as --{name}=--text).")
            value, i = argv[i], i + 1
        as_typed = params[name].annotation in (str, str | None)  # text is never parsed
        command.append(f"--{name}={value!r}" if as_typed else f"--{name}={value}")
    if len(words) > 1:
        shown = " ".join(repr(word) for word in words[:4])
        raise PicoGPTError(f"picogpt takes one prompt, but got {len(words)} words: {shown}. "
                           f"Quote the whole prompt, and write flags as --name value.")
    return command + ([f"--prompt={words[0]!r}"] if words else [])


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `picogpt` command."""
    try:
        command = fire_command(sys.argv[1:] if argv is None else argv)
        fire.Fire(run, command=command, name="picogpt")
    except PicoGPTError as e:
        print(f"picogpt: {e}", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:  # the reader left (picogpt ... | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        sys.exit(141)  # the shell's code for a process ended by SIGPIPE
    except KeyboardInterrupt as e:  # keep what was printed; 130 is the shell's code for Ctrl-C
        print(f"\npicogpt: {e.args[0]}" if e.args else "", file=sys.stderr)
        sys.exit(130)
