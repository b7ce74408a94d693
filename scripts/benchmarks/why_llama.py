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

Each change alone on GPT-2's block, and the speedrun's changes on the LLaMA block, train the
training-only variant (picogpt/llama/variant.py, `--variant`); WSD, the smaller batch and Muon
are the LLaMA block's own flags (`--schedule wsd`, `--n_batch 8`, `--optimizer muon`).
"""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from picogpt.cli.train import TASKS, build_run, train
from picogpt.kinds import kind_of

# name -> (what the row is, the train command's flags for it, or None: not built yet)
ROWS = {
    "gpt2": ("GPT-2's block, the recipe before this table", {"model": "gpt2"}),
    "llama": ("the LLaMA block: RMSNorm, RoPE, SwiGLU, 4 query heads over 2 key/value heads",
              {"model": "llama"}),
    "llama-mha": ("the LLaMA block without shared heads (n_kv_head = n_head)",
                  {"model": "llama", "n_kv_head": 4}),
    "rope": ("RoPE alone on GPT-2's block", {"variant": "rope"}),
    "rmsnorm": ("RMSNorm alone on GPT-2's block", {"variant": "rmsnorm"}),
    "swiglu": ("SwiGLU alone on GPT-2's block", {"variant": "swiglu"}),
    "gqa": ("shared key/value heads alone on GPT-2's block", {"variant": "gqa"}),
    "relu2": ("ReLU² for SwiGLU, on the LLaMA block", {"variant": "relu2"}),
    "qk-norm": ("q/k norms on the LLaMA block", {"variant": "qk-norm"}),
    "zero-proj": ("zero-initialised output projections on the LLaMA block",
                  {"variant": "zero-proj"}),
    "untied": ("an untied head on the LLaMA block", {"variant": "untied"}),
    "wsd": ("a warmup-stable-decay schedule on the LLaMA block",
            {"model": "llama", "schedule": "wsd"}),
    "small-batch": ("a smaller batch (8 windows) on the LLaMA block",
                    {"model": "llama", "n_batch": 8}),
    "muon": ("Muon on the LLaMA block's hidden matrices, AdamW for the rest",
             {"model": "llama", "optimizer": "muon"}),
    "line-end": ("each character's distance to its line's end (a learned table) on the LLaMA "
                 "block", {"variant": "line-end"}),
}
# Rows whose step is another row's step by construction (a schedule, a first weight): they take
# that row's step time, so a timing's noise does not give the same step fewer steps
SAME_STEP = {"wsd": "llama", "zero-proj": "llama"}


def stepper(settings: dict, text: str, work: Path, clock=time.perf_counter):
    """A function that takes one training step of this row (loss, gradients and the row's
    optimizer, on its own batches and shape) and returns its seconds by clock."""
    run, task = build_run({"task": "poems", "text": text, "name": "calibrate",
                           "models_dir": str(work / "calibrate"), **settings})
    plan = task.plan(run, TASKS["poems"][1](run))
    groups = kind_of(plan.hparams).param_groups(plan.params)
    now = {"params": plan.params, "state": {"step": 0}}

    def one() -> float:
        batch = next(plan.batches)
        start = clock()
        _loss, grads = plan.loss_and_grads(batch, now["params"])
        now["params"], now["state"] = run.optimizer.step(now["params"], grads, now["state"],
                                                         1e-4, groups)
        return clock() - start
    return one


def step_seconds(settings: dict, text: str, work: Path, n_steps: int = 6,
                 beside: dict | None = None) -> tuple[float, float | None]:
    """Seconds a training step of this row takes here: the median of n_steps after one that
    allocates; and, with beside (another row's settings), the median ratio of this row's step
    to that row's in CPU seconds on one thread, the two taken in turns (another process's load
    barely moves a one-thread step's CPU time, where it doubles its wall time)."""
    if beside is None:
        mine = stepper(settings, text, work)
        return float(np.median([mine() for _ in range(n_steps + 1)][1:])), None
    with threadpool_limits(1, user_api="blas"):
        mine = stepper(settings, text, work, time.process_time)
        other = stepper(beside, text, work, time.process_time)
        ratios = [mine() / other() for _ in range(n_steps + 1)]
    return float("nan"), float(np.median(ratios[1:]))


def rhyme_head_step(curve: dict, threshold: float) -> int | None:
    """The first measured step whose best rhyme-head score reaches threshold, or None."""
    for measured in curve["measured"]:
        if "rhyme_head" in measured and np.max(measured["rhyme_head"]) >= threshold:
            return measured["step"]
    return None


def calibrated(names: list[str], args, work: Path, again: bool = False) -> dict:
    """Each row's step seconds, measured once and kept in --work/step_seconds.json (with the load
    average around the measurement), so that rows trained later, or side by side on one thread
    each, keep the steps an idle machine's budget holds; again: measure them anew. With
    --relative_to ROW (a row measured idle before), a row is measured in turns with that one on
    a busy machine, and its seconds are that row's idle seconds times the ratio."""
    kept = work / "step_seconds.json"
    times = json.loads(kept.read_text(encoding="utf-8")) if kept.is_file() else {}
    for name in names:
        if name in times and not again:
            continue
        if name in SAME_STEP and SAME_STEP[name] in times:
            times[name] = {"seconds": times[SAME_STEP[name]]["seconds"],
                           "how": f"{SAME_STEP[name]}'s step: the same products"}
            continue
        before = os.getloadavg()[0]
        base = args.relative_to if args.relative_to and args.relative_to != name else None
        seconds, ratio = step_seconds(ROWS[name][1], args.text, work,
                                      beside=ROWS[base][1] if base else None)
        times[name] = {"seconds": round(seconds if base is None else
                                        times[base]["seconds"] * ratio, 4),
                       "how": "idle, wall" if base is None else "one thread, CPU, in turns",
                       "load": [round(before, 2), round(os.getloadavg()[0], 2)]}
        if base:
            times[name] |= {"relative_to": base, "ratio": round(ratio, 3)}
        print(f"{name}: {times[name]['seconds']:.3f} s a step (load {before:.2f}"
              + (f", {ratio:.2f}x {base}'s" if base else "") + ")", flush=True)
        kept.write_text(json.dumps(times, indent=1), encoding="utf-8")
    return times


def run_row(name: str, seed: int, args, work: Path) -> dict:
    """Train one row for the budget (or go on with it) and return its figures."""
    about, settings = ROWS[name]
    settings = {**settings, "seed": seed}
    run_name = f"{name}-seed{seed}"
    load_before = os.getloadavg()
    per_step = calibrated([name], args, work)[name]["seconds"]
    start = time.perf_counter()
    if (work / f"{run_name}.part").is_dir():  # stopped midway: go on from its checkpoint
        result = train(resume=True, name=run_name, models_dir=str(work), threads=args.threads)
    else:
        steps = max(2, int(args.minutes * 60 / per_step))
        result = train(task="poems", text=args.text, name=run_name, models_dir=str(work),
                       **settings, steps=steps, threads=args.threads,
                       n_held_out=args.n_held_out, judge_each=True,
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
            "rhyme_curve": [[m["step"], m.get("rhyme"), m.get("judged"),
                             m.get("held_out")] for m in curve["measured"]],
            "held_out_rhyme": form.get("held_out", {}).get("rhyme"),
            "chance_rhyme": form.get("shuffled", {}).get("rhyme"),
            "load": [round(x, 2) for x in (*load_before, *os.getloadavg())]}


def finished(kept: Path) -> list[dict]:
    """The rows finished so far (by this script or one beside it)."""
    return json.loads(kept.read_text(encoding="utf-8")) if kept.is_file() else []


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
    parser.add_argument("--n_held_out", type=int, default=400,
                        help="poems held out (400: about 220 律诗, so at least 100 judged)")
    parser.add_argument("--threads", type=int, default=None,
                        help="each row's threads (1: two scripts may run side by side; the "
                             "steps stay the idle machine's budget)")
    parser.add_argument("--calibrate", action="store_true",
                        help="only measure the rows' step seconds (anew), on an idle machine")
    parser.add_argument("--relative_to", default=None, choices=list(ROWS),
                        help="calibrate on a busy machine: each row's step in turns with this "
                             "row's, whose idle seconds are kept already")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.calibrate:
        calibrated(args.rows, args, work, again=True)
        return
    kept = work / "why_llama.json"
    for name in args.rows:
        for seed in args.seed:
            if any(r["row"] == name and r["seed"] == seed and r["minutes"] == args.minutes
                   for r in finished(kept)):
                continue
            result = {**run_row(name, seed, args, work), "minutes": args.minutes}
            done = [*finished(kept), result]  # read again: a script beside this one may write
            kept.write_text(json.dumps(done, ensure_ascii=False, indent=1), encoding="utf-8")
            print(table([result]).splitlines()[1], flush=True)
    print(table([r for r in finished(kept) if r["minutes"] == args.minutes]))


if __name__ == "__main__":
    main()
