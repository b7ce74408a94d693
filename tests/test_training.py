"""A training run survives interruption (cli/training.py, cli/checkpoint.py): Ctrl-C keeps the
best model so far under its name and says how to go on, --resume ends where an uninterrupted
run of the same seed ends, and a save that fails keeps the parameters in a folder it names.
Every run is tiny: a few hundred tokens of a text the tests write, a vocabulary of 300."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_openai import assert_one_line_error, picogpt
from test_openai_faults import default_sigint

from picogpt import train as train_module
from picogpt.cli.train import main
from picogpt.files import store
from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.files.params import flatten
from picogpt.optim import AdamW

WORDS = ("river stone night wind moon light rain cloud hill road green cold long white "
         "old spring bird tree sea snow home far east west bright deep").split()


def write_text(path: Path, n_paragraphs: int = 60, seed: int = 0) -> Path:
    """Paragraphs of two lines of words, each paragraph different, separated by blank lines."""
    rng = np.random.default_rng(seed)
    paragraphs = [f"Poem {i}\n" + "\n".join(" ".join(rng.choice(WORDS, 5)) for _ in range(2))
                  for i in range(n_paragraphs)]
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return path


# --threads 1: no step is timed at start (cli/threads.py), so stop_at counts training steps only
SMALL = ["--n_vocab", "300", "--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--n_ctx",
         "16", "--n_batch", "4", "--steps", "12", "--curve_every", "4", "--lr", "0.02",
         "--threads", "1"]
TASK = ["--task", "induction", "--n_embd", "16", "--n_ctx", "16", "--n_batch", "4", "--steps",
        "12", "--curve_every", "4", "--warmup", "3", "--block_max", "6", "--lead_in_from", "6",
        "--lead_in_max", "4", "--threads", "1"]


def command(kind: str, text: Path, name: str, models_dir: Path) -> list[str]:
    """The command line of a tiny text run or task run."""
    where = ["--name", name, "--models_dir", str(models_dir)]
    return [str(text), *where, *SMALL] if kind == "text" else [*TASK, *where]


def assert_ends_in_one_line_error(done, message: str) -> None:
    """A run that trained, then failed as a user should see it: exit 1, no traceback, and one
    last line that says what happened."""
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("picogpt: ") and message in last, last


def stop_at(monkeypatch, step: int) -> None:
    """Ctrl-C (a KeyboardInterrupt) in the middle of training step `step`."""
    real, calls = train_module.loss_and_grads, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == step + 1:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train_module, "loss_and_grads", interrupted)


def assert_same_model(models_dir: Path, name: str, other_dir: Path, other: str) -> None:
    """The two folders hold the same parameters, bit for bit, and the same curve."""
    _, _, params = load_encoder_hparams_and_params(name, str(models_dir))
    _, _, theirs = load_encoder_hparams_and_params(other, str(other_dir))
    for key, array in flatten(params).items():
        np.testing.assert_array_equal(array, flatten(theirs)[key], err_msg=key)
    curve = json.loads((models_dir / name / "curve.json").read_text(encoding="utf-8"))
    their_curve = json.loads((other_dir / other / "curve.json").read_text(encoding="utf-8"))
    for key in ("loss", "measured", "best", "rising_after"):
        assert curve[key] == their_curve[key], key


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference: each kind of run trained to its end without a stop."""
    root = tmp_path_factory.mktemp("whole")
    text = write_text(root / "poems.txt")
    for kind in ("text", "task"):
        done = picogpt(*command(kind, text, kind, root / "models"), entry=main)
        assert done.returncode == 0, done.stderr
    return root / "models", text


@pytest.mark.parametrize("kind", ["text", "task"])
def test_ctrl_c_keeps_a_model_that_runs_and_resume_ends_as_an_uninterrupted_run(
        kind, uninterrupted, tmp_path, monkeypatch):
    """Stopped in step 6 (its last measurement at step 4): NAME is the best model measured so far
    and runs, its curve says where it stopped, the one line gives the step and the command; that
    command goes on from step 6 itself (the params and AdamW state of the moment it stopped, not
    step 4's) and ends with the very parameters of a run that was never stopped."""
    whole_dir, text = uninterrupted
    models_dir = tmp_path / "models"
    stop_at(monkeypatch, 6)
    done = picogpt(*command(kind, text, "stopped", models_dir), entry=main)
    monkeypatch.undo()
    assert done.returncode == 130 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    resume = f"python -m picogpt.train --resume --name stopped --models_dir {models_dir}"
    assert last.startswith("picogpt: training stopped at step 6 of 12; the model of step ")
    assert last.endswith(f"Continue from step 6 with: {resume}")
    curve = json.loads((models_dir / "stopped" / "curve.json").read_text(encoding="utf-8"))
    assert curve["stopped_at"] == 6 and curve["resume"] == resume
    prompt = "Poem" if kind == "text" else "t5 t17 t3"
    ran = picogpt(prompt, "--model_size", "stopped", "--models_dir", str(models_dir),
                  "--n_tokens", "3")
    assert ran.returncode == 0, ran.stderr
    finished = picogpt(*resume.split()[3:], entry=main)
    assert finished.returncode == 0, finished.stderr
    assert sorted(p.name for p in models_dir.iterdir()) == ["stopped"]  # .part is gone
    assert_same_model(models_dir, "stopped", whole_dir, kind)


CHILD = """
import signal, sys
from picogpt import train
real, calls = train.loss_and_grads, []
def paused(*args):
    calls.append(1)
    if len(calls) == 7:  # in step 6: wait for Ctrl-C
        print("paused in step 6", file=sys.stderr, flush=True)
        signal.pause()
    return real(*args)
train.loss_and_grads = paused
from picogpt.cli.train import main
main(sys.argv[1:])
"""


def test_a_real_sigint_keeps_the_model_and_its_command_finishes_the_run(uninterrupted, tmp_path):
    """The command's own process, stopped by SIGINT while it waits inside step 6 (no race with
    the end of training): exit 130, one line, a model that runs, and a command that finishes
    the run as if it had never stopped."""
    whole_dir, text = uninterrupted
    models_dir = tmp_path / "models"
    process = subprocess.Popen([sys.executable, "-c", CHILD, *command("text", text, "cut",
                                                                     models_dir)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=default_sigint)
    said = b""
    while b"paused in step 6" not in said:
        chunk = os.read(process.stderr.fileno(), 1 << 16)
        assert chunk, said.decode(errors="replace")
        said += chunk
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and b"Traceback" not in stderr
    last = stderr.decode().replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("picogpt: training stopped at step 6 of 12;")
    resume = last.split("Continue from step 6 with: ")[1]
    ran = picogpt("", "--model_size", "cut", "--models_dir", str(models_dir), "--n_tokens", "4")
    assert ran.returncode == 0, ran.stderr
    program, *words = resume.split()  # the line says `python`: run it with this interpreter
    assert program == "python"
    finished = subprocess.run([sys.executable, *words], capture_output=True, text=True,
                              timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert_same_model(models_dir, "cut", whole_dir, "text")


@pytest.mark.parametrize("kind", ["text", "task"])
def test_ctrl_c_after_the_first_measurement_of_a_long_run(kind, tmp_path):
    """python -m picogpt.train itself, 100,000 steps planned, SIGINT once the first measurement
    is printed: exit 130, a model that runs, the command that goes on."""
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    args = [*command(kind, text, "long", models_dir), "--steps", "100000", "--curve_every", "50"]
    process = subprocess.Popen([sys.executable, "-m", "picogpt.train", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=default_sigint)
    said = b""
    while b"step 0: " not in said:  # printed after the checkpoint is written
        chunk = os.read(process.stderr.fileno(), 1 << 16)
        assert chunk, said.decode(errors="replace")
        said += chunk
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and b"Traceback" not in stderr
    last = stderr.decode().replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("picogpt: training stopped at step ")
    assert last.endswith(f"with: python -m picogpt.train --resume --name long --models_dir "
                         f"{models_dir}")
    prompt = "Poem" if kind == "text" else "t5 t17 t3"
    ran = picogpt(prompt, "--model_size", "long", "--models_dir", str(models_dir), "--n_tokens",
                  "4")
    assert ran.returncode == 0, ran.stderr
    assert (models_dir / "long.part" / "checkpoint.npz").is_file()


def test_a_name_taken_while_training_keeps_the_model_in_the_part_folder(tmp_path, monkeypatch):
    """Someone makes models/NAME during the run: it keeps every byte, and the trained model is
    kept in NAME.part, which picogpt runs."""
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    real = AdamW.step

    def taken(*args, **kwargs):
        (models_dir / "mine").mkdir(exist_ok=True)
        (models_dir / "mine" / "notes.txt").write_text("not yours")
        return real(*args, **kwargs)

    monkeypatch.setattr(AdamW, "step", taken)
    done = picogpt(*command("text", text, "mine", models_dir), entry=main)
    assert_ends_in_one_line_error(done, f"cannot write the model to {models_dir / 'mine'}")
    assert f"is kept in {models_dir / 'mine.part'}, a model folder picogpt runs" in done.stderr
    assert sorted(p.name for p in (models_dir / "mine").iterdir()) == ["notes.txt"]
    ran = picogpt("Poem", "--model_size", "mine.part", "--models_dir", str(models_dir),
                  "--n_tokens", "4")
    assert ran.returncode == 0, ran.stderr


def test_a_full_disk_at_the_end_keeps_the_parameters_and_resume_writes_them(
        uninterrupted, tmp_path, monkeypatch):
    """Writing any params/ fails with ENOSPC: the run says where its parameters are and the
    command that writes them; once there is room, that command writes the model the run
    trained, the same as a run that never failed."""
    whole_dir, text = uninterrupted
    models_dir = tmp_path / "models"

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "write_tensors", full)
    done = picogpt(*command("text", text, "full", models_dir), entry=main)
    monkeypatch.undo()
    resume = f"python -m picogpt.train --resume --name full --models_dir {models_dir}"
    assert_ends_in_one_line_error(done, "(No space left on device); its parameters are kept in "
                                f"{models_dir / 'full.part'}/checkpoint.npz; free some space, "
                                f"then finish with: {resume}")
    assert not (models_dir / "full").exists()
    finished = picogpt(*resume.split()[3:], entry=main)
    assert finished.returncode == 0, finished.stderr
    assert_same_model(models_dir, "full", whole_dir, "text")


def test_a_stopped_run_is_not_started_again_and_resume_takes_no_other_settings(tmp_path,
                                                                                monkeypatch):
    """A new run of a stopped run's name is refused (its model, then its folder in progress),
    as are --resume with a setting, with a text that changed, and of a run that is not there."""
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    stop_at(monkeypatch, 5)
    assert picogpt(*command("text", text, "half", models_dir), entry=main).returncode == 130
    monkeypatch.undo()
    resume = f"python -m picogpt.train --resume --name half --models_dir {models_dir}"
    started = picogpt(str(text), "--name", "half", "--models_dir", str(models_dir), *SMALL,
                      entry=main)
    assert_one_line_error(started, "already exists")
    (models_dir / "half").rename(models_dir / "moved")
    started = picogpt(str(text), "--name", "half", "--models_dir", str(models_dir), *SMALL,
                      entry=main)
    assert_one_line_error(started, f"holds a run of half that did not finish; continue it with: "
                                   f"{resume}")
    extra = picogpt(*resume.split()[3:], "--lr", "0.1", entry=main)
    assert_one_line_error(extra, "--resume goes on with the settings the run began with; drop "
                                 "--lr.")
    text.write_text(text.read_text() + "\n\nPoem more\nnew words\n")
    changed = picogpt(*resume.split()[3:], entry=main)
    assert_one_line_error(changed, "changed since the run began")
    missing = picogpt("--resume", "--name", "nothing", "--models_dir", str(models_dir),
                      entry=main)
    assert_one_line_error(missing, "there is no stopped run of nothing in")


def test_a_stopped_poems_run_resumes_to_its_own_summary(tmp_path, monkeypatch):
    """A poems run stopped at step 5 and resumed: exit 0 and the poems task's closing lines
    (the resume used to reach the induction task's summary and end in KeyError: 'first')."""
    from test_poems import verse_text

    text = tmp_path / "verse.txt"
    text.write_text(verse_text(80), encoding="utf-8")
    models_dir = tmp_path / "models"
    flags = ["--task", "poems", "--text", str(text), "--name", "shi", "--models_dir",
             str(models_dir), "--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--n_ctx", "16",
             "--n_batch", "4", "--steps", "12", "--curve_every", "4", "--n_held_out", "10"]
    stop_at(monkeypatch, 5)
    assert picogpt(*flags, entry=main).returncode == 130
    monkeypatch.undo()
    done = picogpt("--resume", "--name", "shi", "--models_dir", str(models_dir), entry=main)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "picogpt: held-out verses: " in done.stderr
    assert "句 that keep the prompt's length" in done.stderr
    assert json.loads((models_dir / "shi" / "sampler.json").read_text()) == {"top_k": 8}


@pytest.mark.parametrize("lr", ["100", "10"])
def test_a_run_whose_loss_runs_away_stops_in_one_line_and_keeps_its_last_good_model(lr,
                                                                                     tmp_path):
    """--lr 100 or 10 on a small character model: the loss leaves the first step's far behind
    (or stops being a number), and the run ends at once: exit 1, one line that names the step
    and says to lower --lr, no traceback and no overflow warning, no folder in progress left
    to resume into the same divergence; the model of the last good measurement runs."""
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    done = picogpt(str(text), "--name", "wild", "--models_dir", str(models_dir), "--vocab",
                   "chars", "--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--n_ctx", "16",
                   "--n_batch", "4", "--steps", "60", "--curve_every", "1", "--lr", lr,
                   entry=main)
    assert_ends_in_one_line_error(done, "training diverged at step ")
    assert f"the learning rate --lr {lr} is too high" in done.stderr
    assert "Warning" not in done.stderr and "by heart" not in done.stderr
    assert not (models_dir / "wild.part").exists()
    curve = json.loads((models_dir / "wild" / "curve.json").read_text(encoding="utf-8"))
    assert curve["diverged_at"] >= 1 and all(np.isfinite(m["held_out"])
                                             for m in curve["measured"])
    ran = picogpt("Poem", "--model_size", "wild", "--models_dir", str(models_dir), "--n_tokens",
                  "3")
    assert ran.returncode == 0, ran.stderr


def test_resume_false_is_no_resume_and_a_run_training_now_is_named(tmp_path, monkeypatch):
    """--resume=false starts a new run, which a stopped run of the name refuses; a run whose
    folder in progress is locked by a training process is named as training now, both when a
    new run of its name starts and when --resume is asked of it."""
    import fcntl

    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    stop_at(monkeypatch, 5)
    assert picogpt(*command("text", text, "half", models_dir), entry=main).returncode == 130
    monkeypatch.undo()
    (models_dir / "half").rename(models_dir / "moved")
    again = picogpt(*command("text", text, "half", models_dir), "--resume=false", entry=main)
    assert_one_line_error(again, "holds a run of half that did not finish; continue it with")
    with open(models_dir / "half.part" / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as the process that trains it holds it
        for args in (command("text", text, "half", models_dir),
                     ["--resume", "--name", "half", "--models_dir", str(models_dir)]):
            busy = picogpt(*args, entry=main)
            assert_one_line_error(busy, "a run of half is training now in")


def test_a_damaged_checkpoint_or_run_json_is_one_line_that_names_the_file(tmp_path,
                                                                          monkeypatch):
    """A truncated, empty or foreign checkpoint.npz, a run.json that is not JSON or lacks a
    setting: --resume says which file, and that the run can start again, in one line."""
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    stop_at(monkeypatch, 5)
    assert picogpt(*command("text", text, "d", models_dir), entry=main).returncode == 130
    monkeypatch.undo()
    part = models_dir / "d.part"
    checkpoint, run_json = (part / "checkpoint.npz").read_bytes(), (part / "run.json").read_text()
    resume = ["--resume", "--name", "d", "--models_dir", str(models_dir)]
    for damage in (checkpoint[: len(checkpoint) // 2], b"", b"not a zip file at all"):
        (part / "checkpoint.npz").write_bytes(damage)
        done = picogpt(*resume, entry=main)
        assert_one_line_error(done, f"cannot go on from {part / 'checkpoint.npz'}: it is damaged")
    (part / "checkpoint.npz").write_bytes(checkpoint)
    record = json.loads(run_json)
    del record["run"]["n_ctx"]
    for damage in ("{not json", json.dumps(record), "[" * 100_000):
        (part / "run.json").write_text(damage)
        done = picogpt(*resume, entry=main)
        assert_one_line_error(done, f"{part / 'run.json'} does not describe a run that can go on")
    (part / "run.json").write_text(run_json)
    assert picogpt(*resume, entry=main).returncode == 0


def test_a_run_and_checkpoint_from_before_optimizers_were_values_resume_bit_for_bit(
        uninterrupted, tmp_path, monkeypatch):
    """A run stopped in step 6 whose run.json and checkpoint.npz are then written as picogpt wrote
    them before the optimizer was a value (no "optimizer" in run.json; AdamW's m/ and v/ beside
    adam_step in the checkpoint): --resume reads them as AdamW's defaults and state, and ends
    with the very parameters of a run never stopped."""
    whole_dir, text = uninterrupted
    models_dir = tmp_path / "models"
    stop_at(monkeypatch, 6)
    assert picogpt(*command("text", text, "old", models_dir), entry=main).returncode == 130
    monkeypatch.undo()
    part = models_dir / "old.part"
    record = json.loads((part / "run.json").read_text())
    assert record["run"].pop("optimizer")["name"] == "adamw"
    (part / "run.json").write_text(json.dumps(record))
    with np.load(part / "checkpoint.npz") as stored:
        arrays = {key: stored[key] for key in stored.files}
    about = json.loads(str(arrays.pop("about")))
    about["adam_step"] = about.pop("optimizer_step")
    old = {key.removeprefix("optimizer/").replace(".", "/", 1) if key.startswith("optimizer/")
           else key: array for key, array in arrays.items()}
    assert {key.split("/")[0] for key in old} == {"params", "best", "m", "v"}
    np.savez(part / "checkpoint.npz", about=np.array(json.dumps(about)), **old)
    finished = picogpt("--resume", "--name", "old", "--models_dir", str(models_dir), entry=main)
    assert finished.returncode == 0, finished.stderr
    assert_same_model(models_dir, "old", whole_dir, "text")


def test_the_optimizers_flags_are_checked_first_and_kept_in_run_json(tmp_path, monkeypatch):
    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    for flags, message in ((["--optimizer", "sgd"], "optimizer='sgd' is not an optimizer "
                            "picogpt knows; the optimizers are adamw, muon."),
                           (["--decay", "matrices,tables"], "decay='matrices,tables' is not a "
                            "list of parameter groups; give some of matrices, embeddings, "
                            "gains, biases, comma-separated."),
                           (["--beta2", "1"], "beta2=1 must be a number from 0 up to, but not "
                            "including, 1."),
                           (["--clip", "0"], "clip=0 must be a number above 0")):
        done = picogpt(*command("text", text, "opt", models_dir), *flags, entry=main)
        assert_one_line_error(done, message)
    stop_at(monkeypatch, 6)
    done = picogpt(*command("text", text, "opt", models_dir), "--weight_decay", "0.05",
                   "--decay", "matrices,gains", "--clip", "1.5", "--beta2", "0.99", entry=main)
    assert done.returncode == 130, done.stderr
    record = json.loads((models_dir / "opt.part" / "run.json").read_text())
    assert record["run"]["optimizer"] == {"name": "adamw", "betas": [0.9, 0.99], "eps": 1e-8,
                                          "weight_decay": 0.05, "decay": ["matrices", "gains"],
                                          "clip": 1.5}


IMPORTING = """
import os, signal, sys
sys.argv = ["-m", *sys.argv[1:]]  # as python -m picogpt.train sets it while finding the module
import picogpt  # the first of the command's modules to load
os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the rest load
import picogpt.train.__main__
"""


def test_ctrl_c_while_the_modules_load_ends_quietly():
    """Ctrl-C in the first moments of python -m picogpt.train, before the command runs: exit 130
    and no KeyboardInterrupt traceback (it printed one); a program that imports picogpt keeps
    Python's own Ctrl-C."""
    done = subprocess.run([sys.executable, "-c", IMPORTING, "--task", "induction"],
                          capture_output=True, text=True, timeout=120, preexec_fn=default_sigint)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    library = subprocess.run([sys.executable, "-c", "import signal, picogpt; print(signal."
                              "getsignal(signal.SIGINT) is signal.default_int_handler)"],
                             capture_output=True, text=True, timeout=120)
    assert library.stdout.strip() == "True", library.stderr


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A tiny text run stopped at step 5: its models folder (d.part, and d, the best model so
    far) and its text. Tests copy it."""
    root = tmp_path_factory.mktemp("stopped")
    text = write_text(root / "poems.txt")
    with pytest.MonkeyPatch.context() as patch:
        stop_at(patch, 5)
        assert picogpt(*command("text", text, "d", root / "models"), entry=main).returncode == 130
    return root / "models"


def copy_of(stopped_run: Path, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A copy of the stopped run's models folder, as if it had run there: the folder, d.part,
    and the resume flags."""
    import shutil

    models_dir = tmp_path / "models"
    shutil.copytree(stopped_run, models_dir)
    edit_run_json(models_dir / "d.part", models_dir=str(models_dir))  # as if it ran here
    return models_dir, models_dir / "d.part", ["--resume", "--name", "d", "--models_dir",
                                               str(models_dir)]


def edit_run_json(part: Path, **changes) -> None:
    record = json.loads((part / "run.json").read_text())
    for key, value in changes.items():
        if key in record["run"]:
            record["run"][key] = value
        else:
            record["run"]["options"][key] = value
    (part / "run.json").write_text(json.dumps(record))


@pytest.mark.parametrize("case", ["relative models_dir", "copied", "escaping name"])
def test_resume_goes_on_where_the_flags_say_whatever_run_json_names(stopped_run, tmp_path,
                                                                     monkeypatch, case):
    """--resume --name N --models_dir D resumes D/N.part: a run.json that names the folder as
    relative to another directory, a copied .part, or a name that climbs out of D are said in
    one line and rewritten; nothing outside D is written, and the original run is not used up."""
    models_dir, part, resume = copy_of(stopped_run, tmp_path)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    name = "d"
    if case == "relative models_dir":
        edit_run_json(part, models_dir="models")  # as the default --models_dir records it
    elif case == "copied":
        name = "e"
        (models_dir / "d.part").rename(models_dir / "e.part")  # the copy; d.part is gone
        resume[2] = name
    else:
        edit_run_json(part, name="../../escape_name")
    done = picogpt(*resume, entry=main)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{models_dir / f'{name}.part' / 'run.json'} names the run" in done.stderr
    assert (models_dir / name / "curve.json").is_file() and not (models_dir / f"{name}.part"
                                                                  ).exists()
    assert sorted(path.name for path in tmp_path.rglob("*") if "escape" in path.name) == []
    assert list((tmp_path / "elsewhere").iterdir()) == []
    if case == "copied":  # the original's model folder is its own still
        assert (models_dir / "d" / "curve.json").read_bytes() == (
            stopped_run / "d" / "curve.json").read_bytes()


@pytest.mark.parametrize("setting", [{"steps": "200"}, {"steps": -5}, {"n_embd": 1e9},
                                     {"n_embd": 1 << 24, "n_head": 1}, {"n_vocab": -3}])
def test_resume_checks_run_json_as_it_checks_the_flags(stopped_run, tmp_path, monkeypatch,
                                                       setting):
    """run.json's settings pass the checks a new run's flags pass (the task's, and the memory
    check before any weight is made): one line that names the file, exit 1, nothing trained."""
    models_dir, part, resume = copy_of(stopped_run, tmp_path)
    edit_run_json(part, **setting)
    planned = []
    monkeypatch.setattr("picogpt.cli.train.train_run", lambda *args, **kw: planned.append(1))
    done = picogpt(*resume, entry=main)
    assert_one_line_error(done, f"{part / 'run.json'} holds a setting that cannot train (")
    key = next(iter(setting))
    assert f"{key}=" in done.stderr or "GiB" in done.stderr
    assert planned == []


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("damage", ["a tensor missing", "a wrong shape", "optimizer_step 'x'",
                                    "step 10**9", "a FIFO"])
def test_resume_checks_the_checkpoint_against_the_run_before_a_step(stopped_run, tmp_path,
                                                                    damage):
    """A checkpoint.npz that lacks a tensor, holds one of another shape, a step that is not one
    of the run's, or that is a FIFO: one line naming it, exit 1, never a hang or a traceback."""
    models_dir, part, resume = copy_of(stopped_run, tmp_path)
    path = part / "checkpoint.npz"
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    about = json.loads(str(arrays["about"]))
    if damage == "a tensor missing":
        del arrays["optimizer/m.wte"]
    elif damage == "a wrong shape":
        arrays["params/wpe"] = np.zeros((3, 3), np.float32)
    elif damage == "optimizer_step 'x'":
        about["optimizer_step"] = "x"
    elif damage == "step 10**9":
        about["step"] = about["optimizer_step"] = 10**9
    arrays["about"] = np.array(json.dumps(about))
    np.savez(path, **arrays)
    if damage == "a FIFO":
        fifo(path)
    done = picogpt(*resume, entry=main)
    said = {"a tensor missing": "it lacks optimizer/m.wte", "a wrong shape": "its params/wpe is "
            "(3, 3) float32, where the run's is (16, 16) float32", "optimizer_step 'x'": "its "
            "optimizer_step is "
            "'x', not a step from 0 to the run's 12", "step 10**9": "its step is 1000000000",
            "a FIFO": "it is not a regular file"}[damage]
    assert_one_line_error(done, f"cannot go on from {path}: {said}")


@pytest.mark.parametrize("when", ["the step-0 checkpoint", "keeping a stop at step 5"])
def test_a_ctrl_c_while_a_checkpoint_is_written_says_what_is_left(tmp_path, monkeypatch, when):
    """Ctrl-C inside np.savez (where the run's own stop handling cannot say what it kept): at
    step 0 nothing is left and the line says so; after a checkpoint, the line names it and the
    command that continues (it said "nothing was written" and kept the .part)."""
    import picogpt.cli.checkpoint as checkpoint

    text = write_text(tmp_path / "poems.txt")
    models_dir = tmp_path / "models"
    real, calls = np.savez, []

    def savez(*args, **kwargs):
        calls.append(1)
        if when == "the step-0 checkpoint" or len(calls) == 3:  # steps 0 and 4, then the stop
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint.np, "savez", savez)
    if when != "the step-0 checkpoint":
        stop_at(monkeypatch, 5)
    done = picogpt(*command("text", text, "d", models_dir), entry=main)
    assert done.returncode == 130 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    if when == "the step-0 checkpoint":
        assert last == "picogpt: training stopped before its first measurement; nothing was " \
                       "written."
        assert list(models_dir.iterdir()) == []
    else:
        assert last.startswith(f"picogpt: training stopped; {models_dir / 'd.part'} keeps its "
                               "last checkpoint. Continue with: python -m picogpt.train --resume")
        monkeypatch.undo()
        resumed = picogpt("--resume", "--name", "d", "--models_dir", str(models_dir), entry=main)
        assert resumed.returncode == 0, resumed.stderr


def test_fortunes_that_changed_under_a_resume_are_named(tmp_path, monkeypatch):
    """A poems run on fortunes-zh (no --text) whose poems are not the ones it began with: the
    line names fortunes-zh (it said "None changed since the run began")."""
    from dataclasses import asdict

    from test_poems import verse_text

    from picogpt.files import poems as files_poems
    from picogpt.tasks import poems

    (tmp_path / "fortunes").mkdir()
    (tmp_path / "fortunes" / "tang300").write_text("\n%\n".join(verse_text(40).split("\n\n")),
                                                    encoding="utf-8")
    monkeypatch.setattr(files_poems, "FORTUNES", tmp_path / "fortunes")

    part = tmp_path / "models" / "shi.part"
    part.mkdir(parents=True)
    settings = {**poems.TASK.defaults("fortunes"), "warmup": 1, "task": "poems", "name": "shi",
                "models_dir": str(tmp_path / "models"), "text": None,
                "options": asdict(poems.TASK.options())}
    (part / "run.json").write_text(json.dumps({"format": 2, "id": "0" * 32, "run": settings,
                                               "digest": "0" * 64}))
    done = picogpt("--resume", "--name", "shi", "--models_dir", str(tmp_path / "models"),
                   entry=main)
    assert_one_line_error(done, "fortunes-zh's poems changed since the run began")
    assert "None" not in done.stderr
