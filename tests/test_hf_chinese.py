"""Chinese GPT-2s as uer publishes them (`--hf` on a folder with BERT's vocab.txt) against
transformers on the same random weights: logits, greedy ids from [CLS] + prompt, scores, the
end at [SEP], and every mode of the command on such a model."""

import base64
import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_hf import page_json
from test_openai import picogpt

from picogpt import generate, gpt2, load_hf
from picogpt.sampling import Sampling
from picogpt.web.session import Session
from scripts.fixtures import bert_vocab
from scripts.fixtures.checkpoint import random_arrays
from scripts.fixtures.reference import hf_model_of

PROMPT = "床前明月光，疑是地上霜。"
CLS, SEP = 101, 102  # where bert-base-chinese's vocab.txt (and bert_vocab's) puts them
# (n_layer, n_embd, n_head, n_ctx, seed, wte scale): a small body on the whole 21,128-token
# vocabulary, and uer/gpt2-chinese-cluecorpussmall's shape, both with sharp random weights. On
# the uer shape those push logits to ~12 and float32 rounding to ~5e-4 in both engines
# (tests/test_model.py); with wte (the output layer too) a tenth as large the logits stay
# below ~1 and the two engines differ by 4.9e-5 at most (measured), under the 1e-4 asked for.
# Seeds give clear top-1/top-2 margins and varied tokens (asserted).
SHAPES = {"small": (2, 64, 4, 128, 2, 1.0), "uer": (12, 768, 12, 1024, 0, 0.1)}


def uer_arrays(shape: str) -> tuple[dict, dict]:
    n_layer, n_embd, n_head, n_ctx, seed, scale = SHAPES[shape]
    hparams = {"n_vocab": bert_vocab.N_VOCAB, "n_ctx": n_ctx, "n_embd": n_embd,
               "n_head": n_head, "n_layer": n_layer}
    arrays = random_arrays(hparams, seed, sharp=True)
    return hparams, {**arrays, "model/wte": arrays["model/wte"] * np.float32(scale)}


def save_uer_folder(folder: Path, model) -> Path:
    """model saved as uer's repos hold it: config naming BertTokenizer, [CLS] and [SEP] as its
    start and end, and BertTokenizer's files over a vocab.txt built like bert-base-chinese's."""
    from transformers import BertTokenizer

    model.config.update({"tokenizer_class": "BertTokenizer", "bos_token_id": CLS,
                         "eos_token_id": SEP})
    model.save_pretrained(folder)
    vocab = bert_vocab.write(folder, bert_vocab.chinese_vocab())
    BertTokenizer(str(vocab), do_lower_case=False).save_pretrained(folder)
    (folder / "special_tokens_map.json").write_text(json.dumps({
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]"}))
    return folder


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(folder, transformers model) of the small shape."""
    model = hf_model_of(*uer_arrays("small"))
    return save_uer_folder(tmp_path_factory.mktemp("uer_small"), model), model


def hf_greedy(model, ids: list[int], n: int) -> list[int]:
    """transformers' greedy continuation (past [SEP] too), checked to be free of near-ties."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             eos_token_id=None, pad_token_id=0)
    top2 = np.sort(torch.cat(out.logits).numpy(), axis=-1)[:, -2:]
    # float32 noise in these models is ~5e-5 at most: a margin of 1e-3 is no near-tie
    assert (top2[:, 1] - top2[:, 0]).min() > 1e-3, "pick another seed in SHAPES"
    tokens = out.sequences[0, len(ids):].tolist()
    assert len(tokens) == n and len(set(tokens)) >= 5, "pick another seed in SHAPES"
    return tokens


def test_the_uer_shape_gives_transformers_logits_and_greedy_ids(tmp_path_factory):
    """uer/gpt2-chinese-cluecorpussmall's shape (102M parameters), once: the same logits
    within 1e-4 (see SHAPES) and the same 20 greedy ids from [CLS] + prompt, through the
    command."""
    hparams, arrays = uer_arrays("uer")
    model = hf_model_of(hparams, arrays)
    del arrays
    folder = save_uer_folder(tmp_path_factory.mktemp("uer"), model)
    encoder, loaded, params = load_hf(str(folder))
    assert loaded == hparams and encoder.n_vocab == 21128
    ids = encoder.prompt_ids(PROMPT)
    assert ids[0] == CLS and len(ids) == 1 + len(PROMPT)  # one token per character
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(gpt2(ids, **params, n_head=12), expected, atol=1e-4, rtol=0)
    greedy = hf_greedy(model, ids, 20)
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "20", "--ignore_end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == encoder.decode(greedy) + "\n"


def test_small_shape_logits_greedy_and_an_empty_prompt(small):
    folder, model = small
    encoder, hparams, params = load_hf(str(folder))
    ids = encoder.prompt_ids(PROMPT)
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(gpt2(ids, **params, n_head=4), expected, atol=1e-4, rtol=0)
    greedy = hf_greedy(model, ids, 20)
    assert list(generate(ids, params, 4, 20, stop_at_end=False, encoder=encoder)) == greedy
    done = picogpt("", "--hf", str(folder), "--n_tokens", "8", "--ignore_end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == encoder.decode(hf_greedy(model, [CLS], 8)) + "\n"  # from [CLS]


def test_score_equals_transformers_after_cls(small):
    folder, model = small
    encoder, _, _ = load_hf(str(folder))
    text = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。"
    ids = encoder.encode(text)
    assert len(ids) == len(text)
    with torch.no_grad():  # every token scored after [CLS], as picogpt scores
        logits = model(torch.tensor([[CLS, *ids[:-1]]])).logits[0].double()
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids)), ids].numpy()
    done = picogpt(text, "--hf", str(folder), "--score", "--json")
    assert done.returncode == 0, done.stderr
    scored = [token["logprob"] for token in json.loads(done.stdout)["tokens"]]
    np.testing.assert_allclose(scored, expected, atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def ending(tmp_path_factory):
    """A small model whose greedy continuation of PROMPT is [SEP] at a known step: the rows of
    wte for the token picked there and for [SEP] swapped (neither was fed before it, so
    everything before that step is unchanged, and there the two logits trade places)."""
    from transformers import BertTokenizer

    hparams, arrays = uer_arrays("small")
    model = hf_model_of(hparams, arrays)
    vocab = bert_vocab.write(tmp_path_factory.mktemp("vocab"), bert_vocab.chinese_vocab())
    tokenizer = BertTokenizer(str(vocab), do_lower_case=False)
    ids = [CLS, *tokenizer.encode(PROMPT, add_special_tokens=False)]
    out = hf_greedy(model, ids, 12)
    step = next(i for i in range(3, 12) if out[i] not in ids + out[:i] and SEP not in out[: i + 1])
    wte = arrays["model/wte"].copy()
    wte[[out[step], SEP]] = wte[[SEP, out[step]]]
    model = hf_model_of(hparams, {**arrays, "model/wte": wte})
    swapped = hf_greedy(model, ids, 12)
    assert swapped[:step] == out[:step] and swapped[step] == SEP  # transformers agrees
    return save_uer_folder(tmp_path_factory.mktemp("uer_end"), model), swapped, step


def test_generation_ends_at_sep_unless_ignore_end(ending):
    folder, swapped, step = ending
    encoder, _, _ = load_hf(str(folder))
    assert encoder.end == SEP
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "12")
    assert done.returncode == 0, done.stderr
    assert done.stdout == encoder.decode(swapped[:step]) + "\n"  # [SEP] ends it, not printed
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "12", "--ignore_end")
    assert done.stdout == encoder.decode(swapped) + "\n"


def test_characters_outside_the_vocabulary_are_named_on_one_line(small):
    folder, _ = small
    done = picogpt("床前😀明月光🌙，", "--hf", str(folder), "--n_tokens", "3")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("picogpt: the vocabulary has no token for 😀 🌙; the model reads each "
                           "as [UNK].\n")
    score = picogpt("明月😀", "--hf", str(folder), "--score")
    assert score.returncode == 0 and score.stderr.startswith(
        "picogpt: the vocabulary has no token for 😀; the model reads it as [UNK].\n")


def test_stop_and_candidates_on_a_chinese_model(small):
    folder, model = small
    encoder, _, _ = load_hf(str(folder))
    ids = encoder.prompt_ids(PROMPT)
    greedy = hf_greedy(model, ids, 12)
    text = encoder.decode(greedy)
    stop = encoder.decode([greedy[6]])
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "12", "--ignore_end",
                   "--stop", stop)
    assert done.returncode == 0, done.stderr
    assert done.stdout == text[: text.index(stop)] + "\n"
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
    best = np.argsort(probs)[::-1][:3]
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "1", "--candidates", "3")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[1].split()
    assert first[1] == f"'{encoder.decode([best[0]])}'"  # the chosen token, then its entropy
    shown = [(first[i], float(first[i + 1])) for i in (3, 7, 11)]
    assert shown == [(f"'{encoder.decode([i])}'", pytest.approx(probs[i], rel=1e-3))
                     for i in best]


def test_explain_page_shows_one_token_per_character_without_bytes(small, tmp_path):
    folder, model = small
    page = tmp_path / "page.html"
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "3", "--ignore_end",
                   "--explain", str(page))
    assert done.returncode == 0, done.stderr
    data = page_json(page)
    prompt = data["tokens"][: data["n_prompt"]]
    assert [token["text"] for token in prompt] == ["[CLS]", *PROMPT]
    assert not any("bytes" in token for token in data["tokens"]) and data["characters"] == []
    n = data["attention"]["n"]
    attention = np.frombuffer(base64.b64decode(data["attention"]["data"]), "<f4").reshape(
        2, 4, n, n)
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")  # sdpa does not return the attention weights
    ids = [token["id"] for token in data["tokens"]]
    with torch.no_grad():
        expected = eager(torch.tensor([ids]), output_attentions=True).attentions
    np.testing.assert_allclose(attention[1], expected[1][0, :, -n:, -n:].numpy(), atol=1e-5)


def test_the_tokens_caption_names_wordpiece_on_a_wordpiece_model(small, browser, tmp_path):
    """A BERT-vocabulary model's page says its tokens are WordPiece tokens, in both languages,
    not GPT-2's BPE pieces (its tokens never hold part of a character)."""
    folder, _ = small
    path = tmp_path / "page.html"
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "2", "--ignore_end",
                   "--explain", str(path))
    assert done.returncode == 0, done.stderr
    assert page_json(path)["vocabulary"] == "wordpiece"
    for locale, lang in (("en-US", "en"), ("zh-CN", "zh")):
        context = browser.new_context(locale=locale)
        page = context.new_page()
        page.goto(path.as_uri())
        caption = page.locator("#n_tokens").inner_text()
        assert "WordPiece" in caption and "BPE" not in caption, (lang, caption)
        assert ("词元" in caption) == (lang == "zh"), caption
        page.click("#lang button[data-lang=" + ("zh" if lang == "en" else "en") + "]")
        switched = page.locator("#n_tokens").inner_text()
        assert "WordPiece" in switched and switched != caption, switched
        context.close()


def test_explore_session_on_a_chinese_model(small):
    folder, model = small
    encoder, hparams, params = load_hf(str(folder))
    session = Session(encoder, hparams, params, {"name": str(folder), "kind": "hf"})
    state = session.set_text("床前明月光")
    assert [token["text"] for token in state["tokens"]] == ["[CLS]", *"床前明月光"]
    assert state["pending"] == "" and state["characters"] == []
    ids = encoder.prompt_ids("床前明月光")
    greedy = hf_greedy(model, ids, 5)
    assert session.next(Sampling())["greedy"] == greedy[0]
    made = [token["id"] for token in session.generate(Sampling(), None, 5)]
    assert made == greedy[: len(made)] and (len(made) == 5 or greedy[len(made)] == SEP)
