"""The loaded model's own facts bound what a command takes: a padded wte, a context longer than
GPT-2's, a vocabulary smaller than GPT-2's. Checked against transformers on the same weights."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import write_checkpoint
from test_hf import add_tokenizer
from test_openai import assert_one_line_error, picogpt

from picogpt.files.loaded_model import load_model
from picogpt.files.store import save_model
from picogpt.kinds import KINDS
from picogpt.tasks.induction import vocab_files
from picogpt.train import init_params
from picogpt.web.session import Session
from scripts.fixtures.checkpoint import random_arrays
from scripts.fixtures.reference import hf_model_of

N_VOCAB, PADDED = 50257, 50304  # GPT-2's vocabulary; nanoGPT's wte rounded up to 64s
PROMPT = "Alan Turing theorized that computers"


@pytest.fixture(scope="module")
def padded(tmp_path_factory, vocab_dir):
    """A Hugging Face folder whose wte has 47 rows past its tokenizer, made to win: each padded
    row is a scaled copy of the greedy pick's row, so an engine that samples them picks one."""
    hparams = {"n_vocab": PADDED, "n_ctx": 64, "n_embd": 32, "n_head": 2, "n_layer": 1}
    arrays = random_arrays(hparams, 5, sharp=True)
    model = hf_model_of(hparams, arrays)
    folder = tmp_path_factory.mktemp("padded")
    add_tokenizer(folder, vocab_dir)
    ids = load_ids(folder)
    with torch.no_grad():
        best = int(model(torch.tensor([ids])).logits[0, -1, :N_VOCAB].argmax())
        model.transformer.wte.weight[N_VOCAB:] = 3 * model.transformer.wte.weight[best]
        assert int(model(torch.tensor([ids])).logits[0, -1].argmax()) >= N_VOCAB  # padded wins
    model.save_pretrained(folder)
    return folder, model


def load_ids(folder: Path) -> list[int]:
    from picogpt.files.folder_vocab import read_vocab

    return read_vocab(folder, "").encode(PROMPT)


def transformers_greedy(model, ids: list[int], n: int) -> list[int]:
    """Greedy ids over the vocabulary's rows only, as the tokenizer can decode them."""
    out = list(ids)
    with torch.no_grad():
        for _ in range(n):
            out.append(int(model(torch.tensor([out])).logits[0, -1, :N_VOCAB].argmax()))
    return out[len(ids):]


def test_a_padded_wte_is_cut_to_the_vocabulary(padded):
    folder, model = padded
    loaded = load_model(hf=str(folder))
    assert loaded.n_vocab == N_VOCAB and loaded.hparams["n_vocab"] == N_VOCAB
    assert loaded.params["wte"].shape == (N_VOCAB, 32)


def test_a_padded_folder_generates_the_vocabularys_greedy_text(padded):
    folder, model = padded
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "8")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    ids = load_ids(folder)
    expected = load_model(hf=str(folder)).encoder.decode(transformers_greedy(model, ids, 8))
    assert done.stdout == expected + "\n"


def test_a_padded_folder_scores_every_token_with_no_traceback(padded):
    folder, model = padded
    done = picogpt(PROMPT, "--hf", str(folder), "--score", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    scores = json.loads(done.stdout)
    ids = load_ids(folder)
    with torch.no_grad():  # <|endoftext|> first, as --score feeds the text
        logits = model(torch.tensor([[N_VOCAB - 1, *ids]])).logits[0, :-1, :N_VOCAB]
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids)), ids].numpy()
    got = np.array([token["logprob"] for token in scores["tokens"]])
    np.testing.assert_allclose(got, expected, atol=1e-4)  # float32 on both sides


def test_the_explore_session_never_takes_a_padded_id(padded):
    folder, model = padded
    loaded = load_model(hf=str(folder))
    session = Session(loaded.encoder, loaded.hparams, loaded.params, loaded.about())
    session.set_text(PROMPT)
    assert session.logits.shape == (N_VOCAB,)
    ids = load_ids(folder)
    assert int(np.argmax(session.logits)) == transformers_greedy(model, ids, 1)[0]


@pytest.fixture(scope="module")
def long_context(tmp_path_factory):
    """A tiny GPT-2 with 2048 positions, twice GPT-2's, converted; and its transformers twin."""
    checkpoint = write_checkpoint(tmp_path_factory.mktemp("long"), "tiny", 3,
                                  extra=["--n_ctx", "2048"], convert=True)
    hparams = json.loads((checkpoint.model_dir / "hparams.json").read_text())
    assert hparams["n_ctx"] == 2048
    return checkpoint.models_dir, hf_model_of(hparams, dict(np.load(checkpoint.reference)))


def test_a_2048_position_model_scores_with_a_stride_past_gpt2s_context(long_context):
    models_dir, model = long_context
    text = " ".join(f"w{i % 97}" for i in range(700))  # 1,400 tokens or more: one window
    done = picogpt(text, "--score", "--json", "--stride", "1500",
                   "--models_dir", str(models_dir))
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)
    ids = [token["id"] for token in scores["tokens"]]
    assert 1024 < len(ids) <= 2047
    with torch.no_grad():
        logits = model(torch.tensor([[N_VOCAB - 1, *ids]])).logits[0, :-1]
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids)), ids].numpy()
    np.testing.assert_allclose([t["logprob"] for t in scores["tokens"]], expected, atol=1e-4)


def test_a_stride_past_the_models_own_context_names_that_context(long_context):
    models_dir, _ = long_context
    done = picogpt("hello", "--score", "--stride", "3000", "--models_dir", str(models_dir))
    assert_one_line_error(done, "stride=3000 is not a whole number from 1 to 2048")


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A model of 64 tokens (t0 .. t62 and [CLS]), as the induction task writes one."""
    hparams = {"n_vocab": 64, "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_layer": 1}
    models_dir = tmp_path_factory.mktemp("small")
    save_model(models_dir / "small", hparams, init_params(hparams, np.random.default_rng(0)),
               None, vocab_files(64))
    return models_dir


@pytest.mark.parametrize("top_k, bound", [("0", "from 1 up"), ("65", "from 1 to 64")])
def test_top_k_is_bounded_by_the_models_vocabulary(small_vocab, top_k, bound):
    done = picogpt("t5 t17", "--top_k", top_k, "--model_size", "small", "--models_dir",
                   str(small_vocab))
    assert_one_line_error(done, f"top_k={top_k} is not a whole number {bound}")
    assert "50257" not in done.stderr


def test_top_k_at_the_models_vocabulary_samples(small_vocab):
    done = picogpt("t5 t17", "--top_k", "64", "--seed", "1", "--n_tokens", "4", "--model_size",
                   "small", "--models_dir", str(small_vocab))
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"( t\d+){1,4}\n", done.stdout), done.stdout  # a space after "t17"


def test_a_fixtures_random_weights_say_so_when_loaded(tiny):
    """scripts.fixtures.checkpoint marks its folder, so no page or message calls it GPT-2."""
    loaded = load_model("124M", str(tiny.models_dir))
    assert loaded.random and loaded.source == "released" and loaded.about()["random"] is True
    assert loaded.kind is KINDS["gpt2"] and loaded.about()["kind"] == "released"  # the pages'
