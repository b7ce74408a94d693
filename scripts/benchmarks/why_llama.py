"""Why the LLaMA block won, on this machine (issue 60): the table's rows, each trained for the
same time budget with the same seed and held-out poems, side by side.

Each row is `python -m picogpt.train --task poems` with the flags that make it. A row's steps
are its budget over its own step time, measured first (a few steps of the row's own step on
the row's shape, in this process: a slower block gets fewer steps, as it would in ten
minutes). Then the row trains, and the table says its held-out loss beside the bigram's, the
rhyme share of its continuations (verse.py's judge, with how many it judged), the 平仄
opposition, the share of 句 that keep the prompt's length, when the rhyme head formed (the first
measurement whose best rhyme-head score reaches --rhyme_head), its steps and wall time.

    python -m scripts.benchmarks.why_llama --text chinese-poetry/ --minutes 10 --seed 0 1
    python -m scripts.benchmarks.why_llama --text poems.txt --minutes 1 --rows gpt2 llama

It is resumable: each finished row is kept in --work/why_llama.json (by row and seed) and is
not run again; a row stopped midway (Ctrl-C) goes on from its checkpoint (`--resume`) at the
next start. The load average before and after each row is kept with it: on a shared machine
the step times, and so the steps a budget holds, are not an idle machine's.

Rows that need switches the book's block does not have (each change alone on GPT-2's block,
the speedrun's changes, Muon) are listed with what they need, and skipped until a
training-only variant gives them flags.
"""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from picogpt.cli.train import TASKS, build_run, train
from picogpt.train import adamw

# name -> (what the row is, the train command's flags for it, or None: not built yet)
ROWS = {
    "gpt2": ("today's GPT-2 recipe (the poems task's defaults)", {}),
    "llama": ("the LLaMA block: RMSNorm, RoPE, SwiGLU, 4 query heads over 2 key/value heads",
              {"model": "llama"}),
    "llama-mha": ("the LLaMA block without shared heads (n_kv_head = n_head)",
                  {"model": "llama", "n_kv_head": 4}),
    "rope": ("RoPE alone on GPT-2's block", None),
    "rmsnorm": ("RMSNorm alone on GPT-2's block", None),
    "swiglu": ("SwiGLU alone on GPT-2's block", None),
    "gqa": ("shared key/value heads alone on GPT-2's block", None),
    "relu2": ("ReLU² for GELU", None),
    "qk-norm": ("q/k norms", None),
    "zero-proj": ("zero-initialised output projections", None),
    "untied": ("an untied head", None),
    "wsd": ("a warmup-stable-decay schedule", None),
    "small-batch": ("a smaller batch (8 windows)", {"n_batch": 8}),
    "muon": ("Muon on the hidden matrices (the optimizer as a value, issue 58)", None),
}


def step_seconds(settings: dict, text: str, work: Path, n_steps: int = 6) -> float:
    """Seconds a training step of this row takes here (loss, gradients and AdamW on the row's
    own batches and shape): the median of n_steps after one that allocates."""
    run, task = build_run({"task": "poems", "text": text, "name": "calibrate",
                           "models_dir": str(work / "calibrate"), **settings})
    plan = task.plan(run, TASKS["poems"][1](run))
    params, state, times = plan.params, {"step": 0}, []
    for _ in range(n_steps + 1):
        batch = next(plan.batches)
        start = time.perf_counter()
        _loss, grads = plan.loss_and_grads(batch, params)
        params, state = adamw(params, grads, state, 1e-4)
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


def rhyme_head_step(curve: dict, threshold: float) -> int | None:
    """The first measured step whose best rhyme-head score reaches threshold, or None."""
    for measured in curve["measured"]:
        if "rhyme_head" in measured and np.max(measured["rhyme_head"]) >= threshold:
            return measured["step"]
    return None


def run_row(name: str, seed: int, args, work: Path) -> dict:
    """Train one row for the budget (or go on with it) and return its figures."""
    about, settings = ROWS[name]
    settings = {**settings, "seed": seed}
    run_name = f"{name}-seed{seed}"
    load_before = os.getloadavg()
    if (work / f"{run_name}.part").is_dir():  # stopped midway: go on from its checkpoint
        start = time.perf_counter()
        result = train(resume=True, name=run_name, models_dir=str(work))
        per_step = None
    else:
        per_step = step_seconds(settings, args.text, work)
        steps = max(2, int(args.minutes * 60 / per_step))
        start = time.perf_counter()
        result = train(task="poems", text=args.text, name=run_name, models_dir=str(work),
                       **settings, steps=steps,
                       curve_every=max(1, steps // args.measurements))
    wall = time.perf_counter() - start
    curve, finish = result["curve"], result["finish"]
    form = finish.get("form", {})
    model = form.get("model", {})
    return {"row": name, "about": about, "seed": seed, "flags": settings,
            "step_seconds": per_step, "steps": curve["settings"]["steps"],
            "wall_seconds": round(wall, 1), "held_out": curve["best"]["held_out"],
            "bigram": curve["baselines"]["bigram"],
            "under_bigram": round(curve["baselines"]["bigram"] - curve["best"]["held_out"], 4),
            "rhyme": model.get("rhyme"), "judged": model.get("judged"),
            "opposition": model.get("opposition"), "kept": finish.get("line_share"),
            "rhyme_head_step": rhyme_head_step(curve, args.rhyme_head),
            "held_out_rhyme": form.get("held_out", {}).get("rhyme"),
            "chance_rhyme": form.get("shuffled", {}).get("rhyme"),
            "load": [round(x, 2) for x in (*load_before, *os.getloadavg())]}


def table(results: list[dict]) -> str:
    """The rows as a plain table."""
    def said(value, form="{:.3f}"):
        return "-" if value is None else form.format(value)

    lines = [f"{'row':12s} {'seed':>4s} {'steps':>6s} {'s/step':>7s} {'held-out':>9s} "
             f"{'bigram':>7s} {'rhyme':>11s} {'平仄':>6s} {'kept':>6s} {'head@':>6s}"]
    for r in results:
        rhyme = "-" if r["rhyme"] is None else f"{r['rhyme']:.0%} of {r['judged']}"
        lines.append(f"{r['row']:12s} {r['seed']:4d} {r['steps']:6d} "
                     f"{said(r['step_seconds']):>7s} {said(r['held_out']):>9s} "
                     f"{said(r['bigram']):>7s} {rhyme:>11s} "
                     f"{said(r['opposition'], '{:.0%}'):>6s} {said(r['kept'], '{:.0%}'):>6s} "
                     f"{said(r['rhyme_head_step'], '{}'):>6s}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", required=True, help="chinese-poetry's folder, or a text of "
                                                      "one poem a paragraph")
    parser.add_argument("--minutes", type=float, default=10.0, help="each row's time budget")
    parser.add_argument("--seed", type=int, nargs="+", default=[0])
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--work", default="/tmp/why_llama", help="model folders and results")
    parser.add_argument("--measurements", type=int, default=10, help="measurements a row")
    parser.add_argument("--rhyme_head", type=float, default=0.5,
                        help="the rhyme-head score at which the head counts as formed")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kept = work / "why_llama.json"
    done = json.loads(kept.read_text(encoding="utf-8")) if kept.is_file() else []
    for name in args.rows:
        if ROWS[name][1] is None:
            print(f"skipped {name} ({ROWS[name][0]}): needs a training-only variant's switch")
            continue
        for seed in args.seed:
            if any(r["row"] == name and r["seed"] == seed and r["minutes"] == args.minutes
                   for r in done):
                continue
            result = {**run_row(name, seed, args, work), "minutes": args.minutes}
            done.append(result)
            kept.write_text(json.dumps(done, ensure_ascii=False, indent=1), encoding="utf-8")
            print(table([result]).splitlines()[1], flush=True)
    print(table([r for r in done if r["minutes"] == args.minutes]))


if __name__ == "__main__":
    main()
