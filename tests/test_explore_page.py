"""The --explore page as a learner meets it, in Chromium: in Chinese and in English, on a
390 px phone and a 1,920 px desktop. Every control changes what it names, the page fits its
width, the session's text is the one truth every tab shows, and the inside views say when they
are computing. The server's own refusals are test_explore.py's."""

import json
import re
import signal
import subprocess
import threading

import numpy as np
import pytest
import test_explore
from conftest import wait_until
from test_explore import PROMPT, next_logits, set_knob, slow_lens, strip_ids
from test_model import load
from test_openai import PICOGPT
from test_openai_faults import default_sigint

from picogpt import generate
from picogpt.files.openai import read_encoder
from picogpt.model import softmax
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session

served = test_explore.served  # the tiny model's explore server
LIMIT = 120  # seconds a wait may take: only a hang reaches it, never a slow machine
# Each item in both languages and at both widths; the layout in all four pairs
SCREENS = [("en-US", 390), ("zh-CN", 1920)]
ALL_SCREENS = [*SCREENS, ("zh-CN", 390), ("en-US", 1920)]


def named(screens) -> list[str]:
    return [f"{locale}-{width}px" for locale, width in screens]


@pytest.fixture(params=SCREENS, ids=named(SCREENS))
def screen(request) -> tuple[str, int]:
    return request.param


@pytest.fixture
def encoder(vocab_dir):
    return read_encoder(vocab_dir)


def open_page(browser, url: str, screen: tuple[str, int]):
    """The page in a fresh context: a phone (touch, the viewport meta obeyed) below 500 px."""
    locale, width = screen
    phone = width < 500
    context = browser.new_context(locale=locale, viewport={"width": width, "height": 900},
                                  is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(LIMIT * 1000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
    return page


def wait_strip(page, ids: list[int]) -> None:
    """Until the token strip shows exactly ids and no request is on its way."""
    page.wait_for_function("""ids => window.pending === 0 && JSON.stringify(
        [...document.querySelectorAll('#tokens .tok .id')].map(e => Number(e.textContent)))
        === JSON.stringify(ids)""", arg=ids)


def wait_answered(page) -> None:
    """Until the requests a slider sent (at once, in its input event) are answered."""
    page.wait_for_function("window.pending === 0")


def entropy(page) -> float:
    return float(page.locator("#entropy").inner_text().replace("：", " ").split()[-2])


def test_temperature_reshapes_the_after_bars_and_the_entropy_from_the_first_state(
        served, browser, screen, tiny, encoder):
    """Sampling is on when the page opens, over the whole distribution: the temperature alone
    changes the after bars, the entropy and the draws; greedy is a switch that says what it
    turns off, and marks the token it takes."""
    page = open_page(browser, served.url, screen)
    hparams, params = load(tiny.models_dir)
    ids = encoder.encode(PROMPT)
    logits = next_logits(tiny, ids).astype(np.float64)
    seen = {}
    for temperature in (0.5, 1.0, 1.5):
        set_knob(page, "temperature", temperature)
        wait_answered(page)
        shown = [int(x) for x in page.evaluate(
            "() => [...document.querySelectorAll('#cands .p.after')].map(e => e.dataset.id)")]
        after = [float(x) for x in page.locator("#cands .p.after").all_inner_texts()]
        expected = softmax(logits / temperature)
        np.testing.assert_allclose(after, expected[shown], atol=6e-5)
        assert entropy(page) == pytest.approx(-np.sum(expected * np.log(expected)), abs=2e-3)
        seen[temperature] = entropy(page)
        page.fill("#seed", "3")
        page.click("#draw")
        drawn = next(generate(ids, params, hparams["n_head"], 1, top_p=1.0,
                              temperature=temperature, seed=3))
        wait_strip(page, [*ids, drawn])  # generate's first token with that seed
        page.click("#back")
        wait_strip(page, ids)
    assert seen[0.5] < seen[1.0] < seen[1.5]
    page.check("#mode-greedy")
    wait_answered(page)
    note = page.locator("#mode-note").inner_text()
    assert ("greedy" in note and "no effect" in note) or ("贪心" in note and "不起作用" in note)
    assert page.locator("#temperature").is_disabled() and page.locator("#seed").is_disabled()
    greedy = int(np.argmax(logits))
    assert page.locator("#cands .name.chosen").get_attribute("data-id") == str(greedy)
    assert page.errors == []


@pytest.mark.parametrize("layout", ALL_SCREENS, ids=named(ALL_SCREENS))
def test_the_page_fits_its_width_with_each_candidates_bars_side_by_side(served, browser,
                                                                        layout):
    locale, width = screen = layout
    page = open_page(browser, served.url, screen)
    page.wait_for_function("document.querySelectorAll('#attn-x .label').length > 0")
    assert page.evaluate("innerWidth") == width  # a phone lays the page out at its own width
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
    rows = page.evaluate("""() => [...document.querySelectorAll('#cands .p.after')].map(p => {
        const a = p.previousElementSibling, pb = a.previousElementSibling;
        const b = pb.previousElementSibling, name = b.previousElementSibling;
        return [name, b, pb, a, p].map(e => e.getBoundingClientRect().toJSON()); })""")
    assert len(rows) >= 10
    for name, before, p_before, after, p_after in rows:
        assert abs(before["top"] - after["top"]) < 3  # one row: before, then after
        assert before["right"] <= p_before["left"] <= after["left"] <= p_after["left"]
        assert before["width"] >= 40 and after["width"] >= 40
        assert p_after["right"] <= width and name["right"] <= width
    for slider in ("temperature", "top_k", "top_p", "penalty"):
        box = page.locator(f"#{slider}-value").bounding_box()
        assert box["width"] > 0 and box["x"] + box["width"] <= width
    assert page.errors == []


def test_a_new_tab_shows_the_sessions_text_and_never_silently_changes_anothers(
        served, browser, screen, encoder):
    first = open_page(browser, served.url, screen)
    first.fill("#prompt", "The cat sat")
    wait_strip(first, encoder.encode("The cat sat"))
    second = open_page(browser, served.url, screen)  # a second tab: the text, not the CLI's
    assert second.input_value("#prompt") == "The cat sat"
    assert strip_ids(second) == encoder.encode("The cat sat")
    second.reload()
    second.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
    assert second.input_value("#prompt") == "The cat sat"
    second.fill("#prompt", "Other words")
    wait_strip(second, encoder.encode("Other words"))
    first.locator("#cands button.name").first.click()  # on a text it no longer shows
    wait_strip(first, encoder.encode("Other words"))  # it shows the session's text instead
    assert first.input_value("#prompt") == "Other words"
    assert first.locator("#status").inner_text().strip()  # and says why
    assert served.session.ids == encoder.encode("Other words")  # the click did not land
    assert first.errors == [] and second.errors == []


def held_steps(monkeypatch, free: int) -> threading.Event:
    """Hold the server's generation after `free` steps until the event this returns is set (the
    tiny model makes a token in a millisecond): a generation is then still running for as long
    as the test needs, on any machine. A step waits at most LIMIT seconds."""
    import picogpt.kvcache  # the engine the tiny GPT-2's session runs on

    step, release, taken = picogpt.kvcache.decode_step, threading.Event(), []

    def held(*args):
        taken.append(1)
        if len(taken) > free:
            release.wait(LIMIT)
        return step(*args)

    monkeypatch.setattr(picogpt.kvcache, "decode_step", held)
    return release


def test_generation_disables_what_would_desync_and_stop_ends_it(served, browser, screen,
                                                               monkeypatch, encoder):
    page = open_page(browser, served.url, screen)
    release = held_steps(monkeypatch, 2)
    n_prompt = len(encoder.encode(PROMPT))
    page.fill("#n_generate", "60")
    page.click("#generate")
    page.wait_for_function(f"document.querySelectorAll('#tokens .tok').length >= {n_prompt + 2}")
    for control in ("#prompt", "#generate", "#back", "#greedy", "#draw", "#temperature",
                    "#cands button.name >> nth=0"):
        assert not page.locator(control).is_editable() if control == "#prompt" else \
            page.locator(control).is_disabled(), control
    with page.expect_response(lambda response: "/api/stop" in response.url, timeout=LIMIT * 1000):
        page.click("#stop")  # answered once the server has marked the generation as stopped
    release.set()  # the step under way ends; the stop keeps the next one from starting
    page.wait_for_function("!document.getElementById('generate').disabled")
    wait_answered(page)
    ids = served.session.ids
    assert n_prompt + 2 <= len(ids) < n_prompt + 60
    assert strip_ids(page) == ids and page.input_value("#prompt") == encoder.decode(ids)
    assert page.locator("#prompt").is_editable() and page.locator("#stop").is_disabled()
    assert page.errors == []


def test_a_double_click_on_generate_gives_n_tokens(served, browser, screen, monkeypatch,
                                                   encoder):
    page = open_page(browser, served.url, screen)
    release = held_steps(monkeypatch, 1)
    n_prompt = len(encoder.encode(PROMPT))
    page.fill("#n_generate", "5")
    page.click("#generate")  # a slow double click: the second lands once a token is out
    page.wait_for_function(f"document.querySelectorAll('#tokens .tok').length > {n_prompt}")
    page.click("#generate", force=True)  # at once, even on a button that says it is disabled
    release.set()
    wait_until(lambda: len(served.session.ids) >= n_prompt + 5 and not served.lock.locked()
               and strip_ids(page) == served.session.ids
               and page.evaluate("window.pending") == 0)
    assert len(served.session.ids) == n_prompt + 5
    assert page.errors == []


def test_an_error_stays_until_the_next_action_of_its_kind(served, browser, screen, encoder):
    page = open_page(browser, served.url, screen)
    page.fill("#prompt", "hello " * 200)  # past the tiny model's 128 positions
    page.wait_for_function("document.getElementById('status').textContent.includes('128')")
    set_knob(page, "temperature", 0.5)  # another kind of action, answered
    wait_answered(page)
    assert "128" in page.locator("#status").inner_text()
    page.fill("#prompt", "hello")
    wait_strip(page, encoder.encode("hello"))
    assert "128" not in page.locator("#status").inner_text()
    assert page.errors == []


def test_a_lost_server_is_said_in_the_pages_language(tiny, browser, screen):
    process = subprocess.Popen([str(PICOGPT), "hello", "--explore", "--no_browser",
                                "--models_dir", str(tiny.models_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        page = open_page(browser, process.stdout.readline().strip(), screen)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=LIMIT)
    page.click("#greedy")
    said = "服务器" if screen[0] == "zh-CN" else "server"
    page.wait_for_function(f"document.getElementById('status').textContent.includes('{said}')")
    assert "picogpt --explore" in page.locator("#status").inner_text()


def test_stepping_back_through_chinese_keeps_the_box_whole(served, browser, screen, encoder):
    page = open_page(browser, served.url, screen)
    text = "语言"  # five byte pieces: e8af, ad (语) and e8, a8, 80 (言)
    ids = encoder.encode(text)
    page.fill("#prompt", text)
    wait_strip(page, ids)
    for n in range(len(ids) - 1, 0, -1):
        page.click("#back")
        wait_strip(page, ids[:n])
        whole = "语" if n >= 2 else ""
        assert page.input_value("#prompt") == whole  # no "�": the pieces past it wait outside
        pending = page.locator("#pending").inner_text()
        held = b"".join(encoder.decode_bytes([i]) for i in ids[len(encoder.encode(whole)):n])
        assert held.hex(" ") in pending if held else not pending.strip()
    page.locator("#prompt").press("End")
    page.keyboard.type("x")  # typing sets the text from the box: the held piece is dropped
    wait_strip(page, encoder.encode("x"))
    assert page.locator("#status").inner_text().strip()  # and the page says so
    assert page.errors == []


def test_the_inside_views_say_they_are_computing(served, browser, screen, monkeypatch,
                                                 encoder):
    page = open_page(browser, served.url, screen)
    page.wait_for_function("document.querySelectorAll('#attn-x .label').length > 0")
    started, release = threading.Event(), threading.Event()
    slow_lens(monkeypatch, started, release)  # the views compute until the test says
    page.fill("#prompt", "The cat sat")
    assert started.wait(LIMIT)
    page.wait_for_selector("#inside-busy", state="visible")
    assert float(page.evaluate("getComputedStyle(document.getElementById('heads')).opacity")) < 1
    release.set()
    page.wait_for_selector("#inside-busy", state="hidden")
    assert page.evaluate("getComputedStyle(document.getElementById('heads')).opacity") == "1"
    assert len(page.locator("#attn-x .label").all()) == len(encoder.encode("The cat sat"))
    assert page.errors == []


def test_one_token_texts_the_head_cells_and_the_attention_labels(served, browser, screen,
                                                                 encoder):
    locale, width = screen
    page = open_page(browser, served.url, screen)
    page.fill("#prompt", "Hello")
    wait_strip(page, encoder.encode("Hello"))
    page.wait_for_function("document.querySelectorAll('#attn-x .label').length === 1")
    count = page.locator("#count").inner_text()
    assert count.startswith("1 个词元") if locale == "zh-CN" else count.startswith("1 token ")
    previous = page.locator('#heads [data-kind="previous"]').inner_text()
    assert "induction" not in previous and "归纳" not in previous  # not the induction message

    text = "语言 is a word"
    page.fill("#prompt", text)
    ids = encoder.encode(text)
    wait_strip(page, ids)
    page.wait_for_function(f"document.querySelectorAll('#attn-x .label').length === {len(ids)}")
    labels = page.locator("#attn-x .label").all_inner_texts()
    assert "语" in labels[0] and "e8 af" in labels[0]  # the character, and this piece's bytes
    clipped = page.evaluate("""() => [...document.querySelectorAll('#attn-x .label')].filter(e => {
        const range = document.createRange();
        range.selectNodeContents(e);
        const text = range.getBoundingClientRect(), box = e.getBoundingClientRect();
        return text.width > box.width + 1 || text.left < box.left - 1; }).length""")
    assert clipped == 0  # each label's text, CJK too, is as wide as its column or narrower

    cell = page.locator('#heads [data-kind="first"] td[data-layer="1"][data-head="2"]')
    cell.focus()
    assert page.evaluate("document.activeElement.dataset.head") == "2"  # reachable by keyboard
    page.keyboard.press("Enter")
    assert page.input_value("#layer") == "1" and page.input_value("#head") == "2"
    assert cell.get_attribute("aria-pressed") == "true"
    marked = page.locator('#heads td[aria-pressed="true"]')
    assert marked.count() == page.locator("#heads table").count() == 2  # one per score grid
    assert page.errors == []


def test_the_page_sends_its_language(served, browser, screen):
    page = open_page(browser, served.url, screen)
    sent = []
    page.on("request", lambda request: sent.append(request.headers.get("accept-language", "")))
    page.locator("#lang button[data-lang='zh']").click()
    set_knob(page, "temperature", 0.7)
    wait_answered(page)
    assert sent and sent[-1].startswith("zh")
    page.locator("#lang button[data-lang='en']").click()
    set_knob(page, "temperature", 0.8)
    wait_answered(page)
    assert sent[-1].startswith("en")
    assert json.dumps(page.errors) == "[]"


def test_the_lens_covers_the_positions_the_attention_keeps(served, browser, monkeypatch, tiny,
                                                           encoder):
    """On each edit the logit lens runs at the positions the attention keeps, not the whole
    text (each position is n_layer + 1 products with the unembedding): its cells are
    logit_lens's at those positions."""
    import picogpt.web.views
    from picogpt.inside import logit_lens, residual_names, trace
    from picogpt.show import visible

    hparams, params = load(tiny.models_dir)
    monkeypatch.setattr(picogpt.web.views, "ATTENTION_BYTES", 2 * 4 * 4 * 10 ** 2)  # keeps 10
    text = "The cat sat on the mat, and the dog sat on the log by the door."
    ids = encoder.encode(text)
    page = open_page(browser, served.url, ("en-US", 1920))
    page.fill("#prompt", text)
    wait_strip(page, ids)
    page.wait_for_function("document.querySelectorAll('#lens tr:nth-child(2) td').length === 10"
                           " && document.getElementById('inside-busy').hidden")
    _, values = trace(ids, params, hparams["n_head"], names=set(residual_names(2)))
    lens_ids, lens_probs = logit_lens(values, params, top=3)
    rows = page.locator("#lens tr")
    for layer in range(3):
        cells = [cell.split("\n") for cell in rows.nth(layer + 1).locator("td").all_inner_texts()]
        kept = range(len(ids) - 10, len(ids))
        assert [text for text, _ in cells] == [
            f"'{visible(encoder.decode_bytes([int(lens_ids[layer, i, 0])]))}'" for i in kept]
        np.testing.assert_allclose([float(p) for _, p in cells], lens_probs[layer, kept, 0],
                                   atol=6e-4)  # shown to 3 decimals, from 4
    assert page.locator("#lens .note").inner_text().startswith(f"(positions {len(ids) - 10} to")
    assert page.errors == []


def test_typing_after_picked_tokens_says_when_it_splits_them_again(served, browser, screen,
                                                                    encoder):
    """'Hello wor' + the picked token 'ld' is not how 'Hello world!' is tokenized: typing the
    '!' re-encodes the text, and the page says that a token before the edit changed."""
    page = open_page(browser, served.url, screen)
    page.fill("#prompt", "Hello wor")
    wait_strip(page, encoder.encode("Hello wor"))
    page.evaluate(f"append({encoder.encode('ld')[0]})")  # as a click on that candidate does
    wait_strip(page, [*encoder.encode("Hello wor"), *encoder.encode("ld")])
    assert page.input_value("#prompt") == "Hello world"
    assert not page.locator("#status").inner_text().strip()
    page.locator("#prompt").press("End")
    page.keyboard.type("!")
    wait_strip(page, encoder.encode("Hello world!"))
    assert page.locator("#status").inner_text().strip()  # not silently
    page.keyboard.type("?")
    wait_strip(page, encoder.encode("Hello world!?"))
    assert not page.locator("#status").inner_text().strip()  # typing that keeps them: quiet
    assert page.errors == []


def status(page) -> str:
    return page.locator("#status").inner_text().strip()


LOST = {"en-US": "not answering", "zh-CN": "没有响应"}  # the page's words for a lost server


def test_an_error_mid_generation_is_said_and_the_page_goes_on(served, browser, screen,
                                                              monkeypatch, encoder):
    """The sampler fails at the third token: the page says so (not that the server stopped),
    shows the two tokens made, and typing goes on."""
    from test_server import picks_failing

    page = open_page(browser, served.url, screen)
    picks_failing(monkeypatch, 2, lambda token: 1 / 0)
    n_prompt = len(encoder.encode(PROMPT))
    page.fill("#n_generate", "5")
    page.click("#generate")
    page.wait_for_function("!document.getElementById('generate').disabled")
    wait_answered(page)
    said = status(page)
    assert "ZeroDivisionError" in said and LOST[screen[0]] not in said, said
    assert strip_ids(page) == served.session.ids and len(served.session.ids) == n_prompt + 2
    assert page.input_value("#prompt") == encoder.decode(served.session.ids)
    page.fill("#prompt", "The cat")
    wait_strip(page, encoder.encode("The cat"))
    assert page.errors == []


@pytest.fixture
def wordpiece_served(tmp_path, request):
    """An explore server on a WordPiece model (random weights): the induction task's
    vocabulary or a uer model's, with a prompt typed as a person would."""
    from test_explore import induction_session, uer_session

    session, prompt = {"induction": (induction_session, "t5 t17 t3"),
                       "uer": (uer_session, "hello world")}[request.param]
    server = ExploreServer(session(tmp_path), 0, prompt)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server, prompt
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("wordpiece_served", ["induction", "uer"], indirect=True)
def test_a_wordpiece_models_text_round_trips_through_the_box(wordpiece_served, browser):
    """The box shows the prompt as typed (no [CLS], its spaces); typing after it appends as
    typed, with one [CLS]; a picked token joins it as the model's own decoding writes it."""
    server, prompt = wordpiece_served
    encoder, cls = server.session.encoder, server.session.encoder.start
    page = open_page(browser, server.url, ("zh-CN", 390))
    assert page.input_value("#prompt") == prompt
    word = {"t5 t17 t3": " t4", "hello world": " day"}[prompt]
    page.locator("#prompt").press("End")
    # one input event: typed a key at a time, "hello world da" may reach the server alone when
    # the machine is busy, and its "d" "##a" then re-split into "day" is a token before the edit
    # that changed, which the page rightly reports
    page.keyboard.insert_text(word)
    wait_strip(page, [cls, *encoder.encode(prompt + word)])
    assert page.input_value("#prompt") == prompt + word and not status(page)
    picked = int(page.locator("#cands button.name").first.get_attribute("data-id"))
    page.locator("#cands button.name").first.click()
    ids = [cls, *encoder.encode(prompt + word), picked]
    wait_strip(page, ids)
    assert page.input_value("#prompt") == encoder.decode(ids[1:])  # as the model writes it
    page.locator("#prompt").press("End")
    page.keyboard.type(word)
    wait_strip(page, [*ids, *encoder.encode(word)])
    assert server.session.ids.count(cls) == 1 and page.errors == []


def test_typing_after_a_stray_byte_keeps_the_text_after_it(served, browser, screen, encoder):
    """0xE1 begins a character that " world" does not continue: " world" is in the box, the
    byte is said to be outside it, and a key typed after it keeps " world" (the byte, which
    no text can hold, goes, and the page says so)."""
    page = open_page(browser, served.url, screen)
    e1 = next(i for i in range(encoder.n_vocab) if encoder.decode_bytes([i]) == b"\xe1")
    page.fill("#prompt", "Hello")
    wait_strip(page, encoder.encode("Hello"))
    ids = encoder.encode("Hello")
    for token in [e1, *encoder.encode(" world")]:
        ids = [*ids, token]
        page.evaluate(f"append({token})")  # as a click on that candidate does
        wait_strip(page, ids)
    assert page.input_value("#prompt") == "Hello world"
    assert "e1" in page.locator("#pending").inner_text()
    page.locator("#prompt").press("End")
    page.keyboard.type("!")
    wait_strip(page, encoder.encode("Hello world!"))
    assert page.input_value("#prompt") == "Hello world!" and "e1" in status(page)
    assert page.errors == []


def test_a_refusal_of_a_step_is_cleared_by_a_later_action(served, browser, screen, encoder):
    page = open_page(browser, served.url, screen)
    page.fill("#prompt", "Hello")
    wait_strip(page, encoder.encode("Hello"))
    page.click("#back")  # one token: no step to take back
    page.wait_for_function("document.getElementById('status').textContent.length > 0")
    set_knob(page, "temperature", 0.5)  # another kind of action
    wait_answered(page)
    assert not status(page)
    assert page.errors == []


def test_refused_typing_stays_in_the_box_and_a_step_says_it_replaced_it(served, browser,
                                                                        screen, encoder):
    page = open_page(browser, served.url, screen)
    typed = "hello " * 200  # past the tiny model's 128 positions
    page.fill("#prompt", typed)
    page.wait_for_function("document.getElementById('status').textContent.includes('128')")
    assert page.input_value("#prompt") == typed  # kept, and the page says why
    before = list(served.session.ids)
    picked = int(page.locator("#cands button.name").first.get_attribute("data-id"))
    page.locator("#cands button.name").first.click()  # a step on the model's text
    wait_strip(page, [*before, picked])
    said = status(page)
    assert "128" not in said and ("did not take" in said or "没有接受" in said), said
    assert page.input_value("#prompt") == encoder.decode([*before, picked])
    assert page.errors == []


LONG_PATH = ("/home/learner/.cache/huggingface/hub/models--uer--gpt2-chinese-cluecorpussmall/"
             "snapshots/" + "0123456789abcdef" * 2 + "01234567")
TEXT = "语言模型很有趣 hello"  # byte pieces whose labels hold a character and its bytes
# JavaScript: whether an element's text runs onto a second line, and the label boxes of an axis
LINES = """e => { const r = document.createRange(); r.selectNodeContents(e);
                 return r.getClientRects().length; }"""
LABELS = """axis => [...document.querySelectorAll('#' + axis + ' .label')].map(e => {
    const r = document.createRange(); r.selectNodeContents(e);
    return {text: r.getBoundingClientRect().toJSON(),
            box: e.getBoundingClientRect().toJSON()}; })"""


def intersect(a: dict, b: dict) -> bool:
    """Whether two boxes share more than half a pixel each way (rounding is not overlap)."""
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]) > 0.5
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 0.5)


def assert_fits(page, width: int) -> None:
    """The title within its width, each head-score row label on one line, and each attention
    label's text inside its own box and clear of its neighbour's."""
    page.wait_for_function("document.querySelectorAll('#attn-x .label').length > 1 && "
                           "document.querySelectorAll('#heads tr th').length > 1")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("(e => e.scrollWidth <= e.clientWidth)(document.getElementById('title'))")
    rows = page.locator("#heads tr > th:first-child")  # "layer 11", "层 11" (and the corner)
    assert rows.count() > 12 and all(rows.nth(i).evaluate(LINES) <= 1 for i in range(rows.count()))
    for axis in ("attn-x", "attn-y"):
        labels = page.evaluate(LABELS, axis)
        for label in labels:
            text, box = label["text"], label["box"]
            assert (box["left"] - 0.5 <= text["left"] and text["right"] <= box["right"] + 0.5
                    and box["top"] - 0.5 <= text["top"] and text["bottom"] <= box["bottom"] + 0.5)
        assert not any(intersect(a["text"], b["text"]) for a, b in zip(labels, labels[1:]))


@pytest.mark.parametrize("layout", ALL_SCREENS, ids=named(ALL_SCREENS))
def test_titles_and_labels_fit_a_phone_and_random_weights_are_not_gpt2(vocab_dir, browser,
                                                                       layout):
    """Twelve layers of twelve heads with random weights, in a folder named 124M and as a --hf
    folder with a long path, on both pages: the title never says GPT-2 124M, and nothing spills
    out of its place."""
    from picogpt.files.openai import read_encoder
    from picogpt.train import init_params
    from picogpt.web.page import explain

    locale, width = layout
    encoder = read_encoder(vocab_dir)
    hparams = {"n_vocab": 50257, "n_ctx": 128, "n_embd": 48, "n_head": 12, "n_layer": 12}
    params = init_params(hparams, np.random.default_rng(0))
    shape = {key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}
    random_words = "random weights" if locale == "en-US" else "随机权重"
    for model in ({"name": "124M", "kind": "released", "where": "models/124M", **shape},
                  {"name": LONG_PATH, "kind": "hf", "where": LONG_PATH, **shape}):
        server = ExploreServer(Session(encoder, hparams, params, model), 0, TEXT)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        try:
            page = open_page(browser, server.url, layout)
            page.wait_for_selector("#inside-busy", state="hidden")
            pages = [page, page.context.new_page()]
            pages[1].set_content(explain(TEXT, encoder, hparams, params, n_tokens=2,
                                         model=model).html)
            for shown in pages:
                title = shown.locator("#title").inner_text() + shown.title()
                assert "GPT-2 124M" not in title and (
                    model["kind"] == "hf" or random_words in title), title
                assert_fits(shown, width)
            assert page.errors == []
            page.context.close()
        finally:
            server.shutdown()
            server.server_close()


# Fonts of every kind a machine may fall back to, named and generic, and letter spacings that
# stand for fonts wider than any installed here: the title must fit with each of them
FONTS = ["system-ui, sans-serif", "serif", "monospace", "'Noto Sans CJK SC'", "'DejaVu Sans'",
         "'Liberation Sans'"]
# JavaScript: every (font, spacing, width) at which the title is wider than its box
OVERFLOWS = """([fonts, spacings]) => { const e = document.getElementById('title'), out = [];
    for (const font of fonts) for (const spacing of spacings)
        for (let width = 200; width <= 1100; width += 3) {
            Object.assign(e.style, {fontFamily: font, letterSpacing: spacing, width: width + 'px'});
            if (e.scrollWidth > e.clientWidth) out.push([font, spacing, width, e.scrollWidth]);
        }
    return out; }"""


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
def test_a_long_model_name_wraps_at_any_width_in_any_font(vocab_dir, browser, locale):
    """The title with a --hf path of 150 characters fits its box at every width from 200 to 1100
    px, in each kind of font and in fonts wider than any here (letter spacing): the layout
    cannot depend on which fonts a machine has (a fresh machine's CI once overflowed by 6 px)."""
    from picogpt.files.openai import read_encoder
    from picogpt.train import init_params
    from picogpt.web.page import explain

    encoder = read_encoder(vocab_dir)
    hparams = {"n_vocab": 50257, "n_ctx": 32, "n_embd": 8, "n_head": 2, "n_layer": 1}
    params = init_params(hparams, np.random.default_rng(0))
    model = {"name": LONG_PATH, "kind": "hf", "where": LONG_PATH, "n_layer": 1, "n_head": 2,
             "n_embd": 8}
    context = browser.new_context(locale=locale, viewport={"width": 1920, "height": 900})
    page = context.new_page()
    page.set_content(explain(TEXT, encoder, hparams, params, n_tokens=1, model=model).html)
    assert LONG_PATH in page.locator("#title").inner_text()
    assert page.evaluate(OVERFLOWS, [FONTS, ["0px", "0.1em", "0.3em"]]) == []
    context.close()


@pytest.mark.parametrize("wordpiece_served", ["uer"], indirect=True)
def test_a_poems_form_is_a_mask_the_page_shows_and_generation_keeps(wordpiece_served, browser,
                                                                     screen):
    """On a uer-like model the page offers a line length and an acrostic: once chosen, only the
    token the form allows keeps an after bar, and generate writes a poem of that form into the
    box; the row fits a phone. GPT-2's page has no such row (its test: test_explore.py)."""
    server, _prompt = wordpiece_served
    page = open_page(browser, server.url, screen)
    assert page.locator("#verse").is_visible()
    page.fill("#prompt", "")
    wait_strip(page, [server.session.encoder.start])
    page.select_option("#line", "5")
    page.locator("#acrostic").fill("春夏")
    chun = server.session.encoder.encode("春")[0]
    page.wait_for_function(f"""() => {{
        const after = [...document.querySelectorAll('#cands .p.after')];
        return window.pending === 0 && after.filter(p => Number(p.textContent) > 0).length === 1
               && after.some(p => p.dataset.id === '{chun}' && Number(p.textContent) === 1); }}""")
    page.fill("#n_generate", "40")
    page.click("#generate")
    page.wait_for_function("window.pending === 0 && "
                           "document.getElementById('prompt').value.length > 0")
    poem = "".join(page.input_value("#prompt").split())
    assert re.fullmatch("春[\u4e00-\u9fff]{4}，夏[\u4e00-\u9fff]{4}。", poem), poem
    assert not status(page) and page.errors == []
    assert page.evaluate("document.documentElement.scrollWidth") <= screen[1]


@pytest.mark.parametrize("wordpiece_served", ["uer"], indirect=True)
def test_the_rhyme_box_makes_every_xia_ju_rhyme(wordpiece_served, browser):
    """Ticked, the rhyme box (beside line length and acrostic) masks each 下句's last character:
    with --line 5 the after bars at the second 下句's last place are of the first 下句's rhyme
    alone, and generate writes a poem whose 下句 all rhyme (the test's own 十三辙)."""
    from test_constraints import rhyme_of, xia_ju

    server, _prompt = wordpiece_served
    encoder = server.session.encoder
    page = open_page(browser, server.url, ("zh-CN", 390))
    page.select_option("#line", "5")
    page.check("#rhyme")
    text = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多"  # 鸟 niǎo: 遥条
    page.fill("#prompt", text)
    wait_strip(page, [encoder.start, *encoder.encode(text)])  # the bars are this text's, not
    page.wait_for_function("""() => window.pending === 0 && [...document.querySelectorAll(
        '#cands .p.after')].some(p => Number(p.textContent) > 0)""")  # the empty box's
    shown = page.evaluate("""() => [...document.querySelectorAll('#cands .p.after')]
        .filter(p => Number(p.textContent) > 0).map(p => Number(p.dataset.id))""")
    assert shown and {rhyme_of(encoder.decode([i])) for i in shown} == {rhyme_of("鸟")}, shown
    page.fill("#prompt", "")
    wait_strip(page, [encoder.start])
    page.locator("#acrostic").fill("春夏秋冬")
    page.fill("#n_generate", "40")
    page.click("#generate")
    page.wait_for_function("window.pending === 0 && "
                           "document.getElementById('prompt').value.length > 0")
    poem = "".join(page.input_value("#prompt").split())
    rhymes = [rhyme_of(line[-1]) for line in xia_ju(poem)]
    assert len(rhymes) == 2 and None not in rhymes and rhymes[0] == rhymes[1], poem
    assert not status(page) and page.errors == []


@pytest.mark.parametrize("wordpiece_served", ["uer"], indirect=True)
def test_composing_with_an_input_method_sends_nothing_until_the_character(wordpiece_served,
                                                                          browser):
    """Pinyin typed into the acrostic while an input method composes ("chun") is not sent (the
    page would refuse "c h u n"); the character it commits (春) is."""
    server, _prompt = wordpiece_served
    page = open_page(browser, server.url, ("zh-CN", 390))
    page.fill("#prompt", "")
    wait_strip(page, [server.session.encoder.start])
    sent = []
    page.on("request", lambda request: sent.append(request.post_data or ""))
    cdp = page.context.new_cdp_session(page)
    page.focus("#acrostic")
    cdp.send("Input.imeSetComposition", {"text": "chun", "selectionStart": 4, "selectionEnd": 4})
    page.wait_for_function("document.getElementById('acrostic').value === 'chun'")
    cdp.send("Input.insertText", {"text": "春"})
    page.wait_for_function("window.pending === 0 && document.getElementById('acrostic').value "
                           "=== '春'")
    page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
    assert not any("chun" in body for body in sent) and any("春" in body for body in sent), sent
    assert not status(page) and page.errors == []


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_phone_reads_the_attention_labels_and_is_told_the_lens_scrolls(vocab_dir, browser,
                                                                         locale, tmp_path):
    """At 390 px and 34 tokens, a row of the attention map is 7 px: the axes label every second
    position in a font of at least 10 px, the last one always, each inside its box. The logit
    lens, far wider than the phone, says it scrolls, fades at its right edge while there is
    more, and keeps its layer column in place when scrolled to its end."""
    from picogpt.files.openai import read_encoder
    from picogpt.train import init_params
    from picogpt.web.page import explain

    encoder = read_encoder(vocab_dir)
    hparams = {"n_vocab": 50257, "n_ctx": 64, "n_embd": 48, "n_head": 12, "n_layer": 12}
    params = init_params(hparams, np.random.default_rng(0))
    text = ("The cat sat on the mat. It was a warm day, and the children were playing in the "
            "park near the old river, all of them laughing aloud")
    n_seq = len(encoder.encode(text)) + 3
    assert n_seq == 34
    context = browser.new_context(locale=locale, viewport={"width": 390, "height": 900},
                                  is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_content(explain(text, encoder, hparams, params, n_tokens=3).html)
    assert_fits(page, 390)
    shown = page.evaluate("""() => [...document.querySelectorAll('#tokens .tok .text')]
                             .map(e => e.textContent)""")
    for axis in ("attn-x", "attn-y"):
        labels = page.evaluate(f"""() => [...document.querySelectorAll('#{axis} .label')].map(
            e => [e.textContent, Number(e.title), parseFloat(getComputedStyle(e).fontSize)])""")
        assert [position for _, position, _ in labels] == list(range(1, n_seq, 2))
        assert [text for text, _, _ in labels] == shown[1::2]
        assert min(size for _, _, size in labels) >= 10, labels
    lens = page.locator("#lens .scroller")
    lens.scroll_into_view_if_needed()
    assert lens.evaluate("e => e.scrollWidth") > 3 * lens.evaluate("e => e.clientWidth")
    cue = page.locator("#lens-cue")
    assert cue.is_visible() and ("滑动" if locale == "zh-CN" else "scroll") in cue.inner_text()
    assert "more" in page.locator("#lens").get_attribute("class")
    page.screenshot(path=str(tmp_path / "lens-start.png"))
    lens.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    page.wait_for_function("!document.getElementById('lens').classList.contains('more')")
    first = page.locator("#lens tr:nth-child(3) > th").bounding_box()
    assert abs(first["x"] - lens.bounding_box()["x"]) <= 1  # the layer column, still at the left
    page.screenshot(path=str(tmp_path / "lens-end.png"))
    context.close()


def test_a_trained_models_page_starts_from_the_sampler_its_task_recommends(tmp_path, browser):
    """A model whose folder says top-k 8 (the poems task writes sampler.json): the page's top-k
    knob starts at 8 in sampling mode, and the next token's after bars are those of top-k 8:
    eight tokens keep a probability (the page sampled the whole distribution before)."""
    from test_explore import induction_session

    session = induction_session(tmp_path)
    session.model = {**session.model, "sampler": {"top_k": 8}}
    server = ExploreServer(session, 0, "t5 t17 t3")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        page = open_page(browser, server.url, ("en-US", 1920))
        assert page.input_value("#top_k") == "8" and page.is_checked("#mode-sample")
        wait_answered(page)
        after = page.evaluate("[...document.querySelectorAll('#cands .p.after')]"
                              ".filter(p => Number(p.textContent) > 0).length")
        assert after == 8
        page.context.close()
    finally:
        server.shutdown()
        server.server_close()
