"""Downloads, caches and the CLI under faults: a server on 127.0.0.1 that misbehaves on purpose,
killed processes, damaged files. Each test checks what the user sees and that the model folder
ends with correct files or none."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import QuietHandler, wait_until
from test_openai import PICOGPT, assert_one_line_error, picogpt, picogpt_child, published

from picogpt import PicoGPTError
from picogpt.files.download import FILES, RETRIES, download_missing
from picogpt.files.store import read_params

DATA = "model.ckpt.data-00000-of-00001"
# The client's time-out in the stall tests. A stalled server sends nothing until the test ends,
# so any time-out ends it; the files that do come must never pause that long, even on a machine
# with both cores busy.
STALL = 2


class FaultyHandler(QuietHandler):
    """A file server that honours Range, and breaks the way server.fault(name, n) says.

    fault returns what to do with the n-th request (0-based) for a file: "ok", "drop" (send
    half the body and close), "500", "404", "stall" (answer nothing until the test ends),
    "stall-mid" (send half the body, then nothing until the test ends), "held" (send the body
    once the test sets server.release), "ok-no-range" / "drop-no-range" (ignore the Range
    header), "403" / "416" (those statuses), "wrong-range" (answer a Range request with 206
    from byte 0), or "206-unasked" (answer 206 from byte 5 to a request without Range).
    """

    def do_GET(self):
        server, name = self.server, self.path.rsplit("/", 1)[-1]
        server.requests.append((name, self.headers.get("Range")))
        fault = server.fault(name, sum(n == name for n, _ in server.requests) - 1)
        path = Path(self.directory) / self.path.lstrip("/")
        if fault in ("404", "500", "403", "416") or not path.is_file():
            self.send_error(int(fault) if fault in ("500", "403", "416") else 404)
            return
        if fault == "stall":  # until the test ends: only the client's time-out ends the wait
            server.ending.wait(60)
            return
        if fault == "held":  # until the test lets it go, whatever the client's time-out
            server.release.wait(120)
        data, start = path.read_bytes(), 0
        ranged = self.headers.get("Range") and "no-range" not in fault
        if ranged:
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
        if fault == "206-unasked":  # a part of the file, though none was asked for
            ranged, start = True, 5
        self.send_response(206 if ranged else 200)
        if ranged and fault == "wrong-range":  # resumes, but from byte 0, not where asked
            start = 0
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        if fault.startswith("drop"):
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
        elif fault == "stall-mid":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            server.ending.wait(60)  # as for "stall"
            self.close_connection = True
        else:
            self.wfile.write(body)

    def log_message(self, format, *args):
        pass


@pytest.fixture
def faulty(tiny, tmp_path, serve):
    """Start a misbehaving server over a copy of the tiny checkpoint's seven files."""
    root = published(tiny, tmp_path / "site")
    return lambda fault=lambda name, n: "ok": serve(root, FaultyHandler, fault=fault)


def default_sigint() -> None:
    """In the child, before picogpt starts: Ctrl-C raises KeyboardInterrupt, as in a terminal.

    A process started in the background by a non-interactive shell (CI's, or `nohup ... &`)
    inherits SIGINT ignored, and Python then installs no handler: SIGINT would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def assert_correct_or_absent(model_dir: Path, tiny) -> None:
    """Every one of the seven files in model_dir is either the real file or not there."""
    for name in FILES:
        path = model_dir / name
        assert not path.exists() or path.read_bytes() == (tiny.model_dir / name).read_bytes(), name


def fetch(server, model_dir, **retry):
    download_missing(model_dir, f"{server.url}/124M", **{"backoff": 0.01, **retry})


def test_a_dropped_connection_resumes_with_range(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "drop" if name == DATA and n == 0 else "ok")
    fetch(server, tmp_path / "124M")
    assert_correct_or_absent(tmp_path / "124M", tiny)
    assert all((tmp_path / "124M" / name).exists() for name in FILES)
    first, second = [r for name, r in server.requests if name == DATA]
    half = (tiny.model_dir / DATA).stat().st_size // 2  # what the server sent before closing
    resumed_at = int(second.removeprefix("bytes=").removesuffix("-"))
    assert first is None and 0 < resumed_at <= half  # from what had been written, not from 0


def test_a_server_that_ignores_range_gets_the_file_again_from_the_start(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "drop-no-range" if name == DATA and n == 0 else
                    "ok-no-range")
    fetch(server, tmp_path / "124M")
    assert_correct_or_absent(tmp_path / "124M", tiny)
    assert (tmp_path / "124M" / DATA).exists()


def test_500_then_200_is_retried(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "500" if n == 0 else "ok")
    fetch(server, tmp_path / "124M")
    assert_correct_or_absent(tmp_path / "124M", tiny)
    assert len(server.requests) == 2 * len(FILES)


def test_404_says_the_size_or_address_is_wrong(faulty, tmp_path, tiny):
    server = faulty(lambda name, n: "404")
    with pytest.raises(PicoGPTError, match=r"/124M/checkpoint does not exist \(HTTP 404\): "
                                           r"check --model_size and the download address"):
        fetch(server, tmp_path / "124M")
    assert len(server.requests) == 1  # not worth retrying
    assert_correct_or_absent(tmp_path / "124M", tiny)


def test_a_body_shorter_than_content_length_never_becomes_a_file(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "drop-no-range" if name == DATA else "ok")
    with pytest.raises(PicoGPTError, match=rf"could not download .*{DATA} \(the connection "
                                           rf"dropped mid-file; {RETRIES + 1} tries\)"):
        fetch(server, tmp_path / "124M")
    assert not (tmp_path / "124M" / DATA).exists()
    assert_correct_or_absent(tmp_path / "124M", tiny)


def test_a_server_that_does_not_answer_times_out(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "stall")
    with pytest.raises(PicoGPTError, match=rf"no answer within {STALL} s; 5 tries"):
        fetch(server, tmp_path / "124M", timeout=STALL)
    assert_correct_or_absent(tmp_path / "124M", tiny)
    assert not (tmp_path / "124M" / "checkpoint").exists()


def test_a_stall_mid_file_is_a_time_out_retried_and_resumed(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "stall-mid" if name == DATA and n == 0 else "ok")
    fetch(server, tmp_path / "124M", timeout=STALL)
    assert_correct_or_absent(tmp_path / "124M", tiny)
    assert all((tmp_path / "124M" / name).exists() for name in FILES)
    first, second = [r for name, r in server.requests if name == DATA]
    assert first is None and second is not None and second != "bytes=0-"  # resumed


def test_a_server_that_always_stalls_mid_file_is_reported_as_a_network_problem(faulty, tiny,
                                                                               tmp_path):
    server = faulty(lambda name, n: "stall-mid" if name == DATA else "ok")
    with pytest.raises(PicoGPTError, match=rf"could not download .*{DATA} \(the server sent "
                                           rf"nothing for {STALL} s mid-file; 5 tries\)"):
        fetch(server, tmp_path / "124M", timeout=STALL)
    assert not (tmp_path / "124M" / DATA).exists()
    assert (tmp_path / "124M" / f"{DATA}.part").exists()  # kept for the next run to resume


def test_offline_explains_how_to_place_the_files_by_hand(tmp_path):
    with pytest.raises(PicoGPTError, match=r"the host name does not resolve; 1 try\). If you "
                                           r"are offline, copy the seven files \(checkpoint, "):
        download_missing(tmp_path / "124M", "http://no-such-host.invalid/124M")
    with socket_closed() as port:  # nothing listens: refused, retried, then explained
        with pytest.raises(PicoGPTError, match=r"connection refused; 5 tries"):
            download_missing(tmp_path / "124M", f"http://127.0.0.1:{port}/124M", backoff=0.01)
    assert not any((tmp_path / "124M" / name).exists() for name in FILES)


@contextlib.contextmanager
def socket_closed():
    """A port on 127.0.0.1 that refuses connections: bound by a socket that never listens, and
    held for the whole block, so no other program can start listening on it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_download_killed_midway_leaves_no_complete_looking_file(faulty, tiny, tmp_path, sig):
    # half the file arrives, then nothing: the kill lands mid-file on any machine
    slow = faulty(lambda name, n: "stall-mid" if name == DATA else "ok")
    models_dir = tmp_path / "models"
    env = {**os.environ, "PICOGPT_BASE_URL": slow.url}
    process = subprocess.Popen([str(PICOGPT), "hi", "--models_dir", str(models_dir)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=default_sigint)
    part = models_dir / "124M" / f"{DATA}.part"
    wait_until(lambda: part.exists() and part.stat().st_size > 100_000, process)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL)
    if sig == signal.SIGINT:
        assert "Traceback" not in stderr
        assert stderr.strip().splitlines()[-1] == (
            f"picogpt: download stopped; {part} is kept, and the next run resumes it.")
    assert not (models_dir / "124M" / DATA).exists() and part.exists()
    assert_correct_or_absent(models_dir / "124M", tiny)
    # the next download asks for the rest of the part, and ends with the real files
    kept, resumed = part.stat().st_size, faulty()
    fetch(resumed, models_dir / "124M")
    assert [r for name, r in resumed.requests if name == DATA] == [f"bytes={kept}-"]
    assert all((models_dir / "124M" / name).exists() for name in FILES)
    assert_correct_or_absent(models_dir / "124M", tiny)


def test_two_processes_downloading_at_once_end_with_one_correct_copy(faulty, tiny, tmp_path):
    """The second run waits for the first, which holds the folder while the server holds the
    first's big file: the test, not the machine's speed, decides that they overlap."""
    server = faulty(lambda name, n: "held" if name == DATA else "ok")
    server.release = threading.Event()
    models_dir = tmp_path / "models"
    env = {**os.environ, "PICOGPT_BASE_URL": server.url}
    cmd = [str(PICOGPT), "hi", "--n_tokens", "5", "--models_dir", str(models_dir)]

    def start() -> subprocess.Popen:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    first = start()
    wait_until(lambda: DATA in [name for name, _ in server.requests], first)  # holds the folder
    second, said = start(), []
    wait_until(lambda: said.append(second.stderr.readline()) or "waiting for another picogpt "
               "that is writing to" in said[-1], second)
    server.release.set()
    outputs = [run.communicate(timeout=300) for run in (first, second)]
    assert [run.returncode for run in (first, second)] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]
    assert sorted(name for name, _ in server.requests) == sorted(FILES)  # each fetched once
    assert_correct_or_absent(models_dir / "124M", tiny)


def test_a_file_truncated_after_download_is_fetched_again(faulty, tiny, tmp_path):
    server = faulty()
    models_dir = tmp_path / "models"
    fetch(server, models_dir / "124M")  # a complete download, recorded in download.json
    data = models_dir / "124M" / DATA
    data.write_bytes(data.read_bytes()[:1000])
    server.requests.clear()
    again = picogpt_child("hi", "--n_tokens", "5", "--models_dir", str(models_dir),
                          "--base_url", server.url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == picogpt("hi", "--n_tokens", "5", "--models_dir",
                                   str(tiny.models_dir)).stdout
    assert [name for name, _ in server.requests] == [DATA]
    assert_correct_or_absent(models_dir / "124M", tiny)


def test_a_truncated_checkpoint_placed_by_hand_is_refused_by_name(tiny, tmp_path):
    model_dir = tmp_path / "models" / "124M"
    model_dir.mkdir(parents=True)
    for name in FILES:
        shutil.copy(tiny.model_dir / name, model_dir / name)
    (model_dir / DATA).write_bytes((tiny.model_dir / DATA).read_bytes()[:5000])
    done = picogpt_child("hi", "--models_dir", str(tmp_path / "models"))
    assert_one_line_error(done, "delete its model.ckpt.* files to download them again")
    assert done.stdout == ""
    assert done.stderr.startswith(f"picogpt: cannot read the checkpoint in {model_dir}")


def test_a_damaged_converted_cache_is_rebuilt_not_used(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    first = picogpt("hi", "--n_tokens", "8", "--models_dir", str(models_dir))
    tensor = models_dir / "124M" / "params" / "h0.attn.c_attn.w.npy"
    damaged = tensor.read_bytes()[:-4000]  # cut short, as a copy stopped midway leaves it
    tensor.write_bytes(damaged)
    again = picogpt_child("hi", "--n_tokens", "8", "--models_dir", str(models_dir))
    assert again.returncode == 0 and again.stdout == first.stdout
    assert tensor.read_bytes() != damaged  # rebuilt from the checkpoint
    manifest = json.loads((models_dir / "124M" / "params" / "manifest.json").read_text())
    assert "h0.attn.c_attn.w" in manifest["tensors"]


def test_a_malformed_cache_manifest_is_rebuilt(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    first = picogpt("hi", "--n_tokens", "4", "--models_dir", str(models_dir))
    manifest = models_dir / "124M" / "params" / "manifest.json"
    good = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**good, "tensors": {"wte": {}}}))  # valid JSON, no shape
    again = picogpt_child("hi", "--n_tokens", "4", "--models_dir", str(models_dir))
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert len(json.loads(manifest.read_text())["tensors"]) > 1


def test_ctrl_c_while_generating_keeps_the_text_and_exits_130(gpt2_124m):
    """What was printed before Ctrl-C stays, and it is the start of the library's text."""
    from picogpt import generate, load_encoder_hparams_and_params

    encoder, hparams, params = load_encoder_hparams_and_params("124M", gpt2_124m.models_dir)
    tokens = generate(encoder.encode("hi"), params, hparams["n_head"], 900)
    ids, texts = [], []  # the library's text after 1, 2, ... tokens, made as far as needed

    def grow() -> None:
        ids.append(next(tokens))
        texts.append(encoder.decode(ids))

    for _ in range(3):
        grow()
    process = subprocess.Popen([str(PICOGPT), "hi", "--n_tokens", "900", "--models_dir",
                                str(gpt2_124m.models_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, preexec_fn=default_sigint)
    # Ctrl-C once three tokens' text is out, however long that takes on this machine; os.read,
    # not stdout.read: a buffered read could take bytes into a buffer communicate() never reads
    three = texts[2].rstrip("\ufffd")  # streaming holds back part of a character
    first = []
    wait_until(lambda: first.append(os.read(process.stdout.fileno(), 1 << 16))
               or len(b"".join(first).decode("utf-8", errors="ignore")) >= len(three), process)
    first = b"".join(first)
    process.send_signal(signal.SIGINT)
    rest, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and b"Traceback" not in stderr
    printed = (first + rest).decode("utf-8")
    while len(texts[-1]) <= len(printed) and len(ids) < 900:
        grow()
    assert texts[-1].startswith(printed) and len(printed) >= len(three)


def test_an_unwritable_models_dir_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = picogpt("hi", "--models_dir", str(blocker / "models"))
    assert done.returncode == 1
    assert done.stderr.startswith(f"picogpt: cannot write to {blocker / 'models' / '124M'}")
    assert "Choose a folder you can write with --models_dir." in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--base_url", "not-a-url"], "is not a download address"),
    (["--seed", "-1", "--top_k", "5"], "seed=-1 is not a whole number from 0 up"),
    (["--seed", "abc", "--top_k", "5"], "seed='abc' is not a whole number"),
])
def test_more_bad_flags_are_one_line(tiny, tmp_path, args, message):
    models_dir = tmp_path / "m" if "--base_url" in args else tiny.models_dir
    done = picogpt("hi", "--models_dir", str(models_dir), *args)
    assert_one_line_error(done, message)


CHECKPOINT_FILES = ("checkpoint", DATA, "model.ckpt.index", "model.ckpt.meta")


def test_once_converted_the_checkpoint_files_can_go(tiny, tmp_path, serve):
    """Deleting the TensorFlow files after conversion leaves generate, --score and --explain
    working, with no network request (the server would record one)."""
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    commands = [("hi", "--n_tokens", "8"), ("The cat sat.", "--score", "--json"),
                ("hi", "--n_tokens", "3", "--explain", str(tmp_path / "page.html"))]
    before = [picogpt(*args, "--models_dir", str(models_dir)) for args in commands]
    for name in CHECKPOINT_FILES:
        (models_dir / "124M" / name).unlink()
    server = serve(tmp_path)  # serves nothing useful; it only counts requests
    for args, first in zip(commands, before):
        again = picogpt(*args, "--models_dir", str(models_dir), "--base_url", server.url)
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout
    assert server.requests == []


def test_a_converted_file_cut_short_is_caught_even_without_the_checkpoint(faulty, tiny,
                                                                           tmp_path):
    """Start-up compares each file's size with the manifest's, so a .npy that lost its end is
    caught before it changes any output: params/ is rebuilt, here from a fresh download
    because the checkpoint was deleted."""
    server = faulty()
    models_dir = tmp_path / "models"
    fetch(server, models_dir / "124M")
    first = picogpt_child("hi", "--n_tokens", "8", "--models_dir", str(models_dir))
    assert first.returncode == 0, first.stderr
    for name in CHECKPOINT_FILES:
        (models_dir / "124M" / name).unlink()
    tensor = models_dir / "124M" / "params" / "wte.npy"
    with open(tensor, "r+b") as f:  # the last row's last weight gone
        f.truncate(tensor.stat().st_size - 4)
    server.requests.clear()
    again = picogpt_child("hi", "--n_tokens", "8", "--models_dir", str(models_dir),
                          "--base_url", server.url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert sorted(name for name, _ in server.requests) == sorted(CHECKPOINT_FILES)
    assert "picogpt: converted" in again.stderr  # params/ was written anew


def test_the_first_conversion_says_what_it_does_and_what_deleting_frees(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    shutil.rmtree(models_dir / "124M" / "params")
    done = picogpt_child("hi", "--n_tokens", "2", "--models_dir", str(models_dir))
    assert done.returncode == 0, done.stderr
    freed = sum((models_dir / "124M" / name).stat().st_size for name in CHECKPOINT_FILES)
    assert done.stderr == (f"picogpt: converted {models_dir / '124M'} to params/. The "
                           f"TensorFlow checkpoint files (model.ckpt.*, checkpoint) are no "
                           f"longer needed: deleting them frees {freed / 1e6:,.0f} MB.\n")
    again = picogpt("hi", "--n_tokens", "2", "--models_dir", str(models_dir))
    assert again.stderr == "" and again.stdout == done.stdout


def test_ctrl_c_during_conversion_prints_one_line_and_the_next_run_converts(gpt2_124m,
                                                                            tmp_path):
    model_dir = tmp_path / "models" / "124M"
    model_dir.mkdir(parents=True)
    for name in FILES:
        os.link(gpt2_124m.model_dir / name, model_dir / name)  # no copy of ~500 MB
    process = subprocess.Popen([str(PICOGPT), "hi", "--n_tokens", "2", "--models_dir",
                                str(tmp_path / "models")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    # converting, a few tensors in
    wait_until(lambda: len(list(model_dir.glob("params.tmp-*/*.npy"))) >= 10, process)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and stdout == ""
    last = [text for text in stderr.replace("\r", "\n").splitlines() if text.strip()][-1]
    assert last == (f"picogpt: conversion stopped; nothing half-written is kept in {model_dir}, "
                    f"and the next run converts again.")
    assert "Traceback" not in stderr
    assert sorted(p.name for p in model_dir.iterdir() if p.name.startswith("params")) == []
    # what the next run finds: no params/, the checkpoint whole, so it converts again (the
    # conversion itself is test_the_first_conversion_says_what_it_does...'s; a second one of
    # 500 MB here would add ~4 s)
    assert read_params(model_dir) is None
    assert all((model_dir / name).read_bytes() == (gpt2_124m.model_dir / name).read_bytes()
               for name in CHECKPOINT_FILES)


def test_without_tensorflow_conversion_stops_with_one_line(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    shutil.rmtree(models_dir / "124M" / "params")
    code = ("import sys; sys.modules['tensorflow'] = None; from picogpt.cli.generate import main; "
            "main(sys.argv[1:])")  # None in sys.modules makes `import tensorflow` fail
    done = subprocess.run([str(Path(PICOGPT).parent / "python"), "-c", code, "hi",
                           "--models_dir", str(models_dir)], capture_output=True, text=True)
    assert_one_line_error(done, "needs TensorFlow, which is not installed")
    assert "or run a Hugging Face folder with --hf" in done.stderr


def test_416_for_a_part_file_larger_than_the_file_starts_it_again(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: "416" if name == DATA and n == 0 else "ok")
    model_dir = tmp_path / "124M"
    model_dir.mkdir()
    size = (tiny.model_dir / DATA).stat().st_size
    (model_dir / f"{DATA}.part").write_bytes(b"x" * (size + 10))  # more than the whole file
    fetch(server, model_dir)
    assert [r for r in server.requests if r[0] == DATA] == [(DATA, f"bytes={size + 10}-"),
                                                            (DATA, None)]
    assert_correct_or_absent(model_dir, tiny)
    assert (model_dir / DATA).exists()


def test_a_416_to_the_first_request_is_one_line_naming_the_status(faulty, tmp_path):
    """416 to a request that asked for no range (it was part.unlink() on no file: a
    traceback): the server's mistake, said once, not retried."""
    server = faulty(lambda name, n: "416")
    done = picogpt("hi", "--models_dir", str(tmp_path / "models"), "--base_url", server.url)
    assert_one_line_error(done, "answered HTTP 416: check the download address")
    assert len(server.requests) == 1


def test_a_206_to_the_first_request_is_thrown_away_and_fetched_again(faulty, tiny, tmp_path):
    """206 from byte 5 to a request without Range, before any .part exists: asked again, and
    the file ends whole (it was part.unlink() on no file: a traceback)."""
    server = faulty(lambda name, n: "206-unasked" if name == DATA and n == 0 else "ok")
    model_dir = tmp_path / "124M"
    fetch(server, model_dir)
    assert [r for n, r in server.requests if n == DATA] == [None, None]
    assert_correct_or_absent(model_dir, tiny)
    assert (model_dir / DATA).exists()


def test_a_resume_at_the_wrong_place_is_thrown_away_and_fetched_again(faulty, tiny, tmp_path):
    server = faulty(lambda name, n: ("drop" if n == 0 else "wrong-range" if n == 1 else "ok")
                    if name == DATA else "ok")
    model_dir = tmp_path / "124M"
    fetch(server, model_dir)
    ranges = [r for n, r in server.requests if n == DATA]
    assert ranges[0] is None and ranges[1].startswith("bytes=") and ranges[2] is None
    assert_correct_or_absent(model_dir, tiny)
    assert (model_dir / DATA).exists()


def test_another_4xx_is_one_line_naming_the_status(faulty, tmp_path):
    server = faulty(lambda name, n: "403")
    done = picogpt("hi", "--models_dir", str(tmp_path / "models"), "--base_url", server.url)
    assert_one_line_error(done, "answered HTTP 403: check the download address")
    assert len(server.requests) == 1  # a 4xx is not retried


def test_stale_conversion_folders_are_removed(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    shutil.rmtree(models_dir / "124M" / "params")
    stale = models_dir / "124M" / "params.tmp-99999"  # left by a run killed mid-conversion
    stale.mkdir()
    (stale / "wte.npy").write_bytes(b"half a file")
    done = picogpt_child("hi", "--n_tokens", "2", "--models_dir", str(models_dir))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (models_dir / "124M").glob("params*")) == ["params"]


def trained_copy(tiny, tmp_path, name: str = "mine") -> Path:
    """tiny's converted model as a folder picogpt.train would write: hparams.json, GPT-2's
    vocabulary and params/, no checkpoint to rebuild params/ from."""
    model_dir = tmp_path / "models" / name
    model_dir.mkdir(parents=True)
    for file in ("hparams.json", "encoder.json", "vocab.bpe"):
        shutil.copy(tiny.model_dir / file, model_dir / file)
    shutil.copytree(tiny.model_dir / "params", model_dir / "params")
    return model_dir


@pytest.mark.parametrize("how", ["fifo", "symlink_to_a_fifo", "fifo_manifest"])
def test_a_fifo_in_params_is_damage_not_a_hang(tiny, tmp_path, how):
    """A FIFO where a file of params/ should be (or a symlink to one outside the folder) would
    block the open forever: only regular files are opened, so it is a damaged params/."""
    model_dir = trained_copy(tiny, tmp_path)
    name = "manifest.json" if how == "fifo_manifest" else "ln_f.g.npy"
    (model_dir / "params" / name).unlink()
    if how == "symlink_to_a_fifo":
        os.mkfifo(tmp_path / "elsewhere")
        (model_dir / "params" / name).symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(model_dir / "params" / name)
    done = subprocess.run([str(PICOGPT), "hi", "--model_size", "mine", "--models_dir",
                           str(model_dir.parent)], capture_output=True, text=True, timeout=60)
    assert_one_line_error(done, f"{model_dir / 'params'} is missing or damaged, and {model_dir} "
                                "has no checkpoint to rebuild it from; train the model again.")


def test_params_may_be_symlinks_to_regular_files(tiny, tmp_path):
    """Judged by what a symlink leads to, not where: a tensor kept elsewhere still loads."""
    model_dir = trained_copy(tiny, tmp_path)
    first = picogpt("hi", "--n_tokens", "4", "--model_size", "mine", "--models_dir",
                    str(model_dir.parent))
    tensor = model_dir / "params" / "h0.attn.c_attn.w.npy"
    shutil.move(tensor, tmp_path / "kept.npy")
    tensor.symlink_to(tmp_path / "kept.npy")
    again = picogpt("hi", "--n_tokens", "4", "--model_size", "mine", "--models_dir",
                    str(model_dir.parent))
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr


@pytest.mark.parametrize("file, message", [
    ("hparams.json", "hparams.json is not GPT-2 hparams"),
    ("params/manifest.json", "is missing or damaged, and"),
    ("encoder.json", "encoder.json is not a BPE token table"),
])
def test_json_nested_too_deeply_in_a_model_folder_is_one_line(tiny, tmp_path, file, message):
    model_dir = trained_copy(tiny, tmp_path)
    (model_dir / file).write_text("[" * 100_000)
    done = picogpt("hi", "--model_size", "mine", "--models_dir", str(model_dir.parent))
    assert_one_line_error(done, message)


def test_a_huge_n_layer_in_hparams_json_is_one_line_before_anything_is_allocated(tiny,
                                                                                 tmp_path):
    model_dir = trained_copy(tiny, tmp_path)
    hparams = json.loads((model_dir / "hparams.json").read_text())
    (model_dir / "hparams.json").write_text(json.dumps({**hparams, "n_layer": 10**9}))

    def limited_memory() -> None:  # a loader that allocated for it would fail, not swap
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = picogpt_child("hi", "--model_size", "mine", "--models_dir", str(model_dir.parent),
                         preexec_fn=limited_memory)
    assert_one_line_error(done, "n_layer=1000000000) does not match the checkpoint: "
                                "h2.attn.c_attn.b should be (192,) but is no such tensor")


def spoiled(arrays: dict, name: str, value: float) -> list:
    """arrays as (name, array) pairs, with one number of name set to value."""
    changed = np.array(arrays[name])
    changed.flat[changed.size // 3] = value
    return [(key, changed if key == name else array) for key, array in arrays.items()]


@pytest.mark.parametrize("kind", ["released", "trained"])
def test_a_store_whose_weights_hold_nan_is_refused_in_one_line_at_every_start(tiny, tmp_path,
                                                                              kind):
    """params/ written from weights with a NaN (a damaged checkpoint, a training that
    diverged): its manifest records which tensor is not finite, and each start refuses it in
    one line, with no conversion or training again."""
    from picogpt.files.store import source_stamps, write_params

    if kind == "released":
        model_dir = tmp_path / "models" / "124M"
        shutil.copytree(tiny.model_dir, model_dir)
    else:
        model_dir = trained_copy(tiny, tmp_path)
    arrays = read_params(model_dir)
    write_params(model_dir, spoiled(arrays, "h1.mlp.c_proj.w", np.nan),
                 source=source_stamps(model_dir))
    manifest = json.loads((model_dir / "params" / "manifest.json").read_text())
    assert [name for name, meta in manifest["tensors"].items() if not meta["finite"]] == [
        "h1.mlp.c_proj.w"]
    fix = (f"Delete {model_dir} to download it again." if kind == "released" else
           "Train the model again.")
    for _ in range(2):
        done = picogpt("hi", "--model_size", model_dir.name, "--models_dir",
                       str(model_dir.parent))
        assert_one_line_error(done, f"{model_dir / 'params'} holds NaN or infinity in "
                                    f"h1.mlp.c_proj.w: a model with such weights gives no "
                                    f"numbers to sample from. {fix}")


def test_a_store_written_before_the_record_is_checked_at_each_start_and_never_written(
        tiny, tmp_path):
    """A manifest without "finite" (params/ of an earlier picogpt): each start checks every
    weight, an infinity included, and writes nothing into the folder (reading a model never
    writes to it: a clone or a read-only copy stays as it was)."""
    from picogpt.files.store import write_params

    model_dir = trained_copy(tiny, tmp_path)
    manifest_file = model_dir / "params" / "manifest.json"
    for value in (None, np.inf):
        arrays = read_params(model_dir)
        if value is not None:
            write_params(model_dir, spoiled(arrays, "wpe", value), source=None)
        manifest = json.loads(manifest_file.read_text())
        for meta in manifest["tensors"].values():
            del meta["finite"]
        manifest_file.write_text(json.dumps(manifest))
        before = manifest_file.read_bytes()
        done = picogpt("hi", "--n_tokens", "2", "--model_size", "mine", "--models_dir",
                       str(model_dir.parent))
        assert manifest_file.read_bytes() == before
        if value is None:
            assert done.returncode == 0, done.stderr
        else:
            assert_one_line_error(done, "holds NaN or infinity in wpe: ")


@pytest.mark.parametrize("name", [".lock", "checkpoint.part"])  # the first file it fetches
def test_a_fifo_where_picogpt_writes_is_one_line_not_a_hang(faulty, tmp_path, name):
    """A FIFO where a download writes (its lock, a file's .part) would block the open until
    something reads it: it is refused in one line."""
    server = faulty()
    model_dir = tmp_path / "models" / "124M"
    model_dir.mkdir(parents=True)
    os.mkfifo(model_dir / name)
    done = subprocess.run([str(PICOGPT), "hi", "--models_dir", str(model_dir.parent)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PICOGPT_BASE_URL": server.url})
    assert_one_line_error(done, f"{model_dir / name} is not a regular file (a FIFO, a socket, "
                                "a device, a folder or a broken symlink); delete it and run "
                                "again.")
