"""The induction task (`python -m picogpt.train --task induction`): its windows, its vocabulary,
its checks, and a CI-sized run in which the second copy of a run becomes easier than the first
at every copy distance, which no head that copies from a fixed distance can do."""

import json

import numpy as np
import pytest
from test_openai import assert_one_line_error, picogpt

from picogpt import train as train_module
from picogpt.cli.train import main
from picogpt.files.openai import load_encoder_hparams_and_params
from picogpt.optim import AdamW
from picogpt.tasks.induction import ablate, periodic_windows, task_batches, vocab_files
from picogpt.tasks.probes import copy_probes, measure_copies

# A CI-sized run: the recipe's data, vocabulary and batch on a smaller shape, fewer steps. In
# 600 steps the heads form for copies that follow the start token (the lead-in, from step 300,
# has not yet taught them to find a copy that starts later).
CI = {"n_embd": 32, "n_ctx": 32, "n_batch": 32, "steps": 600, "warmup": 200,
      "block_max": 12, "lead_in_from": 300, "lead_in_max": 8, "curve_every": 100}


def flags(settings: dict) -> list[str]:
    return [word for key, value in settings.items() for word in (f"--{key}", str(value))]


def period(row: np.ndarray, low: int, high: int) -> int | None:
    """The p in low .. high for which row[1:] is a block of p distinct tokens repeated, or
    None: a row whose block starts right after the start token."""
    for p in range(low, high + 1):
        body = row[1:]
        if len(set(body[:p].tolist())) == p and np.array_equal(body[p:], body[:-p]):
            return p
    return None


def test_a_window_is_the_start_token_then_a_block_repeated_at_periods_that_vary():
    """The start token is the vocabulary's last id, at position 0 and nowhere else; the rest is
    a block of distinct tokens tiled, its length anywhere from block_min to block_max."""
    rows = periodic_windows(400, 65, 64, np.random.default_rng(0), (4, 32))
    assert rows.shape == (400, 65)
    assert np.all(rows[:, 0] == 63) and not np.any(rows[:, 1:] == 63)
    periods = [period(row, 4, 32) for row in rows]
    assert None not in periods
    assert set(periods) == set(range(4, 33))  # every length, none fixed


def test_the_lead_in_starts_at_its_step_in_about_half_the_windows():
    """Before lead_in_from every block starts right after the start token; from that step on,
    about half the windows have 1 .. lead_in_max random tokens first (0 in 1/25 of that half)."""
    windows = task_batches(200, 48, 64, np.random.default_rng(1), (4, 16), 3, 24)
    for step in range(6):
        inputs, targets = next(windows)
        np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
        rows = np.concatenate([inputs, targets[:, -1:]], axis=1)
        shifted = np.mean([period(row, 4, 16) is None for row in rows])
        if step < 3:
            assert shifted == 0, step
        else:
            assert 0.38 < shifted < 0.58, (step, shifted)  # 0.48 expected


def test_the_vocabulary_names_its_tokens_and_ends_with_the_start_token(tmp_path):
    from picogpt.files.folder_vocab import read_vocab

    files = vocab_files(64)
    assert files["vocab.txt"].split("\n")[:3] == ["t0", "t1", "t2"]
    assert files["vocab.txt"].split("\n")[-2:] == ["[CLS]", ""]
    for name, value in files.items():
        (tmp_path / name).write_text(value if isinstance(value, str) else json.dumps(value))
    vocab = read_vocab(tmp_path, "train the model again")
    assert vocab.n_vocab == 64 and vocab.start == 63 and vocab.end is None
    assert vocab.unknown is None
    assert vocab.encode("t5 t17 t62") == [5, 17, 62]
    assert vocab.prompt_ids("t5 t17") == [63, 5, 17]
    assert vocab.decode([5, 17, 3]) == "t5 t17 t3"


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """The command's CI-sized run, and the model it wrote."""
    models_dir = tmp_path_factory.mktemp("induction")
    done = picogpt("--task", "induction", "--name", "ci", "--models_dir", str(models_dir),
                   *flags(CI), entry=main)
    assert done.returncode == 0, done.stderr
    return models_dir, done


def plain_probes() -> list[dict]:
    """The held-out probes whose run follows the start token: 5, 8 and 13 tokens, twice."""
    return [g for g in copy_probes(CI["n_ctx"], 64) if g["lead_in"] == 0]


def test_the_second_copy_becomes_easier_at_every_distance_which_a_fixed_distance_cannot(ci_run):
    """On held-out runs of 5, 8 and 13 tokens copied once, the model predicts the second copy
    far better than the first (which stays near a uniform guess, ln 63 = 4.14 nats); a head
    that copies from one fixed distance back would get most of the probes wrong."""
    models_dir, _ = ci_run
    _, hparams, params = load_encoder_hparams_and_params("ci", str(models_dir))
    groups = plain_probes()
    assert [g["n"] for g in groups] == [5, 8, 13]
    measured = measure_copies(params, hparams["n_head"], groups)
    for copy in measured["copies"]:  # 4.2-4.4 -> 0.8-1.7 when written
        assert copy["first"] > np.log(63) - 0.5, copy
        assert copy["second"] < copy["first"] - 2, copy
    texts = [text for group in groups for text in group["texts"]]
    for distance in range(1, CI["n_ctx"]):  # the shortcut: the token `distance` back
        right = [np.mean([i >= distance and t["ids"][i] == t["ids"][i - distance]
                          for i in t["second"] + 1]) for t in texts]
        assert np.mean(right) < 0.4, distance


def test_the_curve_holds_each_copy_length_with_and_without_lead_in_and_three_scores(ci_run):
    models_dir, done = ci_run
    curve = json.loads((models_dir / "ci" / "curve.json").read_text())
    steps = [m["step"] for m in curve["measured"]]
    assert steps == list(range(0, CI["steps"] + 1, CI["curve_every"]))
    assert len(curve["loss"]) == CI["steps"]
    assert curve["settings"]["lead_in_from"] == CI["lead_in_from"]
    last = curve["measured"][-1]
    assert [(c["n"], c["lead_in"]) for c in last["copies"]] == [(5, 0), (5, 20), (8, 0),
                                                                (8, 15), (13, 0), (13, 5)]
    for kind in ("previous", "induction", "first_token"):
        assert np.shape(last[kind]) == (2, 2), kind
    printed = [line for line in done.stderr.splitlines() if line.startswith("step ")]
    assert len(printed) == len(steps)
    assert printed[-1].startswith(f"step {CI['steps']}: training loss ")
    assert "best heads: previous" in printed[-1]


def test_zeroing_the_previous_token_head_undoes_the_easy_second_copy(ci_run):
    """The best layer-0 previous-token head silenced, the second copy is hard again."""
    models_dir, _ = ci_run
    _, hparams, params = load_encoder_hparams_and_params("ci", str(models_dir))
    n_head = hparams["n_head"]
    before = measure_copies(params, n_head, plain_probes())
    head = int(np.argmax(before["previous"][0]))
    after = measure_copies(ablate(params, 0, head, n_head), n_head, plain_probes())
    assert after["second"] > before["second"] + 1.5  # 1.4 -> 3.8 when written


def test_ablate_zeroes_only_that_heads_rows_and_changes_nothing_given():
    rng = np.random.default_rng(0)
    params = train_module.init_params({"n_vocab": 10, "n_ctx": 8, "n_embd": 8, "n_head": 2,
                                       "n_layer": 2}, rng)
    kept = params["blocks"][1]["attn"]["c_proj"]["w"].copy()
    silenced = ablate(params, 1, 1, 2)
    w = silenced["blocks"][1]["attn"]["c_proj"]["w"]
    assert not w[4:].any() and np.array_equal(w[:4], kept[:4])
    np.testing.assert_array_equal(params["blocks"][1]["attn"]["c_proj"]["w"], kept)
    assert silenced["blocks"][0] is params["blocks"][0]


def test_the_model_folder_runs_in_the_picogpt_command(ci_run, tmp_path):
    """Generation, scoring and the --explain page on t-tokens after [CLS]."""
    models_dir, done = ci_run
    model = ["--model_size", "ci", "--models_dir", str(models_dir)]
    assert f"--model_size ci --models_dir {models_dir}" in done.stderr.splitlines()[-1]
    ran = picogpt("t5 t17 t3 t9 t5 t17 t3", *model, "--n_tokens", "3")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == " t9 t5 t17\n"  # the run, spaced after "t3" as decode spaces it
    scored = picogpt("t5 t17 t3 t9 t5 t17 t3 t9", *model, "--score")
    assert scored.returncode == 0, scored.stderr
    page = tmp_path / "page.html"
    explained = picogpt("t5 t17 t3 t9 t5 t17", *model, "--n_tokens", "2", "--explain",
                        str(page))
    assert explained.returncode == 0, explained.stderr
    assert page.stat().st_size > 10_000
    unknown = picogpt("t5 x7", *model)
    assert_one_line_error(unknown, "x7")


def test_the_warmup_flag_sets_the_rise_of_the_learning_rate(monkeypatch, tmp_path):
    """--warmup 5 of 12 steps: the rates handed to AdamW rise linearly to lr over the first 5,
    then fall."""
    seen = []
    real = AdamW.step

    def recording(self, params, grads, state, lr, groups):
        seen.append(lr)
        return real(self, params, grads, state, lr, groups)

    monkeypatch.setattr(AdamW, "step", recording)
    done = picogpt("--task", "induction", "--models_dir", str(tmp_path), "--steps", "12",
                   "--warmup", "5", "--lr", "0.02", "--n_embd", "16", "--n_ctx", "16",
                   "--n_batch", "2", "--block_max", "8", "--lead_in_max", "4",
                   "--curve_every", "12", entry=main)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(seen[:5], 0.02 * np.arange(1, 6) / 5)
    assert np.all(np.diff(seen[4:]) < 0) and seen[-1] == pytest.approx(0.002)


@pytest.mark.parametrize("args, message", [
    (["--task", "copy"], "task='copy' is not a task picogpt knows; the tasks are text, "
                         "induction, poems"),
    (["book.txt", "--task", "induction"], "reads no text; drop 'book.txt'"),
    (["--task", "induction", "--warmup", "2000"], "warmup=2000 is not a whole number from 0 to "
                                                  "1600"),
    (["--task", "induction", "--warmup", "-1"], "warmup=-1 is not a whole number"),
    (["--task", "induction", "--block_min", "0"], "block_min=0 is not a whole number from 1"),
    (["--task", "induction", "--block_max", "64"], "block_max=64 is not a whole number from 4 "
                                                   "to 63"),
    (["--task", "induction", "--block_min", "9", "--block_max", "8"], "block_max=8"),
    (["--task", "induction", "--lead_in_from", "x"], "lead_in_from='x' is not a whole number"),
    (["--task", "induction", "--lead_in_max", "70"], "lead_in_max=70 is not a whole number"),
    (["--task", "induction", "--n_vocab", "4"], "n_vocab=4 is not a whole number from 7 up"),
    (["--task", "induction", "--n_ctx", "10", "--block_max", "9"], "n_ctx=10 is too short"),
    (["--task", "induction", "--n_head", "3"], "n_embd=64 is not a multiple of n_head=3"),
    (["--task", "induction", "--repeats", "0.5"], "--repeats is a flag of --task text, not of "
                                                  "--task induction"),
    (["--task", "induction", "--nvocab", "9"], "unknown flag --nvocab; did you mean --n_vocab?"),
    (["--task=induction", "--lr", "0"], "lr=0 must be a number above 0"),
])
def test_bad_task_settings_are_one_line_before_any_work(args, message, tmp_path, monkeypatch):
    def no_step(*args):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(train_module, "loss_and_grads", no_step)
    done = picogpt(*args, "--models_dir", str(tmp_path / "models"), entry=main)
    assert_one_line_error(done, message)
    assert not (tmp_path / "models").exists()
