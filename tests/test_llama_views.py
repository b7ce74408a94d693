"""The --explain page and the --explore session of the LLaMA kind, against transformers: each
layer's attention, every query head of it, as transformers' eager attention computes it on the
same folder; each query head named with the key/value head it shares, as repeat_kv shares them;
and the page drawn in Chromium on a phone and a desktop."""

import base64
import http.client
import os
import re
import signal
import subprocess
import threading

import numpy as np
import pytest
import torch
from test_explore import request
from test_hf import page_json
from test_openai import PICOGPT, picogpt
from test_openai_faults import default_sigint

from picogpt.files.loaded_model import load_model
from picogpt.model import softmax
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session
from scripts.fixtures.llama import random_llama, save_llama

PROMPT = "Tom and Ann met Tom"  # "Tom" twice: the page has an induction score


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """An untied Llama of 4 query heads over 2 key/value heads, saved with a byte vocabulary,
    and its transformers model (eager attention: the weights themselves, output_attentions)."""
    folder = tmp_path_factory.mktemp("llama_views") / "model"
    return folder, save_llama(random_llama("llama", False, seed=5, vocab_size=257), folder)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """The user's cache directory, where converted stores go: a fresh one per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def attentions(model, ids) -> np.ndarray:  # -> [n_layer, n_head, n_seq, n_seq]
    """transformers' attention weights of ids, every layer and query head."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()


def page_attention(data: dict) -> np.ndarray:  # -> [n_layer, n_head, n, n]
    n = data["attention"]["n"]
    flat = np.frombuffer(base64.b64decode(data["attention"]["data"]), "<f4")
    return flat.reshape(data["n_layer"], data["n_head"], n, n)


def repeat_kv_heads(n_head: int, n_kv_head: int) -> list[int]:
    """The key/value head each query head reads, as transformers' own repeat_kv lays them out."""
    from transformers.models.llama.modeling_llama import repeat_kv

    index = torch.arange(n_kv_head, dtype=torch.float32).view(1, n_kv_head, 1, 1)
    return repeat_kv(index, n_head // n_kv_head).flatten().int().tolist()


@pytest.fixture(scope="module")
def explained(llama_folder, tmp_path_factory):
    """The --explain page of a greedy run on the Llama folder, and its data."""
    folder, model = llama_folder
    path = tmp_path_factory.mktemp("page") / "llama.html"
    cache = tmp_path_factory.mktemp("cache")
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "6", "--explain", str(path),
                   env={"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stderr
    return path, page_json(path)


def test_the_explain_page_holds_transformers_attention_for_every_query_head(llama_folder,
                                                                          explained):
    """Per layer, n_head patterns, each equal position by position to transformers' eager
    attention on the same ids within 1e-4 (float32 against float32, two orders of summation);
    the last logit-lens row is the model's own next-token distribution."""
    _, model = llama_folder
    _, data = explained
    ids = [token["id"] for token in data["tokens"]]
    theirs = attentions(model, ids)
    assert (data["n_layer"], data["n_head"], data["n_kv_head"]) == (2, 4, 2)
    ours = page_attention(data)
    assert ours.shape == theirs.shape == (2, 4, len(ids), len(ids))  # every position is kept
    for layer in range(2):
        for head in range(4):
            for q in range(len(ids)):
                np.testing.assert_allclose(ours[layer, head, q], theirs[layer, head, q],
                                           atol=1e-4, err_msg=f"layer {layer} head {head} q {q}")
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].numpy()
    probs = softmax(logits)
    np.testing.assert_allclose(data["lens"]["probs"][-1], probs.max(-1), atol=1e-4)
    assert data["heads"]["induction"] is not None and data["wpe"] is None  # rope: no wpe table
    assert data["model"]["architecture"] == "llama"


def test_each_query_head_is_named_with_the_key_value_head_repeat_kv_gives_it(explained):
    _, data = explained
    assert data["kv_heads"] == repeat_kv_heads(4, 2) == [0, 0, 1, 1]


@pytest.mark.parametrize("locale,width", [("en-US", 390), ("zh-CN", 1280)])
def test_the_page_names_each_head_with_its_key_value_head_and_fits(explained, browser, locale,
                                                                    width, tmp_path):
    """In Chromium: the head select, the small pictures, the head-score columns and the hover
    name each query head with its key/value head in the page's language; the rotary model has
    no wpe picture; the page fits a phone's width."""
    path, data = explained
    phone = width < 500
    context = browser.new_context(locale=locale, viewport={"width": width, "height": 900},
                                  is_mobile=phone, has_touch=phone)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelectorAll('#heads tr th').length > 1")
    said = "{h} · kv {kv}" if locale == "en-US" else "{h} · KV 头 {kv}"
    names = [said.format(h=h, kv=kv) for h, kv in enumerate(data["kv_heads"])]
    assert page.locator("#head option").all_inner_texts() == names
    head_word = "head" if locale == "en-US" else "头"
    titles = page.evaluate("[...document.querySelectorAll('#overview canvas')].map(c => c.title)")
    assert titles == [f"{head_word} {name}" for name in names]
    columns = page.locator("#heads .scores[data-kind=previous] tr:first-child th")
    assert columns.all_inner_texts()[1:] == [f"{head_word} {name}" for name in names]
    assert page.locator("#attn-gqa").is_visible() and not page.locator("#wpe-panel").is_visible()
    page.select_option("#layer", "1")
    page.select_option("#head", "1")  # query head 1 reads kv head 0 (1 % 2 would say 1)
    page.locator("#attn").scroll_into_view_if_needed()
    box, n = page.locator("#attn").bounding_box(), len(data["tokens"])
    page.mouse.move(box["x"] + 1.5 * box["width"] / n, box["y"] + (n - 0.5) * box["height"] / n)
    tip = page.locator("#attn-tip").inner_text()
    assert tip.startswith("layer 1 head 1 · kv 0: query " if locale == "en-US"
                          else "第 1 层第 1 个头（共享第 0 个 KV 头）：查询 ")
    assert float(re.split("[ ：]", tip)[-1]) == pytest.approx(
        page_attention(data)[1, 1, n - 1, 1], rel=1e-6)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert errors == []
    context.close()


@pytest.fixture
def served_llama(llama_folder, cache_home):
    """An explore server on the Llama folder, in this process, on a free port."""
    loaded = load_model(hf=str(llama_folder[0]))
    server = ExploreServer(Session(loaded.encoder, loaded.hparams, loaded.params,
                                  loaded.about()), 0, PROMPT)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_explore_serves_the_llama_models_views_and_candidates(llama_folder, served_llama):
    """The explore session on the Llama folder: its next-token candidates are transformers'
    distribution, its inside views every query head's attention as transformers computes it,
    after a step through the LLaMA kind's KV cache."""
    model, server = llama_folder[1], served_llama
    status, state = request(server, path="/api/state")
    assert status == 200, state
    ids = [token["id"] for token in state["tokens"]]
    with torch.no_grad():
        probs = softmax(model(torch.tensor([ids])).logits[0, -1].numpy())
    shown = {c["id"]: c["before"] for c in state["next"]["candidates"]}
    np.testing.assert_allclose(list(shown.values()), probs[list(shown)], atol=1e-5)
    status, state = request(server, path="/api/append",
                            body=f'{{"token": {state["next"]["greedy"]}}}'.encode())
    assert status == 200, state
    ids = [token["id"] for token in state["tokens"]]
    status, inside = request(server, path="/api/inside")
    assert status == 200, inside
    assert inside["kv_heads"] == repeat_kv_heads(4, 2) and inside["wpe"] is None
    np.testing.assert_allclose(page_attention(inside), attentions(model, ids), atol=1e-4)


def test_the_explore_page_of_a_llama_names_its_heads_on_a_phone(served_llama, browser):
    """The explore page in Chromium at 390 px: the inside views drawn with each query head's
    key/value head, no wpe picture, nothing wider than the phone, no script error."""
    context = browser.new_context(locale="en-US", viewport={"width": 390, "height": 900},
                                  is_mobile=True, has_touch=True)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served_llama.url)
    page.wait_for_function("document.querySelectorAll('#heads tr th').length > 1")
    assert page.locator("#head option").all_inner_texts() == [
        "0 · kv 0", "1 · kv 0", "2 · kv 1", "3 · kv 1"]
    assert not page.locator("#wpe-panel").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert errors == []
    context.close()


def test_the_explore_command_starts_on_a_llama_folder(llama_folder, tmp_path):
    """picogpt --explore --hf FOLDER serves its page (it was refused before the LLaMA kind had
    views)."""
    process = subprocess.Popen([str(PICOGPT), "Tom", "--explore", "--no_browser", "--hf",
                                str(llama_folder[0])], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
                               env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()
        port = int(url.split(":")[2].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", url.split(str(port), 1)[1])
        assert connection.getresponse().status == 200
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in stderr
