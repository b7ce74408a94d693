"""How quickly the --explore page answers, on the 124M shape, through its real HTTP server.

    python -m scripts.benchmarks.explore --models_dir /tmp/bench/models

Times what a learner does on the page, each a request as the page sends it: a slider move (the
next token's distribution under new settings: filters on logits already computed), a key
press at the end of a 100-token prompt (the text set again: only the changed positions run),
one step (a token appended: one position through the KV cache), ten tokens generated, and the
inside views of the 100-token text. Medians of --repeats, in seconds; goals: a slider under
0.3 s, a key press under 1 s.
"""

import argparse
import http.client
import json
import statistics
import threading
import time

from picogpt.explore import Session
from picogpt.load import load_encoder_hparams_and_params
from picogpt.server import ExploreServer

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    encoder, hparams, params = load_encoder_hparams_and_params(args.model_size, args.models_dir)
    prompt = (WORDS * 10)[: len(WORDS * 10)]
    while len(encoder.encode(prompt)) > 100:
        prompt = prompt[:-1]
    server = ExploreServer(Session(encoder, hparams, params, {}), 0, prompt)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    settings = {"top_k": 40, "temperature": 0.7}
    times = {name: [] for name in ("slider move", "key press, 100-token prompt", "one step",
                                   "generate 10", "inside views, 100 tokens")}
    for i in range(args.repeats):
        post(server, "text", {"prompt": prompt, **settings})
        times["slider move"].append(post(server, "next", {**settings,
                                                          "temperature": 0.5 + i / 10}))
        times["key press, 100-token prompt"].append(post(server, "text", {
            "prompt": prompt + "xyz"[i % 3], **settings}))
        times["one step"].append(post(server, "append", {"token": 262, **settings}))
        times["generate 10"].append(post(server, "generate", {"n_tokens": 10, **settings}))
        post(server, "text", {"prompt": prompt, **settings})
        times["inside views, 100 tokens"].append(post(server, "inside", {}))
    print(f"{args.model_size}, prompt of {len(encoder.encode(prompt))} tokens, "
          f"{args.repeats} repeats (median, min, max in seconds):")
    for name, values in times.items():
        print(f"  {name:28} {statistics.median(values):.3f}  {min(values):.3f}  "
              f"{max(values):.3f}")
    server.shutdown()


if __name__ == "__main__":
    main()
