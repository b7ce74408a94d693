"""The explore server as hostile clients meet it: odd secrets, bodies and settings, long prompts,
idle and crowding connections, smuggled requests, clients that leave, the browser's command
line, and data that would break out of the page's script. Every refusal is a 4xx with a
one-line JSON error (or a valid JSON answer), the server goes on answering, and nothing reaches
stderr."""

import http.client
import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import LIMIT, wait_until
from test_explore import PROMPT, request
from test_openai import PICOGPT
from test_openai_faults import default_sigint

from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session


def start_server(tiny, prompt: str = PROMPT, serve: bool = True) -> ExploreServer:
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    model = {"name": "124M", "kind": "released", "where": str(tiny.model_dir),
             **{key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}}
    server = ExploreServer(Session(encoder, hparams, params, model), 0, prompt)
    if serve:
        serving(server)
    return server


def serving(server: ExploreServer) -> None:
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def served(tiny, capfd):
    """A server on the tiny model in this process; after the test, its stderr must be clean."""
    server = start_server(tiny)
    yield server
    server.shutdown()
    server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def strict(data: bytes):
    """JSON as the page's JSON.parse reads it: NaN and Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(data, parse_constant=refuse)


WAIT = 30  # seconds a raw read waits for the server to answer or close: only a hang reaches it


def raw(server, data: bytes) -> bytes:
    """Send bytes on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=WAIT) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def post(server, path: str, body: bytes, headers: dict | None = None) -> bytes:
    """A POST as raw bytes, with the page's own headers unless told otherwise."""
    sent = {"Host": server.host, "X-Picogpt-Token": server.secret,
            "Content-Type": "application/json", "Content-Length": str(len(body)),
            **(headers or {})}
    head = "".join(f"{name}: {value}\r\n" for name, value in sent.items() if value is not None)
    return f"POST {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + body


def still_answering(server) -> None:
    status, value = request(server, path="/api/text", body=json.dumps({"prompt": "hi"}).encode())
    assert status == 200 and value["n_tokens"] == 1


@pytest.mark.parametrize("how", ["query", "header"])
def test_a_secret_that_is_not_ascii_is_a_403(served, how):
    if how == "query":
        data = f"GET /?token=%C3%A9 HTTP/1.1\r\nHost: {served.host}\r\n\r\n".encode()
    else:
        data = post(served, "/api/next", b"{}", {"X-Picogpt-Token": "\xe9"})
    answer = raw(served, data)
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
    assert b"secret" in answer
    still_answering(served)


@pytest.mark.parametrize("body, says", [
    (b"[" * 50_000, "not a JSON object"),
    (b'{"prompt": "ab\\ud800cd"}', "not text"),
    (b'{"prompt": "\\udfff"}', "not text"),
])
def test_bodies_that_break_the_json_reader_or_the_encoder_are_400s(served, body, says):
    status, value = request(served, path="/api/text", body=body)
    assert status == 400 and says in value["error"], value
    still_answering(served)


def test_settings_that_would_put_nan_in_the_answer_are_refused_and_answers_are_strict(served):
    """Settings that overflow float32 are refused with valid JSON; the most extreme settings the
    checks allow still give finite numbers."""
    for settings in ({"repetition_penalty": 1e-300}, {"temperature": 1e-300, "top_k": 5},
                     {"temperature": 1e-300, "top_p": 0.9, "repetition_penalty": 1e-40},
                     {"temperature": 1e300, "top_k": 5, "repetition_penalty": 1e300}):
        head, _, body = raw(served, post(served, "/api/next", json.dumps(settings).encode(),
                                         {"Connection": "close"})).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), (settings, head, body[:300])
        assert strict(body)["error"].startswith(tuple(f"{name}=" for name in settings))
    for settings in ({"temperature": 1e-6, "top_k": 50, "repetition_penalty": 1e-6},
                     {"temperature": 1e6, "top_p": 1.0, "repetition_penalty": 1e6}):
        head, _, body = raw(served, post(served, "/api/next", json.dumps(settings).encode(),
                                         {"Connection": "close"})).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert strict(body)["next"]["candidates"]


def test_a_prompt_past_the_cap_is_refused_before_it_is_tokenized(served, monkeypatch):
    encoded = []
    real = served.session.encoder.prompt_ids
    monkeypatch.setattr(served.session.encoder, "prompt_ids",
                        lambda text: encoded.append(len(text)) or real(text))
    n_chars = 8 * served.session.n_ctx + 1  # the tiny model's context: 128 positions
    status, value = request(served, path="/api/text",
                            body=json.dumps({"prompt": "a" * n_chars}).encode())
    assert status == 400 and f"{n_chars} characters" in value["error"], value
    assert encoded == []
    status, value = request(served, path="/api/text",
                            body=json.dumps({"prompt": "a" * (n_chars - 1)}).encode())
    assert encoded == [n_chars - 1]  # at the cap: tokenized, then too many tokens
    assert status == 400 and "limit of 128" in value["error"]


def test_tokenizing_a_long_prompt_holds_up_no_other_request(served, monkeypatch):
    """While one prompt is being tokenized (held here until the test lets it go), another
    request is answered."""
    tokenizing, release = threading.Event(), threading.Event()
    real = served.session.encoder.prompt_ids

    def slow(text):
        tokenizing.set()
        assert release.wait(LIMIT)
        return real(text)

    monkeypatch.setattr(served.session.encoder, "prompt_ids", slow)
    answers = []
    edit = threading.Thread(target=lambda: answers.append(request(
        served, path="/api/text", body=json.dumps({"prompt": "Alan Turing"}).encode())))
    edit.start()
    try:
        assert tokenizing.wait(LIMIT)
        status, value = request(served, path="/api/next", body=b'{"temperature": 0.5}')
        assert status == 200 and value["next"]["candidates"]
        assert not answers  # the edit is still being tokenized
    finally:
        release.set()
        edit.join(LIMIT)
    assert answers[0][0] == 200 and answers[0][1]["text"] == "Alan Turing"


def test_an_idle_connection_is_closed_by_the_server(served):
    assert 0 < ExploreServer.idle <= 120  # seconds: a held socket does not hold a thread long
    served.idle = 0.5  # small for the test
    with socket.create_connection(("127.0.0.1", served.server_port), timeout=WAIT) as sock:
        assert sock.recv(1024) == b""  # closed by the server, with nothing said
    with socket.create_connection(("127.0.0.1", served.server_port), timeout=WAIT) as sock:
        sock.sendall(post(served, "/api/next", b"{}")[:-2])  # a body it never finishes
        assert sock.recv(1024) == b""
    still_answering(served)


def test_64_requests_at_once_are_all_answered(tiny, capfd):
    """64 connections arrive at once while the server is not accepting yet: the kernel's listen
    queue must hold them all (with the default backlog of 5, the 7th connection's SYN is dropped
    until the server accepts). Once it serves, each is answered."""
    server = start_server(tiny, serve=False)
    sockets = [socket.socket() for _ in range(64)]
    try:
        for sock in sockets:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", server.server_port))
        connecting, deadline = set(sockets), time.monotonic() + WAIT
        while connecting and time.monotonic() < deadline:
            _, connected, _ = select.select([], list(connecting), [], 1)
            connecting -= set(connected)
        assert not connecting, f"{len(connecting)} of 64 connections were not taken"
        for sock in sockets:
            sock.setblocking(True)
            sock.settimeout(WAIT)
            sock.sendall(post(server, "/api/next", b"{}", {"Connection": "close"}))
        serving(server)
        for sock in sockets:
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            assert received.startswith(b"HTTP/1.1 200 ")
        server.shutdown()
    finally:
        for sock in sockets:
            sock.close()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("how", ["wrong_secret", "no_such_call", "bad_settings"])
def test_a_refusal_closes_the_connection_so_its_body_is_never_a_second_request(served, how):
    smuggled = f"GET /?token={served.secret} HTTP/1.1\r\nHost: {served.host}\r\n\r\n".encode()
    path, headers = {"wrong_secret": ("/api/next", {"X-Picogpt-Token": "nope"}),
                     "no_such_call": ("/api/nothing", {}),
                     "bad_settings": ("/api/next", {})}[how]
    body = b'{"top_k": 0}' if how == "bad_settings" else smuggled
    data = post(served, path, body, headers)
    if how == "bad_settings":
        data += smuggled  # a second request on the same connection, after a 400
    answer = raw(served, data)
    assert answer.count(b"HTTP/1.1 ") == 1, answer[:300]
    assert b"\r\nConnection: close\r\n" in answer
    assert answer.split(b" ", 2)[1] in (b"400", b"403", b"404")


def test_a_client_that_leaves_mid_generation_leaves_nothing_on_stderr(served, monkeypatch,
                                                                     capfd):
    session, first, left, done = served.session, threading.Event(), threading.Event(), \
        threading.Event()
    real_generate, real_shutdown = session.generate, served.shutdown_request

    def generate(*args, **kwargs):
        for i, token in enumerate(real_generate(*args, **kwargs)):
            yield token
            if i == 0:
                first.set()
                assert left.wait(LIMIT)

    monkeypatch.setattr(session, "generate", generate)
    monkeypatch.setattr(served, "shutdown_request", lambda r: (real_shutdown(r), done.set()))
    with socket.create_connection(("127.0.0.1", served.server_port), timeout=LIMIT) as sock:
        sock.sendall(post(served, "/api/generate", b'{"n_tokens": 100}'))
        assert first.wait(LIMIT)
        sock.recv(1)  # the answer has started
    left.set()
    assert done.wait(LIMIT)
    assert "Traceback" not in capfd.readouterr().err
    still_answering(served)


def test_favicon_is_a_quiet_204_and_a_superseded_call_is_a_204(served):
    answer = raw(served, f"GET /favicon.ico HTTP/1.1\r\nHost: {served.host}\r\n"
                         f"Connection: close\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 204 "), answer[:200]
    request(served, path="/api/next", body=b'{"seq": 5, "page": "a"}')
    answer = raw(served, post(served, "/api/next", b'{"seq": 3, "page": "a"}',
                              {"Connection": "close"}))
    assert answer.startswith(b"HTTP/1.1 204 "), answer[:200]
    assert answer.endswith(b"\r\n\r\n")  # no body


@pytest.mark.parametrize("language, says", [
    ("zh-CN,zh;q=0.9,en;q=0.8", "超出了模型"),
    ("en-US,en;q=0.9", "passes the model's limit of 128"),
])
def test_errors_come_in_the_pages_language(served, language, says):
    status, value = request(served, path="/api/text", headers={"Accept-Language": language},
                            body=json.dumps({"prompt": "hello " * 150}).encode())
    assert status == 400 and says in value["error"], value
    assert "GPT-2" not in value["error"]
    if language.startswith("zh"):
        request(served, path="/api/text", body=json.dumps({"prompt": "hi"}).encode())
        status, value = request(served, path="/api/back", body=b"{}",
                                headers={"Accept-Language": language})
        assert status == 400 and "词元" in value["error"], value
        status, value = request(served, path="/api/next", body=b'{"top_k": 0}',
                                headers={"Accept-Language": language})
        assert status == 400 and "top_k=0" in value["error"] and "整数" in value["error"]
        status, value = request(served, path="/api/next", body=b"{}",
                                headers={"Accept-Language": language, "X-Picogpt-Token": "x"})
        assert status == 403 and "密钥" in value["error"], value



@pytest.mark.parametrize("path, body", [
    ("/api/next", {"top_p": 2}), ("/api/next", {"temperature": 1e-7}),
    ("/api/draw", {"seed": -1}), ("/api/append", {"token": 10**6}),
    ("/api/generate", {"n_tokens": 0}), ("/api/text", {"prompt": 5}),
    ("/api/nothing", {}), ("/api/next", {"seq": "x"}), ("/api/next", {"version": 1.5}),
])
def test_every_refusal_on_a_zh_page_is_chinese(served, path, body):
    """The server answers a zh page's request speaking Chinese: the checks' messages, the
    server's own and their hints come from the catalog, with no English sentence left."""
    status, value = request(served, path=path, body=json.dumps(body).encode(),
                            headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    assert status in (400, 404), value
    assert re.search("[\u4e00-\u9fff]", value["error"]), value
    assert not re.search(r"\b[a-z]{3,} [a-z]{3,}\b", value["error"]), value  # no English words

# a stand-in browser ($BROWSER): records its command line and the file it was given
REDIRECT_RECORDER = """import json, os, stat, sys
path = sys.argv[1].removeprefix("file://")
with open(os.environ["RECORD"] + ".part", "w") as f:
    json.dump({"argv": sys.argv[1:], "text": open(path).read(),
               "file": stat.S_IMODE(os.stat(path).st_mode),
               "dir": stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)}, f)
os.replace(os.environ["RECORD"] + ".part", os.environ["RECORD"])
"""


def test_the_browser_is_opened_on_a_private_file_not_on_the_secret(tiny, tmp_path, browser):
    """The secret never reaches another process's command line: the browser gets a redirect
    file only its user can read, which leads to the address (as Jupyter does)."""
    recorder, record = tmp_path / "browser.py", tmp_path / "record"
    recorder.write_text(REDIRECT_RECORDER)
    env = {**os.environ, "BROWSER": f"{sys.executable} {recorder} %s", "RECORD": str(record)}
    process = subprocess.Popen([str(PICOGPT), "hello", "--explore", "--models_dir",
                                str(tiny.models_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=default_sigint)
    try:
        url = process.stdout.readline().strip()
        secret = url.split("token=")[1]
        wait_until(record.exists, process)
        seen = json.loads(record.read_text())
        assert secret not in " ".join(seen["argv"])
        assert url in seen["text"]
        assert seen["file"] == stat.S_IRUSR | stat.S_IWUSR and seen["dir"] == stat.S_IRWXU
        redirect = Path(seen["argv"][0].removeprefix("file://"))
        page = browser.new_page()
        page.goto(redirect.as_uri())
        page.wait_for_url(url, timeout=LIMIT * 1000)
        page.close()
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=LIMIT)
    assert process.returncode == 130 and "Traceback" not in stderr
    assert not redirect.exists()  # removed when the server stops


# "<!--<script>" made the browser read the rest of the page as script before inlined data was
# escaped; "</script>" ends the script unless escaped. (U+2028, escaped too for older engines,
# is valid JavaScript since ES2019: Chromium cannot show it breaking a page.)
HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>"]


@pytest.mark.parametrize("prompt", HOSTILE)
def test_a_hostile_prompt_renders_on_the_explore_page(tiny, browser, prompt):
    server = start_server(tiny, prompt)
    try:
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: errors.append(dialog.message) or dialog.dismiss())
        page.goto(server.url)
        page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0",
                               timeout=LIMIT * 1000)
        assert page.input_value("#prompt") == prompt and errors == []
        page.close()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_model_name_renders_on_the_explain_page(tiny, browser, name):
    """The --explain page inlines its data the same way; a model's name reaches its title."""
    from picogpt.web.page import explain

    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    html = explain(PROMPT, encoder, hparams, params, n_tokens=2,
                   model={"name": name, "kind": "hf"}).html
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: errors.append(dialog.message) or dialog.dismiss())
    page.set_content(html)
    n_tokens = len(encoder.prompt_ids(PROMPT)) + 2
    page.wait_for_function(f"document.querySelectorAll('#tokens .tok').length === {n_tokens}",
                           timeout=LIMIT * 1000)
    assert name in page.locator("#title").text_content() and errors == []
    page.close()


def stream_lines(server, body: dict, page: str = "") -> list[dict]:
    """A generation's answer read as the chunked body it must be (http.client refuses a chunk
    size that is not one, such as a second response written inside the body), every line of
    it strict JSON."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=LIMIT)
    connection.request("POST", "/api/generate", json.dumps({**body, "page": page}),
                       {"Host": server.host, "X-Picogpt-Token": server.secret,
                        "Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Transfer-Encoding") == "chunked"
    data = response.read()
    connection.close()
    return [strict(line) for line in data.decode("utf-8").splitlines()]


def picks_failing(monkeypatch, n_good: int, failure) -> None:
    """Sampling.pick as it is for n_good picks, then failure(pick's result) in its place."""
    from picogpt.sampling import Sampling

    real, picked = Sampling.pick, []

    def pick(self, logits, rng):
        picked.append(1)
        token = real(self, logits, rng)
        return token if len(picked) <= n_good else failure(token)

    monkeypatch.setattr(Sampling, "pick", pick)


def padded_server(tiny) -> ExploreServer:
    """The tiny model with its wte padded to 50,304 rows (as nanoGPT pads it, for speed): ids
    50,257 .. 50,303 are rows of the model that no token of the vocabulary stands for."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    pad = np.zeros((50304 - hparams["n_vocab"], hparams["n_embd"]), np.float32)
    params = {**params, "wte": np.concatenate([params["wte"], pad])}
    server = ExploreServer(Session(encoder, {**hparams, "n_vocab": 50304}, params,
                                   {"name": "124M", "kind": "trained"}), 0, PROMPT)
    serving(server)
    return server


@pytest.mark.parametrize("how", ["bug", "outside"])
def test_an_error_mid_stream_ends_the_stream_and_leaves_the_session_usable(tiny, monkeypatch,
                                                                          capfd, how):
    """Two tokens, then the sampler raises (a bug) or picks an id the vocabulary does not hold
    (a padded wte): the body stays a chunked stream of JSON lines, the error is a line of its
    own, the text keeps the two tokens, and state, text and the inside views answer after."""
    server = padded_server(tiny)
    try:
        n_prompt = len(server.session.ids)
        failure = {"bug": lambda token: 1 / 0, "outside": lambda token: 50300}[how]
        picks_failing(monkeypatch, 2, failure)
        lines = stream_lines(server, {"n_tokens": 5})
        assert [list(line) for line in lines[:2]] == [["token"], ["token"]]
        says = {"bug": "picogpt hit a bug (ZeroDivisionError", "outside": "token 50300"}[how]
        assert says in lines[2]["error"], lines
        assert len(lines) == 4 and lines[3]["n_tokens"] == n_prompt + 2
        assert [token["id"] for token in lines[3]["tokens"]] == server.session.ids
        err = capfd.readouterr().err
        assert ("ZeroDivisionError" in err) == (how == "bug")  # a bug's traceback: the terminal
        for path, body in (("/api/state", {}), ("/api/inside", {}), ("/api/back", {}),
                           ("/api/text", {"prompt": "a"})):
            status, value = request(server, path=path, body=json.dumps(body).encode())
            assert status == 200, (path, value)
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_that_leaves_mid_stream_still_makes_a_new_version(served, monkeypatch):
    """Tab a's generation changes the text and its client leaves before the end: tab b, which
    last saw the text before it, is refused (409) instead of changing a text it never saw."""
    status, seen = request(served, path="/api/state", body=b'{"page": "b"}')
    session, first, left = served.session, threading.Event(), threading.Event()
    real_generate = session.generate

    def generate(*args, **kwargs):
        for i, token in enumerate(real_generate(*args, **kwargs)):
            yield token
            if i == 0:
                first.set()
                assert left.wait(LIMIT)

    monkeypatch.setattr(session, "generate", generate)
    with socket.create_connection(("127.0.0.1", served.server_port), timeout=LIMIT) as sock:
        sock.sendall(post(served, "/api/generate", b'{"n_tokens": 100, "page": "a"}'))
        assert first.wait(LIMIT)
        sock.recv(1)  # the answer has started
    left.set()
    wait_until(lambda: not served.lock.locked())  # the stream, which holds it, has ended
    ids = list(session.ids)
    status, value = request(served, path="/api/append", body=json.dumps(
        {"token": 0, "page": "b", "version": seen["version"]}).encode())
    assert status == 409 and value["changed"], value
    assert session.ids == ids  # the click of tab b did not land


def test_a_prompt_that_a_newer_one_replaced_is_not_tokenized(served, monkeypatch):
    """Three edits, the first held in its tokenization: the second, stale by the time the
    first lets go, is answered as superseded without being tokenized; the third is."""
    tokenizing, release, tokenized = threading.Event(), threading.Event(), []
    real = served.session.encoder.prompt_ids

    def held(text):
        tokenized.append(text)
        if len(tokenized) == 1:
            tokenizing.set()
            assert release.wait(LIMIT)
        return real(text)

    monkeypatch.setattr(served.session.encoder, "prompt_ids", held)
    answers = {}

    def edit(n: int) -> threading.Thread:
        body = json.dumps({"prompt": f"edit {n}", "seq": n, "page": "a"}).encode()
        thread = threading.Thread(target=lambda: answers.update(
            {n: request(served, path="/api/text", body=body)}))
        thread.start()
        return thread

    threads = [edit(1)]
    assert tokenizing.wait(LIMIT)
    threads += [edit(2)]
    wait_until(lambda: served.latest.get(("a", "text")) == 2)
    threads += [edit(3)]
    wait_until(lambda: served.latest.get(("a", "text")) == 3)
    release.set()
    for thread in threads:
        thread.join(LIMIT)
    assert tokenized == ["edit 1", "edit 3"]
    assert [answers[n][0] for n in (1, 2, 3)] == [204, 204, 200]
    assert answers[3][1]["text"] == "edit 3"


def spoiled_server(tiny, how: str) -> ExploreServer:
    """The tiny model with numbers that are not finite, loaded past the loader (which refuses
    NaN): wpe's row for the position after PROMPT near float32's largest (finite, but a text
    that reaches that position overflows in the first layer norm), or ln_f's gain NaN (every
    text)."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    if how == "nan":
        params = {**params, "ln_f": {**params["ln_f"], "g": np.full_like(params["ln_f"]["g"],
                                                                            np.nan)}}
    else:
        wpe = np.array(params["wpe"])
        wpe[len(encoder.prompt_ids(PROMPT))] = np.float32(3e38)
        params = {**params, "wpe": wpe}
    server = ExploreServer(Session(encoder, hparams, params, {"name": "124M", "kind": "trained"}),
                           0, PROMPT)
    serving(server)
    return server


def answered(server, path: str, body: dict) -> tuple[int, dict]:
    """A call on a connection of its own: the status and the strict JSON of its answer (a
    stream's last line). A dropped connection has no status line and fails here."""
    answer = raw(server, post(server, path, json.dumps(body).encode(), {"Connection": "close"}))
    head, _, data = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), (path, answer[:200])
    if b"Transfer-Encoding: chunked" in head:
        data = b"".join(data.split(b"\r\n")[1::2])  # the chunks' data, without their sizes
    return int(head.split()[1]), strict(data.splitlines()[-1])


@pytest.mark.parametrize("how", ["overflow", "nan"])
def test_numbers_that_are_not_finite_are_json_errors_and_the_session_stays_usable(tiny, capfd,
                                                                                  how):
    """Every call on a text whose logits hold NaN or infinity answers strict JSON (an error, or
    the text's state with why there are no candidates), never a dropped connection; a text
    without them then answers as always."""
    token = 262  # " the"
    server = spoiled_server(tiny, how)
    try:
        status, value = answered(server, "/api/append", {"token": token})
        assert status == 200 and "NaN or infinity" in value["refused"], value
        assert value["tokens"][-1]["id"] == token  # the text stands
        for path, body in (("/api/state", {}), ("/api/next", {}), ("/api/text", {"prompt": PROMPT
                           + " the"}), ("/api/draw", {"seed": 1, "top_k": 5}),
                           ("/api/generate", {"n_tokens": 3}), ("/api/inside", {})):
            status, value = answered(server, path, body)
            said = value.get("error") or value.get("refused")
            assert said and "NaN or infinity" in said, (path, status, value)
        status, value = answered(server, "/api/back", {})
        if how == "overflow":  # the text before that position: finite again
            assert status == 200 and value["next"]["candidates"], value
            status, value = answered(server, "/api/text", {"prompt": "hi"})
            assert status == 200 and value["next"]["candidates"], value
            status, value = answered(server, "/api/generate", {"n_tokens": 2, "top_k": 3})
            assert status == 200 and value["next"]["candidates"], value
        else:
            assert status == 200 and "NaN or infinity" in value["refused"]
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def head_and_body(answer: bytes) -> tuple[str, dict, bytes]:
    """An answer's status line, headers (lower-case names) and body."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict((name.lower(), value) for name, _, value in
                        (line.partition(": ") for line in lines)), body


@pytest.mark.parametrize("sent, status, language, says", [
    (b"GET / FOO\r\n\r\n", 400, "en", "not HTTP that this server reads"),
    (b"GET / HTTP/1.1 more\r\n\r\n", 400, "en", "not HTTP that this server reads"),
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "en", "address is too long"),
    (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n", 431, "en", "headers are too"),
    (b"GET / HTTP/1.1\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n", 431, "en", "headers are too"),
    (b"PUT /api/next HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 501, "en", "GET and POST, not PUT"),
    (b"OPTIONS / HTTP/1.1\r\nAccept-Language: zh-CN\r\n\r\n", 501, "zh", "OPTIONS"),
    (b"HEAD / HTTP/1.1\r\n\r\n", 501, "en", None),
    (b"GET / HTTP/2.0\r\n\r\n", 505, "en", "HTTP/1.1 and HTTP/1.0 only"),
], ids=["bad_version", "four_words", "long_url", "long_header", "many_headers", "put",
        "options_zh", "head", "http2"])
def test_the_standard_librarys_own_refusals_are_json_in_the_pages_language(served, sent, status,
                                                                         language, says):
    """What http.server refuses before picogpt's code sees the request: a JSON error as every
    other refusal, in the language of the request when its headers were read (English before:
    there is nothing to go by), and the connection closed."""
    line, headers, body = head_and_body(raw(served, sent))
    assert line.startswith(f"HTTP/1.1 {status} "), line
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert headers["connection"] == "close"
    if says is None:  # HEAD: the same headers, no body
        assert body == b"" and int(headers["content-length"]) > 0
        return
    error = strict(body)["error"]
    assert says in error and bool(re.search("[\u4e00-\u9fff]", error)) == (language == "zh")
    still_answering(served)


def slow_clients(server, n: int) -> list[socket.socket]:
    """n connections that have begun a request and send nothing more, once the server holds
    each in a thread of its own (it reads their requests)."""
    before = threading.active_count()
    sockets = []
    for _ in range(n):
        sockets.append(socket.create_connection(("127.0.0.1", server.server_port),
                                                timeout=WAIT))
        sockets[-1].sendall(b"POST /api/next HTTP/1.1\r\nHost: ")
    wait_until(lambda: threading.active_count() >= before + n)
    return sockets


def test_a_request_that_trickles_in_is_refused_once_its_time_is_up(tiny, capfd):
    """A byte of a header at a time, each well within the idle time: the request as a whole
    must arrive within `arrival` seconds of its first byte (here 0.3, set for the test), then it
    is a 408, not a thread held for as long as the bytes keep coming."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    server = ExploreServer(Session(encoder, hparams, params, {"name": "124M"}), 0, PROMPT,
                           arrival=0.3)
    serving(server)
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=WAIT) as sock:
            sock.sendall(b"POST /api/next HTTP/1.1\r\nX-Slow: ")
            deadline = time.monotonic() + WAIT  # only a server that never answers reaches it
            while not select.select([sock], [], [], 0.05)[0] and time.monotonic() < deadline:
                sock.sendall(b"a")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        line, headers, body = head_and_body(answer)
        assert line.startswith("HTTP/1.1 408 "), answer[:300]
        assert "did not arrive whole within 0.3 s" in strict(body)["error"]
        still_answering(server)
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def test_connections_past_the_bound_are_refused_at_once(tiny, capfd):
    """3 connections being read (the bound, set for the test) that have not waited past the
    grace: a 4th is refused at once with a 503, and the server answers once they are gone."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    server = ExploreServer(Session(encoder, hparams, params, {"name": "124M"}), 0, PROMPT,
                           arriving=3, grace=LIMIT)
    serving(server)
    held = slow_clients(server, 3)
    try:
        line, headers, body = head_and_body(raw(server, b"GET / HTTP/1.1\r\n\r\n"))
        assert line.startswith("HTTP/1.1 503 ") and headers["connection"] == "close", line
        assert "already reading 3 requests" in strict(body)["error"]
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: not server.arrivals.since)
    still_answering(server)
    server.shutdown()
    server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def test_a_page_still_gets_answers_while_slow_clients_hold_every_place(tiny, capfd):
    """Slow clients hold all 3 places (set for the test, with no grace): the page's request
    takes the place of the one that has waited longest, which is told so (503), and is
    answered; so is the next."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    server = ExploreServer(Session(encoder, hparams, params, {"name": "124M"}), 0, PROMPT,
                           arriving=3, grace=0)
    serving(server)
    held = slow_clients(server, 3)
    try:
        still_answering(server)
        answer = b""
        while chunk := held[0].recv(65536):
            answer += chunk
        line, _, body = head_and_body(answer)
        assert line.startswith("HTTP/1.1 503 ") and "send this one again" in strict(body)["error"]
        status, value = request(server, path="/api/next", body=b"{}")
        assert status == 200 and value["next"]["candidates"]
    finally:
        for sock in held:
            sock.close()
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def test_a_stream_is_not_cut_by_the_time_a_request_has_to_arrive(tiny, monkeypatch, capfd):
    """A generation held mid-stream past the arrival bound (0.2 s here), while another request
    takes the one place to be read: the stream still ends whole."""
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    server = ExploreServer(Session(encoder, hparams, params, {"name": "124M"}), 0, PROMPT,
                           arrival=0.2, arriving=1, grace=0)
    serving(server)
    session, first, release = server.session, threading.Event(), threading.Event()
    real_generate = session.generate

    def generate(*args, **kwargs):
        for i, token in enumerate(real_generate(*args, **kwargs)):
            yield token
            if i == 0:
                first.set()
                assert release.wait(LIMIT)

    monkeypatch.setattr(session, "generate", generate)
    lines = []
    streaming = threading.Thread(target=lambda: lines.extend(stream_lines(server, {
        "n_tokens": 4, "top_k": 5, "seed": 1})))
    streaming.start()
    try:
        assert first.wait(LIMIT)
        began = time.monotonic()
        wait_until(lambda: time.monotonic() > began + 0.4)  # the bound, twice over
        status, _ = request(server, "GET", f"/?token={server.secret}", b"")
        assert status == 200
    finally:
        release.set()
        streaming.join(LIMIT)
    assert [list(line) for line in lines[:4]] == [["token"]] * 4
    assert lines[4]["n_tokens"] == len(session.ids) and "next" in lines[4]
    server.shutdown()
    server.server_close()
    assert "Traceback" not in capfd.readouterr().err
