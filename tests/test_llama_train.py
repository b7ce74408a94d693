"""python -m picogpt.train --model llama: the run, and its folder in Hugging Face's layout."""

import json

import numpy as np
import pytest
import torch
from test_openai import assert_one_line_error, picogpt
from test_poems import verse_text

from picogpt.chars import Chars, count_chars
from picogpt.cli.train import main, train
from picogpt.files import poems as files_poems
from picogpt.files.params import nest
from picogpt.files.store import read_params
from picogpt.llama import train as llama_training
from picogpt.llama.model import HPARAMS, llama
from picogpt.tasks import poems


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A CI-sized --model llama poems run: 2 layers, 4 query heads over 2 key/value heads."""
    folder = tmp_path_factory.mktemp("llama")
    text = folder / "poems.txt"
    text.write_text(verse_text(300), encoding="utf-8")
    result = train(task="poems", model="llama", name="ll", models_dir=str(folder),
                   text=str(text), n_layer=2, n_head=4, n_embd=32, n_ctx=24, n_batch=8,
                   steps=40, lr=1e-2, n_held_out=20, curve_every=20)
    return folder, text, result


def test_a_run_learns_and_writes_a_folder_transformers_loads_with_equal_logits(trained):
    """transformers reads the folder as it is (config.json, model.safetensors): its logits
    equal picogpt's forward on the store beside them (float32 sums in another order: 1e-4 of
    the largest logit); and the model learned (held-out loss under the bigram's)."""
    import transformers

    folder, _text, result = trained
    curve = result["curve"]
    assert curve["best"]["held_out"] < curve["baselines"]["bigram"]
    model_dir = folder / "ll"
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    theirs_model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    assert type(theirs_model).__name__ == "LlamaForCausalLM"
    hparams = json.loads((model_dir / "hparams.json").read_text(encoding="utf-8"))
    assert hparams["model"] == "llama" and hparams["n_kv_head"] == 2
    params = nest(read_params(model_dir))
    ids = np.random.default_rng(0).integers(0, hparams["n_vocab"], (2, 24))
    ours = llama(ids, **params, **{name: hparams[name] for name in HPARAMS})
    with torch.no_grad():
        theirs = theirs_model(torch.from_numpy(ids)).logits.numpy()
    assert ours.shape == theirs.shape == (2, 24, hparams["n_vocab"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * np.abs(theirs).max())


def test_transformers_tokenizer_gives_the_ids_picogpt_trained_on(trained):
    """The folder's tokenizer.json, through transformers' AutoTokenizer: the start token, then
    a character each (line breaks and spaces too; a character never seen: the unknown token),
    the ids of the character vocabulary the poems task builds from its training poems."""
    import transformers

    folder, text, _result = trained
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder / "ll")
    trained_poems = poems.split_poems(files_poems.read_paragraphs(
        text.read_text(encoding="utf-8")), 20)[0]
    chars = Chars(count_chars("".join(trained_poems)))
    for said in ["甲乙丙，丁戊。\n己 庚", "", "甲月乙"]:  # 月 is not in the vocabulary
        assert tokenizer(said)["input_ids"] == chars.prompt_ids(said), said
    assert tokenizer.decode(chars.encode("甲乙，\n丙")) == "甲乙，\n丙"


@pytest.mark.parametrize("args,message", [
    (["--n_kv_head", "2"], "--n_kv_head is a setting of the LLaMA block; add --model llama"),
    (["--model", "llama", "--n_head", "4", "--n_kv_head", "3"],
     "n_head=4 is not a multiple of n_kv_head=3"),
    (["--model", "mamba"], "model='mamba' is not a block picogpt trains"),
    (["--model", "llama", "--task", "couplet"], "--model llama trains --task text, poems or "
                                                "induction; --task couplet"),
    (["--model", "llama", "BOOK"], "holds a character vocabulary; add --vocab chars"),
])
def test_settings_the_llama_block_cannot_train_are_one_line(args, message, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text("One line.\n\nAnother.\n", encoding="utf-8")
    args = [str(book) if arg == "BOOK" else arg for arg in args]
    if "--task" not in args and str(book) not in args:
        args = [*args, "--task", "poems", "--text", str(book)]
    done = picogpt(*args, "--models_dir", str(tmp_path), entry=main)
    assert_one_line_error(done, message)
    assert not (tmp_path / "poems").exists()


def test_the_induction_task_trains_the_llama_block_and_measures_its_heads(tmp_path):
    """--task induction --model llama: the copy probes read the block's attention patterns,
    one score per query head of each layer."""
    result = train(task="induction", model="llama", name="ind", models_dir=str(tmp_path),
                   n_layer=2, n_head=2, n_embd=16, n_ctx=32, n_batch=4, steps=4,
                   warmup=1, curve_every=2, n_vocab=16, block_max=8)
    measured = result["curve"]["measured"][-1]
    assert np.asarray(measured["induction"]).shape == (2, 2)
    assert result["curve"]["settings"]["n_kv_head"] == 1
    assert (tmp_path / "ind" / "model.safetensors").is_file()


def test_the_trace_patterns_are_the_forwards_own():
    """llama/train.py's trace: the logits are llama()'s, and each block's patterns are causal
    rows that sum to 1, one per query head."""
    hparams = llama_training.hparams(20, 16, 32, 4, 2)
    params = llama_training.init_params(hparams, np.random.default_rng(1))
    ids = np.random.default_rng(2).integers(0, 20, 10)
    logits, values = llama_training.trace(ids, params, hparams)
    np.testing.assert_allclose(logits, llama_training.logits(ids, params, hparams), rtol=0,
                               atol=1e-6)
    pattern = values["blocks.1.attn.pattern"]
    assert pattern.shape == (4, 10, 10)
    np.testing.assert_allclose(pattern.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(pattern, 1) == 0)


def test_a_stopped_llama_run_resumes_as_its_block_and_ends_as_an_uninterrupted_run(
        tmp_path, monkeypatch):
    """Ctrl-C at step 5 of a --model llama run with its own n_kv_head and rope_theta, then
    --resume: the same weights, bit for bit, as the run never stopped (the resumed run is the
    LLaMA block of the settings it began with, not GPT-2's or the defaults)."""
    from safetensors.numpy import load_file

    from picogpt.llama import fasttrain

    text = tmp_path / "verse.txt"
    text.write_text(verse_text(80), encoding="utf-8")
    flags = ["--task", "poems", "--text", str(text), "--model", "llama", "--n_kv_head", "1",
             "--rope_theta", "500", "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
             "--n_ctx", "16", "--n_batch", "4", "--steps", "10", "--curve_every", "5",
             "--n_held_out", "10"]
    whole = picogpt(*flags, "--name", "whole", "--models_dir", str(tmp_path), entry=main)
    assert whole.returncode == 0, whole.stderr
    real, calls = fasttrain.loss_and_grads, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(fasttrain, "loss_and_grads", interrupted)
    assert picogpt(*flags, "--name", "cut", "--models_dir", str(tmp_path),
                   entry=main).returncode == 130
    monkeypatch.undo()
    done = picogpt("--resume", "--name", "cut", "--models_dir", str(tmp_path), entry=main)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "cut" / "config.json").read_text(encoding="utf-8"))
    assert config["num_key_value_heads"] == 1 and config["rope_theta"] == 500
    ours, theirs = (load_file(tmp_path / name / "model.safetensors") for name in ("cut", "whole"))
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
