"""Scoring against transformers' GPT2LMHeadModel, with the windows built here from the docs."""

import importlib
import json
import math

import numpy as np
import pytest
import torch
from conftest import hf_model
from test_model import load, prompt_ids
from test_openai import assert_one_line_error, picogpt

from picogpt import PicoGPTError, score
from picogpt.files.openai import read_encoder
from picogpt.score import score_windows

END_OF_TEXT = 50256


def reference_logprobs(checkpoint, ids: list[int], stride: int, n_ctx: int) -> np.ndarray:
    """Each token's log-probability by the documented windows, on transformers' logits.

    inputs = [<|endoftext|>] + ids[:-1]; window w feeds inputs[w * stride : w * stride + n_ctx]
    and scores the ids no earlier window scored.
    """
    inputs = [END_OF_TEXT, *ids[:-1]]
    out = np.full(len(ids), np.nan)
    start = 0
    while np.isnan(out).any():
        window = inputs[start : start + n_ctx]
        with torch.no_grad():
            logits = hf_model(checkpoint)(torch.tensor([window])).logits[0].double()
        logprobs = torch.log_softmax(logits, -1).numpy()
        for j in range(len(window)):
            if np.isnan(out[start + j]):  # not scored by an earlier window
                out[start + j] = logprobs[j, ids[start + j]]
        start += stride
    return out


@pytest.mark.parametrize("n_ids", [50, 448])  # shorter than n_ctx = 128, and 3.5x n_ctx
@pytest.mark.parametrize("divisor", [2, 4, 1])  # stride n_ctx // 2, n_ctx // 4, n_ctx
def test_log_probabilities_and_perplexity_equal_transformers(tiny, n_ids, divisor):
    hparams, params = load(tiny.models_dir)
    n_ctx = hparams["n_ctx"]
    ids = prompt_ids(n_ids, seed=n_ids)
    got = score(ids, params, hparams["n_head"], stride=n_ctx // divisor)
    assert got.shape == (n_ids,)
    expected = reference_logprobs(tiny, ids, n_ctx // divisor, n_ctx)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    perplexity = math.exp(-np.mean(got.astype(np.float64)))
    np.testing.assert_allclose(perplexity, math.exp(-np.mean(expected)), rtol=1e-4)


def test_each_token_is_scored_once_with_the_documented_context(tiny, monkeypatch):
    hparams, params = load(tiny.models_dir)
    n_ctx, stride = hparams["n_ctx"], 40
    ids = prompt_ids(300, seed=1)
    module = importlib.import_module("picogpt.kvcache")  # GPT-2's engine: its windows
    fed = []  # the inputs of each window, which the model runs from position 0

    def recording(inputs, *args):
        fed.append(list(inputs))
        return real(inputs, *args)

    real = module.window_stream
    monkeypatch.setattr(module, "window_stream", recording)
    scored, contexts = [], []  # each token, and how many inputs its window fed before it
    for window in score_windows(ids, params, hparams["n_head"], stride):
        w = len(fed) - 1  # the window being fed when these scores came out
        for j in range(window.start, window.start + len(window.logprobs)):
            scored.append(j)
            contexts.append(j - w * stride)
    assert scored == list(range(300))  # every token once, in order
    inputs = [END_OF_TEXT, *ids[:-1]]
    assert fed == [inputs[w * stride : w * stride + n_ctx] for w in range(len(fed))]
    assert len(fed) == 1 + math.ceil((300 - n_ctx) / stride)
    for j, context in enumerate(contexts):  # input j predicts ids[j], after `context` inputs
        assert context == (j if j < n_ctx else n_ctx - stride + (j - n_ctx) % stride)
        assert context >= min(j, n_ctx - stride)


def test_bad_settings_are_refused(tiny):
    hparams, params = load(tiny.models_dir)
    for ids, stride, message in [([], None, "the text to score is empty"),
                                 ([1, 2], 0, "stride=0 is not a whole number from 1 to 128"),
                                 ([1, 2], 129, "stride=129 is not a whole number from 1 to 128")]:
        with pytest.raises(PicoGPTError, match=message):
            score(ids, params, hparams["n_head"], stride=stride)


TEXT = "Alan Turing theorized that 计算机 could think.\n"


def test_the_cli_prints_each_token_then_the_summary(tiny, vocab_dir):
    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny.models_dir)
    ids = encoder.encode(TEXT)
    logprobs = score(ids, params, hparams["n_head"])
    done = picogpt(TEXT, "--score", "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["token", "logprob", "rank"]
    rows = lines[1:-1]
    assert len(rows) == len(ids)
    for row, logprob in zip(rows, logprobs):
        assert float(row.split()[-2]) == pytest.approx(logprob, abs=1e-3)
    assert rows[-1].startswith("'\\n'")  # the newline is shown, not printed
    assert any("<e8>" in row or "<e7>" in row for row in rows)  # a split character: its bytes
    nll = -float(np.sum(logprobs, dtype=np.float64))
    n_bytes = len(TEXT.encode())
    n_chars = len(TEXT)
    assert lines[-1] == (f"{len(ids)} tokens, {n_chars} characters ({n_bytes} bytes): total NLL "
                         f"{nll:.3f} nats; {nll / len(ids):.3f} nats per token (perplexity "
                         f"{math.exp(nll / len(ids)):.3f}), {nll / n_chars:.3f} nats per "
                         f"character ({nll / math.log(2) / n_bytes:.4f} bits per byte)")


def test_the_cli_json_and_top_give_the_models_numbers(tiny, vocab_dir):
    encoder = read_encoder(vocab_dir)
    ids = encoder.encode(TEXT)
    done = picogpt(TEXT, "--score", "--json", "--top", "3", "--stride", "64", "--models_dir",
                   str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    hparams, params = load(tiny.models_dir)
    np.testing.assert_allclose([t["logprob"] for t in result["tokens"]],
                               score(ids, params, hparams["n_head"], stride=64), atol=1e-6)
    assert [t["id"] for t in result["tokens"]] == ids
    assert encoder.decode([t["id"] for t in result["tokens"]]) == TEXT
    with torch.no_grad():  # the expected tokens are transformers' most likely ones
        logits = hf_model(tiny)(torch.tensor([[END_OF_TEXT, *ids[:-1]]])).logits[0]
    probs = torch.softmax(logits.double(), -1)
    for position, token in enumerate(result["tokens"]):
        best = torch.topk(probs[position], 3)
        assert [t["id"] for t in token["top"]] == best.indices.tolist()
        np.testing.assert_allclose([t["prob"] for t in token["top"]], best.values, atol=1e-5)
        assert token["rank"] == 1 + int((probs[position] > probs[position, token["id"]]).sum())
    assert result["perplexity"] == pytest.approx(math.exp(result["nll_nats"] / len(ids)))
    # the totals against transformers over the same windows, not against the JSON's own NLL
    expected = reference_logprobs(tiny, ids, 64, hparams["n_ctx"])
    assert result["nll_nats"] == pytest.approx(-expected.sum(), abs=1e-3)
    assert result["perplexity"] == pytest.approx(math.exp(-expected.mean()), rel=1e-5)
    n_bytes = len(TEXT.encode("utf-8"))
    assert result["n_bytes"] == n_bytes
    assert result["bits_per_byte"] == pytest.approx(-expected.sum() / math.log(2) / n_bytes,
                                                    rel=1e-5)
    # training's units: nats per token and per character
    assert result["nats_per_token"] == pytest.approx(-expected.mean(), rel=1e-5)
    assert result["n_chars"] == len(TEXT)
    assert result["nats_per_char"] == pytest.approx(-expected.sum() / len(TEXT), rel=1e-5)


@pytest.mark.parametrize("args, message", [
    (["", "--score"], "the text to score is empty"),
    (["hi", "--score", "--stride", "0"], "stride=0 is not a whole number from 1 up"),
    (["hi", "--score", "--stride", "2000"], "stride=2000 is not a whole number from 1 to 128"),
    (["--score", "--prompt_file", "/no/such"], "cannot read --prompt_file /no/such"),
    (["hi", "--top", "3"], "--top works with --score"),
])
def test_bad_scoring_input_is_one_line(tiny, args, message):
    done = picogpt(*args, "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, message)


def test_a_window_longer_than_a_chunk_carries_keys_and_values_across_its_passes(tiny_end):
    """Real --score windows (1024 positions) go through each block in SCORE_CHUNK-row passes that
    attend to the earlier passes' keys and values. With n_ctx 4096, a 700-token text is one
    window of three passes (256 + 256 + 188), checked against transformers' logits."""
    from picogpt.score import SCORE_CHUNK

    hparams, params = load(tiny_end.models_dir)
    ids = prompt_ids(700, seed=12)
    assert len(ids) > 2 * SCORE_CHUNK and len(ids) <= hparams["n_ctx"]
    got = score(ids, params, hparams["n_head"], stride=hparams["n_ctx"])
    expected = reference_logprobs(tiny_end, ids, hparams["n_ctx"], hparams["n_ctx"])
    # the positions after the first pass are the ones a lost carry would change
    np.testing.assert_allclose(got[SCORE_CHUNK:], expected[SCORE_CHUNK:], atol=1e-4, rtol=0)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_a_character_models_start_token_is_labelled_the_end_where_it_is_predicted(capsys):
    """A character vocabulary's <|start|> opens every text in training and so also ends one:
    scored (a 下句's last) or expected (--top), it is the end, and the table says so in the
    reader's language (issue 62: it read as a start)."""
    from picogpt.chars import Chars, count_chars
    from picogpt.cli.terminal import print_scores
    from picogpt.errors import speaking
    from picogpt.score import Scores

    chars = Chars(count_chars("天高任鸟飞" * 2))
    ids = [*chars.encode("飞"), chars.end]
    scores = Scores(0, np.array([-1.5, -0.01]), np.array([1, 1]),
                    np.array([[chars.end], [chars.end]]), np.array([[0.2], [0.99]]))
    summary = {"n_tokens": 2, "n_chars": 1, "n_bytes": 3, "nll_nats": 1.51,
               "nats_per_token": 0.755, "perplexity": 2.1, "nats_per_char": 1.51,
               "bits_per_byte": 0.7}
    for lang, label in (("en", "'<|start|>' (end)"), ("zh", "'<|start|>'（结束）")):
        with speaking(lang):
            print_scores(ids, scores, summary, chars, 1, False)
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith("'飞'") and lines[1].endswith(f"{label} 0.2")
        assert lines[2].startswith(f"{label} ") and lines[2].endswith(f"{label} 0.99")
