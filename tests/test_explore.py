"""The --explore page and its server: in Chromium through Playwright against a served tiny model,
and its refusals as a hostile page or a careless request would meet them."""

import hashlib
import http.client
import json
import re
import signal
import subprocess
import threading

import numpy as np
import pytest
from test_model import load
from test_openai import PICOGPT, assert_one_line_error, picogpt
from test_openai_faults import default_sigint

from picogpt import generate, gpt2, trace
from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.model import softmax
from picogpt.sampling import Sampling
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session

PROMPT = "Alan Turing theorized that"
HAN = "[\u4e00-\u9fff]"  # one Chinese character


@pytest.fixture
def served(tiny):
    """An explore server on the tiny model, in this process, on a free port."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    model = {"name": "124M", "kind": "released", "where": str(tiny.model_dir),
             **{key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}}
    server = ExploreServer(Session(encoder, hparams, params, model), 0, PROMPT)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def open_page(browser, server, locale="en-US"):
    """The page in a fresh context; every request it makes is recorded."""
    context = browser.new_context(locale=locale, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(server.url)
    page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
    return page


def strip_ids(page) -> list[int]:
    return [int(x) for x in page.locator("#tokens .tok .id").all_inner_texts()]


def set_knob(page, knob: str, value) -> None:
    """Move a slider as a hand would: its value, then the input event the page listens to."""
    page.evaluate(f"""() => {{ const k = document.getElementById('{knob}'); k.value = '{value}';
                      k.dispatchEvent(new Event('input')); }}""")


def wait_quiet(page) -> None:
    """Until every request the page sent has its answer drawn (typing waits 120 ms first)."""
    page.wait_for_timeout(200)
    page.wait_for_function("window.pending === 0")


def next_logits(tiny, ids: list[int]) -> np.ndarray:
    """The model's logits for the token after ids: gpt2 on the whole text, no cache."""
    hparams, params = load(tiny.models_dir)
    return gpt2(np.array(ids), **params, n_head=hparams["n_head"])[-1]


def test_typing_updates_the_strip_and_the_distribution_follows_the_sliders(served, browser,
                                                                          tiny, vocab_dir):
    from picogpt.files.openai import read_encoder

    encoder = read_encoder(vocab_dir)
    page = open_page(browser, served)
    assert strip_ids(page) == encoder.encode(PROMPT)
    page.fill("#prompt", "The cat sat on the 语言 mat")
    wait_quiet(page)
    ids = encoder.encode("The cat sat on the 语言 mat")
    assert strip_ids(page) == ids
    assert page.locator("#count").inner_text().startswith(f"{len(ids)} tokens")
    assert "语" in page.locator("#tokens").inner_text()  # the characters over their byte pieces
    logits = next_logits(tiny, ids)
    for temperature, top_k in ((1.0, 0), (0.5, 20), (1.7, 20)):
        set_knob(page, "top_k", top_k)
        set_knob(page, "temperature", temperature)
        wait_quiet(page)
        shown_ids = [int(x) for x in page.evaluate(
            "() => [...document.querySelectorAll('#cands .p.after')].map(e => e.dataset.id)")]
        after = [float(x) for x in page.locator("#cands .p.after").all_inner_texts()]
        sampling = Sampling(top_k=top_k or None, temperature=temperature)
        seen = np.zeros(len(logits), bool)
        seen[ids] = True
        expected = softmax(sampling.filter(logits, seen).astype(np.float64))[shown_ids]
        np.testing.assert_allclose(after, expected, atol=6e-5)
        before = [float(x) for x in page.locator("#cands .p.before").all_inner_texts()]
        np.testing.assert_allclose(before, softmax(logits.astype(np.float64))[shown_ids],
                                   atol=6e-5)
    assert page.errors == []


def test_a_click_a_seeded_draw_and_generate_extend_the_text_as_the_library_does(served,
                                                                                 browser, tiny,
                                                                                 vocab_dir):
    from picogpt.files.openai import read_encoder

    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny.models_dir)
    page = open_page(browser, served)
    ids = encoder.encode(PROMPT)
    third = int(page.locator("#cands button.name").nth(2).get_attribute("data-id"))
    page.locator("#cands button.name").nth(2).click()
    wait_quiet(page)
    assert strip_ids(page) == [*ids, third]  # exactly the token clicked
    page.click("#back")
    wait_quiet(page)
    assert strip_ids(page) == ids and page.input_value("#prompt") == PROMPT
    set_knob(page, "top_k", 10)
    set_knob(page, "temperature", 0.8)
    page.fill("#seed", "7")
    page.click("#draw")
    wait_quiet(page)
    first = next(generate(ids, params, hparams["n_head"], 1, top_k=10, temperature=0.8, seed=7))
    assert strip_ids(page) == [*ids, first]  # generate's first token with that seed
    page.click("#back")
    page.check("#mode-greedy")  # the page samples until greedy is chosen
    wait_quiet(page)
    page.fill("#n_generate", "10")
    page.click("#generate")
    wait_quiet(page)
    page.wait_for_function("!document.getElementById('status').textContent")
    cli = picogpt(PROMPT, "--n_tokens", "10", "--models_dir", str(tiny.models_dir))
    assert page.input_value("#prompt") == PROMPT + cli.stdout.removesuffix("\n")
    assert page.errors == []


def test_the_heatmap_is_traces_pattern_and_the_page_stays_on_127_0_0_1(served, browser, tiny,
                                                                       vocab_dir):
    from picogpt.files.openai import read_encoder

    hparams, params = load(tiny.models_dir)
    ids = read_encoder(vocab_dir).encode(PROMPT)
    _, values = trace(ids, params, hparams["n_head"])
    page = open_page(browser, served)
    page.wait_for_function("document.querySelectorAll('#attn-x .label').length > 0")
    page.select_option("#layer", "1")
    page.select_option("#head", "2")
    page.locator("#attn").scroll_into_view_if_needed()
    box, n = page.locator("#attn").bounding_box(), len(ids)
    for q, k in [(0, 0), (3, 1), (n - 1, 2), (n - 1, n - 1)]:
        page.mouse.move(0, 0)
        page.mouse.move(box["x"] + (k + 0.5) * box["width"] / n,
                        box["y"] + (q + 0.5) * box["height"] / n)
        tip = page.locator("#attn-tip").inner_text()
        assert tip.startswith(f"layer 1 head 2: query {q} ")
        expected = values["blocks.1.attn.pattern"][2, q, k]
        assert float(tip.rsplit(" ", 1)[1]) == pytest.approx(expected, rel=1e-6, abs=1e-9)
    origin = f"http://{served.host}/"
    assert page.requests and all(url.startswith(origin) for url in page.requests)
    assert page.errors == []


def test_a_chinese_browser_gets_chinese_headings(served, browser):
    page = open_page(browser, served, locale="zh-CN")
    headings = page.locator("h2").all_inner_texts()
    assert headings[:2] == ["提示词", "下一个词元"] and "注意力" in headings
    assert page.title() == "picogpt: 探索 随机权重的 2 层模型（不是 GPT-2）"  # the tiny checkpoint


def one_step_positions(served, monkeypatch) -> list[int]:
    """How many positions each pass through the model holds, while the page takes a step."""
    from picogpt import kvcache

    passes, real = [], kvcache.extend
    monkeypatch.setattr(kvcache, "extend", lambda ids, *args: passes.append(
        np.shape(ids)[-1]) or real(ids, *args))
    return passes


def test_a_step_is_one_position_through_the_cache_and_an_edit_reruns_only_what_changed(
        served, monkeypatch):
    session = served.session
    session.set_text(PROMPT)
    passes = one_step_positions(served, monkeypatch)
    session.append(int(session.next(Sampling())["greedy"]))
    assert passes == [1]  # one new position, not the whole text again
    passes.clear()
    session.set_text(PROMPT + " computers")  # typing at the end: only the new tokens run
    assert sum(passes) <= 2
    passes.clear()
    session.next(Sampling(top_k=5, temperature=0.5))  # a slider: no model call at all
    assert passes == []


def request(server, method="POST", path="/api/next", body=b"{}", headers=None) -> tuple:
    """A raw request to the server, with the headers a page of its own would send unless told
    otherwise: (status, decoded JSON or text)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
    sent = {"Host": server.host, "X-Picogpt-Token": server.secret,
            "Content-Type": "application/json", **(headers or {})}
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in sent.items():
        if value is not None:
            connection.putheader(name, value)
    if "Content-Length" not in sent:
        connection.putheader("Content-Length", str(len(body)))
    connection.endheaders()
    connection.send(body)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, data.decode(errors="replace")


def files_digest(folder) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize("case", ["host", "origin", "no_secret", "wrong_secret", "big_body",
                                  "long_prompt", "bad_settings", "file_path", "file_post",
                                  "not_json"])
def test_refusals_leave_the_server_answering_and_the_model_untouched(served, tiny, case):
    before = files_digest(tiny.models_dir)
    secret = served.secret
    cases = {
        "host": dict(headers={"Host": "evil.example:80"}, status=403, says="address it printed"),
        "origin": dict(headers={"Origin": "http://evil.example"}, status=403,
                       says="other sites' pages"),
        "no_secret": dict(headers={"X-Picogpt-Token": None}, status=403, says="secret"),
        "wrong_secret": dict(headers={"X-Picogpt-Token": secret[:-1] + "x"}, status=403,
                             says="secret"),
        "big_body": dict(body=b"{" + b" " * (70 * 1024) + b"}", status=413, says="64 KiB"),
        "long_prompt": dict(path="/api/text", body=json.dumps({"prompt": "hello " * 150}).encode(),
                            status=400, says="passes the model's limit of 128 tokens"),
        "bad_settings": dict(body=b'{"temperature": -1, "top_k": 0}', status=400,
                             says="top_k=0 is not a whole number from 1 to 50257"),
        "file_path": dict(method="GET", path=f"/../../etc/passwd?token={secret}", body=b"",
                          status=404, says="nothing here but the page"),
        "file_post": dict(path="/api/../model.ckpt.index", status=404, says="no such call"),
        "not_json": dict(body=b"[1, 2", status=400, says="not a JSON object"),
    }[case]
    status, answer = request(served, cases.get("method", "POST"), cases.get("path", "/api/next"),
                             cases.get("body", b"{}"), cases.get("headers"))
    assert status == cases["status"] and cases["says"] in answer["error"], answer
    assert "root:" not in json.dumps(answer)
    ok, value = request(served, path="/api/text", body=json.dumps({"prompt": "hi"}).encode())
    assert ok == 200 and value["n_tokens"] == 1  # still answering
    assert files_digest(tiny.models_dir) == before


def test_a_stale_request_is_answered_as_superseded_and_each_tab_counts_its_own(served):
    """Within one page a request older than one already seen is stale; a second tab, whose
    count starts again at 1, is answered (it was refused until its count caught up)."""
    request(served, path="/api/next", body=b'{"seq": 5, "page": "a"}')
    status, answer = request(served, path="/api/next", body=b'{"seq": 3, "page": "a"}')
    assert status == 204 and answer == ""  # superseded: nothing to show, no red 409
    status, answer = request(served, path="/api/next", body=b'{"seq": 1, "page": "b"}')
    assert status == 200 and answer["next"]["candidates"]
    status, answer = request(served, path="/api/next", body=b'{"seq": 1, "page": ["a"]}')
    assert status == 400 and "page must be a short text" in answer["error"]


def test_the_command_prints_the_address_and_ctrl_c_stops_it_with_130(tiny):
    process = subprocess.Popen([str(PICOGPT), "hello", "--explore", "--no_browser",
                                "--models_dir", str(tiny.models_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    url = process.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:") and "/?token=" in url
    port = int(url.split(":")[2].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", url.split(str(port), 1)[1])
    assert connection.getresponse().status == 200
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "picogpt: the explore server stopped."
    assert "Traceback" not in stderr


@pytest.mark.parametrize("args, message", [
    (["--explore", "--port", "70000"], "port=70000 is not a whole number from 1 to 65535"),
    (["--explore", "--top_k", "5"], "--top_k does not work with --explore, whose page has a "
                                    "control for it; drop --top_k."),
    (["--port", "8000"], "--port works with --explore; add --explore to explore the model."),
    (["--explore", "--score"], "--score and --explore are two different commands"),
])
def test_explore_flags_are_checked_like_every_flag(tiny, args, message):
    done = picogpt("hi", *args, "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, message)


def test_a_port_that_is_taken_is_one_line(tiny, served):
    done = picogpt("hi", "--explore", "--no_browser", "--port", str(served.server_port),
                   "--models_dir", str(tiny.models_dir))
    assert_one_line_error(done, f"cannot serve on 127.0.0.1:{served.server_port}")
    assert request(served, path="/api/next")[0] == 200  # the server on that port goes on


def slow_lens(monkeypatch, started: threading.Event, release: threading.Event):
    """Hold each logit-lens row of the inside views until release is set (the tiny model's
    rows take microseconds; 124M's ~70 ms each, a second in all for 100 tokens): the views are
    then still computing for as long as a test needs. started is set when the first row
    begins. A row waits at most a minute, so a server that never answers cannot hang the test."""
    import picogpt.web.views

    rows = picogpt.web.views.lens_rows

    def slow(*args, **kwargs):
        started.set()
        for row in rows(*args, **kwargs):
            release.wait(60)
            yield row

    monkeypatch.setattr(picogpt.web.views, "lens_rows", slow)


def test_a_slider_during_the_inside_views_is_answered_first_and_an_edit_stops_them(
        served, monkeypatch):
    """The inside views are the one long computation: a slider move or an edit that arrives
    meanwhile is answered while they compute, not after them; an edit makes them stale, so they
    stop and are answered as superseded, and the edit is answered. The lens rows wait for the
    test's word, so the order is the server's, not the machine's speed."""
    answers = {}

    def ask(name: str, path: str, body: bytes, done: threading.Event) -> threading.Thread:
        def run():
            answers[name] = request(served, path=path, body=body)
            done.set()
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    for seq, (name, path, body) in enumerate(
            [("next", "/api/next", b'{"temperature": 0.5}'),
             ("edit", "/api/text", json.dumps({"prompt": "Alan"}).encode())], start=1):
        started, release, inside_done, done = (threading.Event() for _ in range(4))
        slow_lens(monkeypatch, started, release)
        inside = ask("inside", "/api/inside", json.dumps({"seq": seq}).encode(), inside_done)
        try:
            assert started.wait(30)  # the views are in the lens, held there
            other = ask(name, path, body, done)
            # answered while the lens is still held: the views let it go first
            assert done.wait(30), f"{name} waited for the inside views"
            assert not inside_done.is_set()
        finally:
            release.set()
        inside.join(30)
        other.join(30)
        assert inside_done.is_set()
        if name == "next":
            assert answers["next"][0] == 200 and answers["inside"][0] == 200  # the views went on
            assert len(answers["inside"][1]["lens"]["probs"]) == 3  # embeddings and 2 blocks
        else:
            assert answers["edit"][0] == 200 and answers["edit"][1]["text"] == "Alan"
            assert answers["inside"] == (204, "")  # stale after the edit: superseded


def wordpiece_session(folder, files: dict, n_ctx: int = 64) -> Session:
    """A session on a random-weight model whose vocabulary is a WordPiece folder's files, read
    as a model folder's are."""
    from picogpt.files.vocab_files import read_wordpiece
    from picogpt.train import init_params

    folder.mkdir(exist_ok=True)
    for name, content in files.items():
        (folder / name).write_text(content if isinstance(content, str) else json.dumps(content),
                                   encoding="utf-8")
    encoder = read_wordpiece(folder, "write the folder again")
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": n_ctx, "n_embd": 32, "n_head": 2,
               "n_layer": 2}
    params = init_params(hparams, np.random.default_rng(0))
    model = {"name": folder.name, "kind": "trained", "where": str(folder),
             **{key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}}
    return Session(encoder, hparams, params, model)


def induction_session(tmp_path) -> Session:
    """The induction task's vocabulary (t0 .. t62, then [CLS]), as its folder holds it."""
    from picogpt.tasks.induction import vocab_files

    return wordpiece_session(tmp_path / "ind", vocab_files(64))


def uer_session(tmp_path) -> Session:
    """A uer model's vocabulary (bert-base-chinese's layout), as its folder holds it."""
    from scripts.fixtures import bert_vocab

    vocab = "".join(f"{token}\n" for token in bert_vocab.chinese_vocab())
    return wordpiece_session(tmp_path / "uer", {
        "vocab.txt": vocab, "tokenizer_config.json": {"do_lower_case": False},
        "special_tokens_map.json": {"cls_token": "[CLS]", "sep_token": "[SEP]",
                                    "unk_token": "[UNK]"}})


def test_a_wordpiece_models_text_round_trips_through_the_box(tmp_path):
    """The box shows the text as typed (no [CLS], its spaces kept), typing after it appends to
    it, a step adds the token as a reader writes it, and [CLS] is never added twice."""
    session = induction_session(tmp_path)
    cls = session.encoder.start
    state = session.set_text("t5 t17 t3")
    assert session.ids == [cls, 5, 17, 3] and state["text"] == "t5 t17 t3"
    state = session.set_typed(session.prompt_ids(state["text"] + " t4"))  # a key press
    assert session.ids == [cls, 5, 17, 3, 4] and state["text"] == "t5 t17 t3 t4"
    state = session.append(9)
    assert state["text"] == " ".join(f"t{i}" for i in (5, 17, 3, 4, 9))
    state = session.set_typed(session.prompt_ids(state["text"] + " t1"))
    assert session.ids == [cls, 5, 17, 3, 4, 9, 1] and state["text"].endswith("t9 t1")
    assert session.set_typed(session.prompt_ids(""))["text"] == "" and session.ids == [cls]

    session = uer_session(tmp_path)
    cls, vocab = session.encoder.start, session.encoder.ids
    for text in ("hello world", "床前明月光，hello", "good day, london"):
        state = session.set_text(text)
        assert state["text"] == text and session.ids.count(cls) == 1
        state = session.set_typed(session.prompt_ids(state["text"]))  # typing: the same text
        assert state["text"] == text and session.ids.count(cls) == 1
    state = session.append(vocab["paris"])
    assert state["text"] == "good day, london paris"
    state = session.append(vocab["##ing"])
    assert state["text"] == "good day, london parising"
    state = session.append(vocab["。"])
    assert state["text"] == "good day, london parising。"


def test_text_after_a_stray_byte_stays_in_the_box(served):
    """After 0xE1, a lead byte that the token after it does not continue, the text after it is
    text: in the box, and kept when typing sets the text from the box (only the byte, which no
    text can hold, goes). The reference is Python's own UTF-8 decoder."""
    session, encoder = served.session, served.session.encoder
    e1 = next(i for i in range(encoder.n_vocab) if encoder.decode_bytes([i]) == b"\xe1")
    session.set_text("Hello")
    state = session.append(e1)
    assert state["text"] == "Hello" and state["pending"] == "e1"  # it may begin a character
    for token in encoder.encode(" world"):
        state = session.append(token)
    data = encoder.decode_bytes(session.ids)
    assert data == b"Hello\xe1 world"
    assert state["text"] == data.decode("utf-8", errors="ignore") == "Hello world"
    assert state["stray"] == "e1" and state["pending"] == ""
    state = session.set_typed(session.prompt_ids(state["text"] + "!"))
    assert session.ids == encoder.encode("Hello world!") and state["text"] == "Hello world!"
    state = session.set_text("语")  # a character that ends the text whole: nothing held back
    session.append(encoder.encode("言")[0])
    assert session.state()["pending"] == encoder.decode_bytes([session.ids[-1]]).hex(" ")


def test_gpt2s_start_token_is_not_in_the_box_and_typing_keeps_it(served):
    """An empty prompt is <|endoftext|> alone, as GPT-2 saw a document begin: the box is empty
    (not the token's name as text), and what is typed into it comes after the token."""
    session, encoder = served.session, served.session.encoder
    state = session.set_text("")
    assert session.ids == [encoder.start] and state["text"] == ""
    state = session.set_typed(session.prompt_ids("Hello"))
    assert session.ids == [encoder.start, *encoder.encode("Hello")] and state["text"] == "Hello"
    assert session.set_typed(session.prompt_ids(""))["text"] == "" and session.ids == [50256]


def test_a_form_masks_the_next_tokens_and_a_generation_keeps_it(tmp_path):
    """On a uer-like WordPiece model (random weights): with an acrostic and a line length, only
    the tokens the form allows keep any probability after the filters, greedy takes the
    acrostic's character, a generation writes the whole poem and stops there, and then only
    the end token may come. A text that breaks the form, or a form the vocabulary cannot
    write, is one line."""
    from picogpt.errors import PicoGPTError

    session = uer_session(tmp_path)
    encoder = session.encoder
    session.set_text("")
    form = session.form("春夏", 5)
    step = session.next(Sampling(top_k=8), form)
    kept = [c["id"] for c in step["candidates"] if c["after"] > 0]
    assert kept == [encoder.encode("春")[0]] and step["greedy"] == kept[0]
    assert session.next(Sampling(top_k=8))["greedy"] != kept[0]  # without the form: another
    refused = next(i for i in range(session.n_vocab) if i != kept[0])
    with pytest.raises(PicoGPTError, match="does not keep the form here"):
        session.append(refused, form)  # refused before the text changes
    assert session.ids == [encoder.start]
    list(session.generate(Sampling(top_k=8), 1, 40, form=form))
    poem = "".join(encoder.decode(session.ids[1:]).split())
    assert re.fullmatch(f"春{HAN}{{4}}，夏{HAN}{{4}}。", poem), poem  # and it stopped there
    done = session.next(Sampling(), form)  # complete: the mask lifts
    assert done["complete"] and done["greedy"] == session.next(Sampling())["greedy"]
    session.append(encoder.encode("，")[0], form)  # free after the poem, and it stays complete
    list(session.generate(Sampling(top_k=8), 2, 5, form=form))
    assert session.next(Sampling(), form)["complete"] and len(session.ids) >= 1 + 12 + 1
    session.set_text("春天来了吗，")  # five characters, then the mark: it keeps the form
    assert session.next(Sampling(), form)["greedy"] == encoder.encode("夏")[0]
    session.set_text("春天来了啊啊，")  # six: the sixth character breaks it
    with pytest.raises(PicoGPTError, match="its token 6, '啊', breaks it"):
        session.next(Sampling(), form)
    with pytest.raises(PicoGPTError, match="line='5' is not a whole number"):
        session.form(None, "5")
    with pytest.raises(PicoGPTError, match="no Chinese character token for A"):
        session.form("A", None)
    for acrostic, line, says in [(0, None, "acrostic=0 is not a non-empty text"),
                                 ([], 5, "acrostic=[] is not"), (None, 10**6, "from 1 to 64"),
                                 ("春" * 33, None, "at most 32 lines")]:
        with pytest.raises(PicoGPTError, match=re.escape(says)):
            session.form(acrostic, line)


def test_the_server_takes_a_form_with_each_call_and_refuses_one_gpt2_cannot_write(served,
                                                                                  tmp_path):
    """/api/generate with acrostic and line streams a poem of that form; /api/next says the
    form's refusals in one line, and GPT-2's byte-level vocabulary refuses any form."""
    server = ExploreServer(uer_session(tmp_path), 0, "")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        body = {"n_tokens": 40, "seed": 3, "top_k": 8, "acrostic": "山水", "line": 7}
        status, _ = request(server, path="/api/generate", body=json.dumps(body).encode())
        assert status == 200
        poem = "".join(server.session.encoder.decode(server.session.ids[1:]).split())
        assert re.fullmatch(f"山{HAN}{{6}}，水{HAN}{{6}}。", poem), poem
        status, value = request(server, body=json.dumps({"line": 5}).encode())
        assert status == 400 and "does not keep the form" in value["error"]
        version = len(server.writers)
        status, value = request(server, path="/api/text", body=json.dumps(  # typed: it stands
            {"prompt": "春天来了啊啊，", "line": 5, "page": "p"}).encode())
        assert status == 200 and "does not keep the form" in value["refused"]
        assert value["text"] == "春天来了啊啊，" and value["version"] == version + 1
        status, value = request(server, body=b'{"acrostic": "\\ud800", "line": 5}')
        assert status == 400 and "half of a UTF-16 pair" in value["error"], value
    finally:
        server.shutdown()
        server.server_close()
    status, value = request(served, body=json.dumps({"line": 5}).encode())
    assert status == 400 and "GPT-2's byte-level BPE" in value["error"], value


def test_the_server_writes_rhyming_xia_ju_and_refuses_a_rhyme_that_is_not_a_switch(tmp_path):
    """/api/generate with rhyme (the page's path: gate.form, the session's form) writes a poem
    whose every 下句 ends on the first's rhyme (the test's own 十三辙), for several seeds; a
    rhyme that is not true or false is refused in one line."""
    from test_constraints import rhyme_of, xia_ju

    server = ExploreServer(uer_session(tmp_path), 0, "")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        for seed in range(3):
            request(server, path="/api/text", body=json.dumps({"prompt": "", "page": "p"}).encode())
            body = {"n_tokens": 60, "seed": seed, "top_k": 8, "acrostic": "春夏秋冬山水",
                    "line": 5, "rhyme": True}
            status, _ = request(server, path="/api/generate", body=json.dumps(body).encode())
            assert status == 200
            poem = "".join(server.session.encoder.decode(server.session.ids[1:]).split())
            rhymes = [rhyme_of(line[-1]) for line in xia_ju(poem)]
            assert len(rhymes) == 3 and None not in rhymes and len(set(rhymes)) == 1, poem
        status, value = request(server, body=json.dumps({"line": 5, "rhyme": "yes"}).encode())
        assert status == 400 and "rhyme='yes' is not true or false" in value["error"], value
    finally:
        server.shutdown()
        server.server_close()


def test_gpt2s_page_has_no_form_row(served, browser):
    page = open_page(browser, served)
    assert page.locator("#verse").count() == 1 and not page.locator("#verse").is_visible()
    assert page.errors == []


def test_an_acrostic_the_vocabulary_cannot_write_is_named_as_the_page_names_it(tmp_path):
    """The page's refusal of an acrostic names its own field (acrostic, 藏头字) in the page's
    language, never the command line's flag --acrostic."""
    server = ExploreServer(uer_session(tmp_path), 0, "")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        body = json.dumps({"acrostic": "𠀀龘", "line": 5}).encode()
        said = {}
        for language in ("en", "zh-CN,zh;q=0.9"):
            status, value = request(server, body=body, headers={"Accept-Language": language})
            assert status == 400, value
            said[language] = value["error"]
    finally:
        server.shutdown()
        server.server_close()
    assert said["en"].startswith("the acrostic 𠀀龘: ") and "𠀀" in said["en"], said
    assert said["zh-CN,zh;q=0.9"].startswith("藏头字 𠀀龘："), said
    assert not any("--acrostic" in text for text in said.values()), said
