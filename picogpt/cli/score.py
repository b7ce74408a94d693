"""`picogpt TEXT --score`: how likely the model finds each token of a text, printed token by
token or as one JSON object."""

from ..errors import PicoGPTError, _, whole_number
from ..files.loaded_model import load_model
from ..score import check_score_settings, join_scores, score_windows, summary
from .command import read_prompt
from .couplet import score_couplet
from .terminal import call_first, print_scores, progress, reading_notice, say_outside


def score_text(prompt: str = "", stride: int | None = None, top: int = 0, json: bool = False,
               prompt_file: str | None = None, model_size: str = "124M",
               models_dir: str = "models", base_url: str | None = None,
               hf: str | None = None) -> None:
    """picogpt TEXT --score: how likely GPT-2 finds each token of the text.

    Prints each token's log-probability and rank, then the count, total negative
    log-likelihood, perplexity per token and bits per byte. Every token is scored, the first
    one after the model's start token (<|endoftext|> for GPT-2, [CLS] for a BERT vocabulary), as
    the model saw the start of a document.

    Args:
        prompt: The text to score, exactly as typed.
        stride: Tokens between the starts of two windows of a text longer than the context;
            unset is half the model's context (512 for GPT-2).
        top: Also print the N tokens the model expected at each position.
        json: Print everything as one JSON object instead.
        prompt_file: Read the text from this UTF-8 file ('-' for standard input); one
            trailing newline is dropped.
    """
    if stride is not None:  # before loading; the model's context bounds it once loaded
        whole_number("stride", stride, 1)
    whole_number("top", top, 0)
    text = read_prompt(prompt, prompt_file)
    loaded = load_model(model_size, models_dir, base_url, hf)
    if loaded.kind.seq2seq:  # a 下句 given its 上句
        return score_couplet(text, loaded, top, json)
    encoder, hparams, params, model = loaded.encoder, loaded.hparams, loaded.params, loaded.about()
    whole_number("top", top, 0, loaded.n_vocab)
    check_score_settings(1, loaded.n_ctx // 2 if stride is None else stride, loaded.n_ctx)
    say_outside(encoder, text)
    ids, start = encoder.encode(text), encoder.start
    if not loaded.kind.scores_first:  # as transformers' perplexity recipe: the text as the
        ids = encoder.prompt_ids(text)  # tokenizer gives it, begin token or not, first unscored
        start, ids = ids[0], ids[1:]
        if not ids:
            raise PicoGPTError(_("the text is one token, and this model's tokenizer adds no "
                                 "begin token before it, so nothing is left to score; give a "
                                 "longer text."))
    with reading_notice(model["where"]) as quiet, progress(len(ids), _("scoring")) as bar:
        windows = []
        for window in call_first(quiet, score_windows(ids, params, loaded.kind.runs_with(hparams),
                                                      stride, top, start)):
            windows.append(window)
            bar.update(len(window.logprobs))
    scores = join_scores(windows)
    print_scores(ids, scores, summary(text, scores), encoder, top, json)
