"""The hostile tester's table (issue 61), re-run: each case made in a scratch folder and run as
a user runs it, a child process with a time-out; a row holds when the command ends as the table
says (one `picogpt:` line and exit 1, or a run that works), with no traceback, in time.

    python -m scripts.checks.hostile [--work /tmp/hostile-table] [--only resume]

Prints one row per case: holds or FAILS, the exit code, the seconds, the last line. Exits 1 if a
row fails. Nothing is written outside --work (a new temporary folder when not given).
"""

import argparse
import functools
import gzip
import http.server
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from picogpt.files.chinese_poetry import ARCHIVE, COMMIT
from picogpt.files.store import save_model
from picogpt.transformer import init_params

PY = sys.executable
TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--n_ctx", "16", "--n_batch", "4"]
TOKENS = [*"春风秋月山水花鸟云雨江海天地日星", "<|unknown|>", "<|start|>"]


def run(args: list[str], cwd: Path, timeout: float = 120, stdin=None) -> tuple[int, str, float]:
    """args in a child process: (exit code, stderr, seconds); a time-out is exit code None."""
    start = time.perf_counter()
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=stdin if stdin is not None else subprocess.DEVNULL)
        return done.returncode, done.stderr, time.perf_counter() - start
    except subprocess.TimeoutExpired:
        return None, "(timed out)", time.perf_counter() - start


class Answers(http.server.SimpleHTTPRequestHandler):
    """Serves files from its directory, or answers every request with server.status."""

    def do_GET(self):
        if getattr(self.server, "status", None):
            self.send_response(self.server.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format, *args):
        pass


def serving(folder: Path, status: int | None = None) -> str:
    """A server on 127.0.0.1 for folder (or answering status); its address."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Answers, directory=str(folder)))
    server.status = status
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def sparse_archive(path: Path, size: int, name: str = "zeros") -> None:
    """A .tar.gz of a few hundred bytes holding one GNU sparse file of size bytes."""
    info = tarfile.TarInfo(f"chinese-poetry-{COMMIT}/{name}")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[386:410] = b"%011o\0%011o\0" % (size, 0)
    block[483:495] = b"%011o\0" % size
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    path.write_bytes(gzip.compress(bytes(block) + bytes(1024)))


def text_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    words = "river stone night wind moon light rain cloud hill road".split()
    path.write_text("\n\n".join(" ".join(rng.choice(words, 12)) for _ in range(80)) + "\n")
    return path


def stopped_run(work: Path) -> Path:
    """A text run stopped by SIGINT after its first checkpoint: work/models/d.part."""
    models = work / "models"
    args = [PY, "-m", "picogpt.train", str(text_file(work / "t.txt")), "--name", "d",
            "--models_dir", "models", "--vocab", "chars", *TINY, "--steps", "150",
            "--curve_every", "5"]
    child = subprocess.Popen(args, cwd=work, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    while not (models / "d.part" / "checkpoint.npz").is_file() and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    child.wait(60)
    return models / "d.part"


def edited(part: Path, **changes) -> None:
    record = json.loads((part / "run.json").read_text())
    for key, value in changes.items():
        (record["run"] if key in record["run"] else record["run"]["options"])[key] = value
    (part / "run.json").write_text(json.dumps(record))


def checkpoint_edited(part: Path, damage: str) -> None:
    path = part / "checkpoint.npz"
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    about = json.loads(str(arrays["about"]))
    if damage == "missing":
        del arrays[next(key for key in arrays if key.startswith("params/"))]
    elif damage == "shape":
        arrays["params/wpe"] = np.zeros((3, 3), np.float32)
    elif damage == "adam_step":
        about["adam_step"] = "x"
    elif damage == "step":
        about["step"] = about["adam_step"] = 10**9
    arrays["about"] = np.array(json.dumps(about))
    np.savez(path, **arrays)
    if damage == "fifo":
        path.unlink()
        os.mkfifo(path)


def couplet_folder(models: Path, name: str, hparams=None, vocab=TOKENS, extra=None) -> Path:
    shape = {"model": "transformer", "norm_first": True, "n_vocab": len(TOKENS), "n_ctx": 16,
             "n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 1}
    save_model(models / name, {**shape, **(hparams or {})},
               init_params(shape, np.random.default_rng(0)), None,
               {"chars.json": vocab, **(extra or {})})
    return models / name


def same_size_nan(path: Path) -> None:
    array = np.load(path)
    np.save(path, np.full_like(array, np.nan))


def cases(work: Path):
    """(group, case, expected, make) rows: make(folder) returns the command's args (and
    optionally stdin); expected is "one line" or "works"."""
    picogpt, train, data = [PY, "-m", "picogpt"], [PY, "-m", "picogpt.train"], [
        PY, "-m", "picogpt.data", "chinese-poetry"]

    def archive(kind):
        def make(folder):
            site = folder / "site"
            site.mkdir()
            if kind == "sparse":
                sparse_archive(site / ARCHIVE, 20 << 30)
            else:
                with tarfile.open(site / ARCHIVE, "w:gz") as tar:
                    info = tarfile.TarInfo(f"chinese-poetry-{COMMIT}/{'x' * 300}.json")
                    info.size = 2
                    tar.addfile(info, __import__("io").BytesIO(b"[]"))
            return [*data, str(folder / "cp"), "--base_url", serving(site)]
        return make

    def data_dir(kind):
        def make(folder):
            (folder / "empty").mkdir()
            target = {"dangling link": "dangling", "link to an empty folder": "link",
                      ".": ".", "name too long": "y" * 250}[kind]
            if kind == "dangling link":
                (folder / target).symlink_to(folder / "nowhere")
            elif kind == "link to an empty folder":
                (folder / target).symlink_to(folder / "empty")
            cwd_target = str(folder / "empty") if kind == "." else str(folder / target)
            return [*data, "." if kind == "." else cwd_target, "--base_url",
                    serving(folder, 404)], None, folder / "empty" if kind == "." else folder
        return make

    def resume(change, **settings):
        def make(folder):
            part = stopped_run(folder)
            name = "d"
            if change == "relative elsewhere":
                (folder / "elsewhere").mkdir()
                return [*train, "--resume", "--name", "d", "--models_dir",
                        str(folder / "models")], None, folder / "elsewhere"
            if change == "copied":
                part.rename(part.with_name("e.part"))
                name = "e"
            elif change == "escaping name":
                edited(part, name="../../escape_name")
            elif change == "run.json":
                edited(part, **settings)
            else:
                checkpoint_edited(part, change)
            return [*train, "--resume", "--name", name, "--models_dir", "models"]
        return make

    def couplet(kind, mode=()):
        def make(folder):
            models = folder / "models"
            if kind == "chars past rows":
                couplet_folder(models, "c", vocab=[*TOKENS[:-2], *"甲乙", *TOKENS[-2:]])
            elif kind == "NaN same size":
                same_size_nan(couplet_folder(models, "c") / "params" / "embed.npy")
            elif kind == "n_ctx 10**15":
                couplet_folder(models, "c", hparams={"n_ctx": 10**15})
            elif kind == "norm_first":
                couplet_folder(models, "c", hparams={"norm_first": "yes"})
            elif kind == "sampler.json top_k":
                couplet_folder(models, "c", extra={"sampler.json": {"top_k": 100000}})
            else:
                couplet_folder(models, "c")
            prompt = "春风秋月，山水花鸟" if mode else "春风" * 5000 if kind == "n_ctx 10**15" \
                else "春风秋月"
            flags = ["--top_k", "100000"] if kind == "flag top_k" else []
            return [*picogpt, prompt, "--model_size", "c", "--models_dir", "models", *flags,
                    *mode]
        return make

    def few_characters(folder):
        rng = np.random.default_rng(0)

        def line():
            return "".join(rng.choice(list("春风月"), 5))

        (folder / "few.txt").write_text("\n\n".join(
            f"{line()}，{line()}。\n{line()}，{line()}。" for _ in range(40)))
        return [*train, "--task", "couplet", "--text", "few.txt", "--name", "few",
                "--models_dir", "models", *TINY[:6], "--steps", "4", "--curve_every", "2",
                "--n_held_out", "4"]

    def surrogate(folder):
        tang = folder / "cp" / "全唐诗"
        tang.mkdir(parents=True)
        poems = [{"paragraphs": ["床前\\ud800明月光"]}] + [
            {"paragraphs": [f"春眠不覺曉{i}，處處聞啼鳥。"]} for i in range(30)]
        (tang / "poet.tang.0.json").write_text(json.dumps(poems).replace("\\\\u", "\\u"))
        return [*train, "--task", "poems", "--text", "cp", "--name", "p", "--models_dir",
                "models", *TINY, "--steps", "2", "--curve_every", "2", "--n_held_out", "4"]

    def reads(flag, kind):
        def make(folder):
            path = folder / "fifo"
            if kind == "FIFO":
                os.mkfifo(path)
            target = str(path) if kind == "FIFO" else kind
            if flag == "--text":
                return [*train, target, "--name", "z", "--models_dir", "models", "--vocab",
                        "chars"]
            return [*picogpt, "--prompt_file", target, "--models_dir", "models"]
        return make

    def first_answer(status):
        def make(folder):
            return [*picogpt, "hi", "--models_dir", "models", "--base_url",
                    serving(folder, status)]
        return make

    def store_flipped(folder):
        models = folder / "models"
        train_args = [*train, str(text_file(folder / "t.txt")), "--name", "m", "--models_dir",
                      "models", "--vocab", "chars", *TINY, "--steps", "2", "--curve_every", "2"]
        subprocess.run(train_args, cwd=folder, capture_output=True, check=True, timeout=300)
        wte = models / "m" / "params" / "wte.npy"
        data = bytearray(wte.read_bytes())
        for at in range(128, min(len(data), 128 + 8 * 4096), 4096):
            data[at : at + 4096] = bytes(255 - b for b in data[at : at + 4096])
        wte.write_bytes(bytes(data))
        return [*picogpt, "river", "--model_size", "m", "--models_dir", "models"]

    return [
        ("1 archive", "a 20 GB sparse member", "one line", archive("sparse")),
        ("2 resume", "relative models_dir, from elsewhere", "works",
         resume("relative elsewhere")),
        ("2 resume", "a copied .part", "works", resume("copied")),
        ("2 resume", "run.json names ../../escape_name", "works", resume("escaping name")),
        ("3 run.json", 'steps: "200"', "one line", resume("run.json", steps="200")),
        ("3 run.json", "steps: -5", "one line", resume("run.json", steps=-5)),
        ("3 run.json", "n_embd: 1e9", "one line", resume("run.json", n_embd=1e9)),
        ("3 run.json", "n_embd: 2**30 (memory)", "one line",
         resume("run.json", n_embd=2**30, n_head=1)),
        ("3 checkpoint", "a tensor missing", "one line", resume("missing")),
        ("3 checkpoint", "a wrong shape", "one line", resume("shape")),
        ("3 checkpoint", 'adam_step: "x"', "one line", resume("adam_step")),
        ("3 checkpoint", "step 10**9", "one line", resume("step")),
        ("3 checkpoint", "a FIFO", "one line", resume("fifo")),
        ("4 top_k", "--top_k 100000", "one line", couplet("flag top_k")),
        ("4 top_k", "sampler.json top_k 100000", "one line", couplet("sampler.json top_k")),
        ("4 top_k", "training on 3 characters", "works", few_characters),
        ("5 surrogate", "床前\\ud800明月光 in chinese-poetry", "works", surrogate),
        ("6 reads", "--text a FIFO", "one line", reads("--text", "FIFO")),
        ("6 reads", "--text /dev/zero", "one line", reads("--text", "/dev/zero")),
        ("6 reads", "--text /dev/urandom", "one line", reads("--text", "/dev/urandom")),
        ("6 reads", "--prompt_file /dev/zero", "one line", reads("--prompt_file", "/dev/zero")),
        ("6 reads", "--prompt_file a FIFO", "one line", reads("--prompt_file", "FIFO")),
        ("7 couplet", "chars.json past the rows", "one line", couplet("chars past rows")),
        ("7 couplet", "chars.json past the rows, --score", "one line",
         couplet("chars past rows", ["--score"])),
        ("7 couplet", "NaN at the same size", "one line", couplet("NaN same size")),
        ("7 couplet", "NaN at the same size, --score", "one line",
         couplet("NaN same size", ["--score"])),
        ("7 couplet", "n_ctx 10**15, a 10,000-character 上句", "one line",
         couplet("n_ctx 10**15")),
        ("7 store", "8 blocks of 4 KiB flipped in wte.npy", "one line", store_flipped),
        ("8 download", "416 to the first request", "one line", first_answer(416)),
        ("8 download", "206 to the first request", "one line", first_answer(206)),
        ("9 data DIR", "a dangling link", "one line", data_dir("dangling link")),
        ("9 data DIR", "a link to an empty folder", "one line",
         data_dir("link to an empty folder")),
        ("9 data DIR", ".", "one line", data_dir(".")),
        ("9 data DIR", "a name too long", "one line", data_dir("name too long")),
        ("9 archive", "a member name too long", "one line", archive("long name")),
        ("10 wording", "norm_first: 'yes'", "one line", couplet("norm_first")),
    ]


def holds(expected: str, code, err: str) -> bool:
    """Whether a run ended as its row says: one `picogpt:` line and exit 1, or exit 0."""
    if code is None or "Traceback" in err:
        return False
    if expected == "works":
        return code == 0
    lines = [line for line in err.splitlines() if line.startswith("picogpt: ")]
    return code == 1 and bool(lines) and err.strip().splitlines()[-1] == lines[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--only", default="", help="rows whose group or case holds this text")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="hostile-"))
    failed = 0
    print(f"{'item':13} {'case':42} {'holds':6} {'exit':>4} {'s':>6}  last line")
    for i, (group, case, expected, make) in enumerate(cases(work)):
        if args.only not in f"{group} {case}":
            continue
        folder = work / f"case{i:02d}"
        folder.mkdir(parents=True)
        made = make(folder)
        command, stdin, cwd = (made if isinstance(made, tuple) else (made, None, folder))
        code, err, seconds = run(command, cwd, stdin=stdin)
        ok = holds(expected, code, err)
        failed += not ok
        last = err.strip().splitlines()[-1] if err.strip() else ""
        print(f"{group:13} {case[:42]:42} {'holds' if ok else 'FAILS':6} {code!s:>4} "
              f"{seconds:6.1f}  {last[:150]}", flush=True)
    escaped = [path for path in work.parent.glob("escape_name*")]
    print(f"written outside the scratch folders: {escaped or 'nothing'}; rows failing: {failed}")
    sys.exit(1 if failed or escaped else 0)


if __name__ == "__main__":
    main()
