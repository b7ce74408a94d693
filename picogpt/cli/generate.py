"""The `picogpt` command: prompt in, GPT-2's continuation streamed out, the prompt scored, or a
page to explore the model.

It holds `generate_text` (the default mode) and `score_text` (`--score`), routes `--explore` to
cli/explore.py, and checks each mode's flags before anything loads. The data flows one way: prompt
-> encoder.encode -> generate -> encoder.decode -> stdout.
"""

import inspect
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace

from ..constraints import byte_level_refusal, check_verse, verse
from ..errors import PicoGPTError, _, whole_number
from ..files.loaded_model import LoadedModel, kind_first, load_model, refuse_views, vocabulary_first
from ..files.openai import MODEL_SIZES
from ..generate import check_settings, generate, generate_samples, generate_steps
from ..sampling import Sampling
from ..transformer.decoding import read_pair
from ..web.couplet import couplet_data, write_couplet_page
from ..web.page import check_path, page_data, write_page
from .chat import chat_text, check_chat
from .command import ending, read_prompt, reuse_freed_memory, run_command, switch
from .couplet import answer_text, first_of, is_pair, pair_for_page, refuse_gpt_only
from .explore import explore_model
from .score import score_text
from .terminal import (
    call_first,
    print_samples,
    print_steps,
    print_text,
    reading_notice,
    say_outside,
    stream_text,
)

# --distinct when not given: on. Top-k 8 wrote 叠字 the 上句 did not ask for in 47% of a couplet
# model's 下句 on held-out 上句, the poets in 8% (docs/couplet.md)
DISTINCT = True
MODEL_ARGS = """
        model_size: GPT-2 size to use: 124M, 355M, 774M or 1558M (downloaded on first use),
            or the name of a folder in models_dir that python -m picogpt.train wrote.
        models_dir: Folder that holds (or will hold) the downloaded models.
        base_url: Where to download models from; defaults to $PICOGPT_BASE_URL, then OpenAI's.
        hf: Instead of OpenAI's files, run a GPT-2 saved in Hugging Face's format: a folder
            with config.json, model.safetensors and its tokenizer (vocab.json and merges.txt,
            BERT's vocab.txt as uer/gpt2-chinese-poem's, or the tokenizer.json transformers 5
            saves), or a model id of the hub (gpt2,
            distilgpt2, uer/gpt2-chinese-cluecorpussmall). A model id not in the Hugging Face
            cache is downloaded there once (those files only), with huggingface_hub and its
            settings (HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE, HF_TOKEN).
"""


def generate_text(prompt: str = "", n_tokens: int = 40, top_k: int | None = None,
                  top_p: float | None = None, temperature: float = 1.0,
                  repetition_penalty: float = 1.0, seed: int | None = None, n_samples: int = 1,
                  stop: str | None = None, ignore_end: bool = False, candidates: int = 0,
                  explain: str | None = None, prompt_file: str | None = None,
                  acrostic: str | None = None, line: int | None = None, rhyme: bool = False,
                  lines: int | None = None, distinct: bool = DISTINCT, model_size: str = "124M",
                  models_dir: str = "models", base_url: str | None = None,
                  hf: str | None = None, chat: bool = False, system: str | None = None,
                  thinking: bool = False) -> None:
    """Print GPT-2's continuation of a prompt as it is generated.

    Each next token is the most likely one (greedy) unless --top_k or --top_p is set; then it is
    drawn at random after these filters, in this order (Hugging Face's and openai/gpt-2's):
    repetition penalty, temperature, top-k, top-p. Two other modes: picogpt TEXT --score
    scores the text (picogpt --score --help), and picogpt --explore opens a page to explore
    the model (picogpt --explore --help).

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
        ignore_end: Keep going past the model's end token (<|endoftext|>, GPT-2's end of a
            document; [SEP] in a BERT vocabulary) instead of ending the sample there.
        candidates: For each generated token, print it with the N most likely candidates and
            their probabilities before and after the filters, then the text.
        explain: Also write this HTML page of the run, to open offline in a browser: tokens
            with ids and bytes, each step's candidates, attention of every layer and head,
            the logit lens, and the position embeddings. A couplet model's page: the 上句,
            the 下句, the encoder's, the decoder's and the cross-attention of every layer and
            head, and each cross-attention head's 对位 (same position) score.
        prompt_file: Read the prompt from this UTF-8 file ('-' for standard input); one
            trailing newline is dropped.
        acrostic: Write an acrostic poem (藏头诗): line i starts with the i-th character, and
            the text ends after the last line. Needs a vocabulary with one token per Chinese
            character (a character model, or uer's WordPiece models).
        line: Each line has exactly this many Chinese characters (5: 五言, 7: 七言), then ，
            or 。 in turn. The poem's form is a mask on the logits, before the filters.
        rhyme: Each line that ends in 。 (the 下句: the 2nd, 4th ...) ends on a character that
            rhymes with the first such line's last (the 十三辙 of pypinyin's finals); the
            lines that end in ， are free. The whole text is the poem, the prompt included.
        lines: End after this many lines (句), counted as --line and --rhyme count them, the
            prompt's included: 4 is a 绝句, 8 a 律诗. The last ends in 。.
        distinct: A couplet model's 下句 uses no character twice (叠字) unless its 上句 repeats
            one at the same places (年年岁岁 -> 岁岁年年): a mask on the logits. On unless
            --distinct=false; docs/couplet.md gives the measurement.
        chat: Talk with a chat model (--hf): the prompt is your message, written into the
            model's own chat template, and the reply ends at the model's end token. With no
            prompt, a conversation on the terminal, a line per turn (Ctrl-D ends it).
        system: With --chat, the system turn (who the model is, how it answers).
        thinking: With --chat, let a model whose template takes enable_thinking (Qwen3)
            think before answering; its <think> block is shown apart, on stderr.
    """
    sampling = Sampling(top_k, top_p, temperature, repetition_penalty)
    check_settings(n_tokens, sampling, seed, stop)  # before loading; generate checks top_k
    whole_number("n_samples", n_samples, 1)
    whole_number("candidates", candidates, 0)
    if (candidates or explain) and n_samples > 1:
        raise PicoGPTError(_("--candidates and --explain show one sample; drop --n_samples."))
    if explain is not None:
        check_path(explain)
        refuse_views(kind_first(model_size, models_dir, hf), "explain", hf or model_size)
    check_chat(chat, hf, system, thinking, {
        "n_samples": n_samples > 1, "candidates": candidates, "explain": explain,
        "acrostic": acrostic, "line": line, "rhyme": rhyme, "stop": stop,
        "ignore_end": ignore_end})
    if chat:
        return chat_text(read_prompt(prompt, prompt_file), hf, system, thinking, n_tokens,
                         sampling, seed)
    couplet = kind_first(model_size, models_dir, hf).seq2seq  # an encoder-decoder: no GPT-2 flags
    if couplet:
        refuse_gpt_only({"acrostic": acrostic, "line": line, "rhyme": rhyme, "lines": lines,
                         "stop": stop,
                         "candidates": candidates, "ignore_end": ignore_end,
                         "repetition_penalty": repetition_penalty})
    elif distinct != DISTINCT:  # a switch: only leaving it off is a choice one can see
        raise PicoGPTError(_("--distinct is for a couplet model, whose 下句 answers a 上句 place "
                             "by place; drop --distinct."))
    poem = acrostic is not None or line is not None or rhyme is not False or lines is not None
    if poem and not couplet:
        check_verse(acrostic, line, rhyme, lines)
        if hf is None and model_size in MODEL_SIZES:  # GPT-2's vocabulary: refuse before loading
            raise byte_level_refusal()
        early = vocabulary_first(model_size, models_dir, hf)
        if early is not None:  # a character the vocabulary lacks is refused before the weights
            verse(early, acrostic, line, rhyme=rhyme, lines=lines)
    prompt = read_prompt(prompt, prompt_file)
    loaded = load_model(model_size, models_dir, base_url, hf)
    encoder, hparams, params, model = loaded.encoder, loaded.hparams, loaded.params, loaded.about()
    if loaded.kind.seq2seq and explain and is_pair(prompt):  # a whole 联: the poet's 下句 fed in
        first, second = pair_for_page(prompt, loaded, {
            "top_k": top_k, "top_p": top_p, "temperature": temperature, "seed": seed,
            "n_samples": n_samples, "distinct": None if distinct == DISTINCT else distinct})
        made = read_pair(first, second, params, hparams, encoder)
        print(_("picogpt: the 下句 is the poet's, fed to the decoder a character at a time "
                "(teacher forcing); the page shows the model's own distribution, masked, at each "
                "forced step."), file=sys.stderr)
        write_couplet_page(explain, couplet_data(first, made, params, hparams, encoder,
                                                 shown_sampler(Sampling(), None), model,
                                                 forced=True))
        print(_("picogpt: wrote {path}").format(path=explain), file=sys.stderr)
        return
    if loaded.kind.seq2seq:
        first = first_of(prompt, loaded)  # a 上句 it cannot answer: one line, before any other
        sampling = model_sampling(loaded, sampling)
        made = answer_text(first, loaded, n_samples, sampling, seed, distinct)
        if explain:
            write_couplet_page(explain, couplet_data(first, made, params, hparams, encoder, {
                **shown_sampler(sampling, seed), "distinct": distinct}, model))
            print(_("picogpt: wrote {path}").format(path=explain), file=sys.stderr)
        return
    sampling = model_sampling(loaded, sampling)
    top_k, top_p, temperature = sampling.top_k, sampling.top_p, sampling.temperature
    say_outside(encoder, prompt)
    input_ids, n_head = encoder.prompt_ids(prompt), loaded.kind.runs_with(hparams)
    constraint = verse(encoder, acrostic, line, loaded.n_vocab, rhyme, lines) if poem else None
    settings = {"top_k": top_k, "top_p": top_p, "temperature": temperature, "seed": seed,
                "repetition_penalty": repetition_penalty, "stop_at_end": not ignore_end,
                "stop": stop, "encoder": encoder, "constraint": constraint}
    n_shown = max(candidates, 10 if explain else 0)  # the page shows 10 per step
    with reading_notice(model["where"]) as quiet:
        if n_samples > 1:
            print_samples(call_first(quiet, generate_samples(
                input_ids, params, n_head, n_tokens, n_samples=n_samples, **settings)),
                n_samples, encoder, stop, input_ids)
            return
        if not n_shown:
            print_text(call_first(quiet, generate(input_ids, params, n_head, n_tokens,
                                                  **settings)), encoder, stop, input_ids)
            return
        steps = []  # what the page shows, as it is printed
        made = recorded(call_first(quiet, generate_steps(input_ids, params, n_head, n_tokens,
                                                         candidates=n_shown, **settings)), steps)
        if candidates:
            print_steps(made, encoder, candidates)
            print("".join(stream_text([step.token for step in steps], encoder, stop,
                                      input_ids)), flush=True)
        else:
            print_text((step.token for step in made), encoder, stop, input_ids)
    if explain:
        prompt_ids = input_ids
        shown = {"top_k": top_k, "top_p": top_p, "seed": seed, "temperature": temperature,
                 "repetition_penalty": repetition_penalty}
        write_page(explain, page_data([*prompt_ids, *(step.token for step in steps)],
                                      len(prompt_ids), steps, params, hparams, encoder, shown,
                                      model))
        print(_("picogpt: wrote {path}").format(path=explain), file=sys.stderr)


for mode_function in (generate_text, score_text, explore_model):
    mode_function.__doc__ += MODEL_ARGS
MODES = {"generate": generate_text, "score": score_text, "explore": explore_model}


def model_sampling(loaded: LoadedModel, sampling: Sampling) -> Sampling:
    """The sampler a run draws with, for every kind of model: the flags as given, or, when
    neither --top_k nor --top_p is, the one the model's training task recommends (its
    sampler.json: top_k, top_p and temperature, unless --temperature was given), said so."""
    if not sampling.sampling and loaded.sampler:
        said_sampler(loaded.sampler)
        return replace(sampling, top_k=loaded.sampler.get("top_k"),
                       top_p=loaded.sampler.get("top_p"),
                       temperature=loaded.sampler.get("temperature", 1.0)
                       if sampling.temperature == 1.0 else sampling.temperature)
    if sampling.temperature != 1.0 and not sampling.sampling:  # the output is unchanged
        print(_("picogpt: --temperature {temperature} has no effect on greedy decoding (each "
                "token is the most likely one); add --top_k 40 or --top_p 0.9 to sample.")
              .format(temperature=sampling.temperature), file=sys.stderr)
    return sampling


def shown_sampler(sampling: Sampling, seed: int | None) -> dict:
    """The sampler as a page says it."""
    return {"top_k": sampling.top_k, "top_p": sampling.top_p,
            "temperature": sampling.temperature, "seed": seed}


def said_sampler(sampler: dict) -> None:
    """Say that the model's own sampler is used, and how to be greedy instead."""
    print(_("picogpt: sampling as this model's training task recommends ({settings}); "
            "--top_k 1 is greedy.").format(settings=" ".join(
                f"--{key} {value}" for key, value in sampler.items())), file=sys.stderr)


def recorded(items: Iterable, into: list) -> Iterator:
    """items as they come, each also appended to into."""
    for item in items:
        into.append(item)
        yield item


def misplaced(mode: str):
    """For a flag the mode's function does not take: why, if another mode takes it."""
    def why(name: str) -> str | None:
        if name == "generate":
            return _("picogpt generates text when no mode is given; drop --generate (--score "
                     "and --explore choose the other modes).")
        homes = [other for other, function in MODES.items()
                 if name in inspect.signature(function).parameters]
        if not homes:
            return None
        # a whole sentence for each mode, so each reads naturally in every language
        said = {("generate", "score"): _("--{name} works with --score; add --score to score "
                                         "text."),
                ("generate", "explore"): _("--{name} works with --explore; add --explore to "
                                           "explore the model."),
                ("score", None): _("--{name} does not work with --score, which scores the text "
                                   "as it is; drop --{name}."),
                ("explore", None): _("--{name} does not work with --explore, whose page has a "
                                     "control for it; drop --{name}.")}
        return said[(mode, homes[0]) if mode == "generate" else (mode, None)].format(name=name)
    return why


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `picogpt` command: --score and --explore choose a mode."""
    argv = sys.argv[1:] if argv is None else argv
    end = argv.index("--") if "--" in argv else len(argv)  # after it, every word is the prompt
    # --score and --explore choose a mode (--score=false: none); generating is no flag's mode
    chosen = {i: mode for i, word in enumerate(argv[:end]) for mode in list(MODES)[1:]
              if word.partition("=")[0] == f"--{mode}"}
    with ending():
        on = {mode for i, mode in chosen.items()
              if switch(mode, argv[i].partition("=")[2] if "=" in argv[i] else None)}
        modes = [mode for mode in MODES if mode in on]
        if len(modes) > 1:
            raise PicoGPTError(_("--{one} and --{other} are two different commands; choose "
                                 "one.").format(one=modes[0], other=modes[1]))

    mode = modes[0] if modes else "generate"
    words = [word for i, word in enumerate(argv) if i not in chosen]
    program = "picogpt" if mode == "generate" else f"picogpt --{mode}"
    reuse_freed_memory()  # the process is ours: keep freed arrays for the next layer
    run_command(MODES[mode], words, program, "prompt", misplaced(mode))
