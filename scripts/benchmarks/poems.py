"""The poems recipe, measured: `python -m picogpt.train --task poems` with any of its flags,
timed in wall-clock and CPU seconds (user + sys of this process and its threads), with the
machine's load before and after, then its held-out loss beside the baselines, the share of 句
that keep a prompt's length, and the closing measurement's rhyme and 平仄 shares (the model's,
the held-out poems', chance's) and the heads' scores. The figures of docs/poems.md come from runs
of this.

    python -m scripts.benchmarks.poems --work /tmp/poems -- --steps 1200 --verse_share 0.5
    python -m scripts.benchmarks.poems --work /tmp/poems -- --text chinese-poetry/
    python -m scripts.benchmarks.poems --work /tmp/poems --step_time -- --text chinese-poetry/

With --step_time it trains 12 steps only, measured at step 10 and 12, and prints the CPU
seconds per step with those measurements and the data's reading included: an upper bound, for
extrapolating a recipe's time before running it whole.
"""

import argparse
import json
import os
import platform
import resource
import time

from picogpt.cli.train import train


def cpu_seconds() -> float:
    """User + sys CPU seconds of this process so far, threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def flags(words: list[str]) -> dict:
    """The train command's keyword arguments from --name value pairs (numbers parsed as
    JSON)."""
    settings = {}
    for name, value in zip(words[::2], words[1::2]):
        try:
            settings[name.lstrip("-")] = json.loads(value)
        except ValueError:
            settings[name.lstrip("-")] = value
    return settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/poems", help="where the model folders go")
    parser.add_argument("--step_time", action="store_true", help="12 steps: CPU s per step")
    parser.add_argument("rest", nargs="*", help="--task poems flags after --")
    args = parser.parse_args()
    settings = flags(args.rest)
    name = settings.pop("name", f"run-{int(time.time())}")
    if args.step_time:
        settings.update(steps=12, curve_every=10)
    load, wall, cpu = os.getloadavg(), time.perf_counter(), cpu_seconds()
    result = train(task="poems", name=name, models_dir=args.work, **settings)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    curve = result["curve"]
    best, base, form = curve["best"], curve["baselines"], result["finish"]
    print(json.dumps({"settings": curve["settings"], "cpu": platform.processor() or
                      platform.machine(), "cores": os.cpu_count(),
                      "load_before": load, "load_after": os.getloadavg(),
                      "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                      "held_out": best["held_out"], "best_step": best["step"],
                      "unigram": base["unigram"], "bigram": base["bigram"],
                      "beats_bigram_by": round(base["bigram"] - best["held_out"], 3),
                      "beats_unigram_by": round(base["unigram"] - best["held_out"], 3),
                      "line_share": form["line_share"], "kept": form["kept"],
                      "form": {key: value for key, value in form["form"].items()
                               if key != "written"},
                      "heads": {kind: curve["measured"][-1].get(kind) for kind in
                                ("last_break", "previous_line", "rhyme_head")},
                      "train_loss_last": curve["loss"][-1],
                      "measured": [{k: m[k] for k in ("step", "held_out", "sample")}
                                   for m in curve["measured"]],
                      "samples": form["samples"]}, ensure_ascii=False, indent=1))
    if args.step_time:
        print(f"about {cpu / 12:.2f} CPU s a step, measurements included")


if __name__ == "__main__":
    main()
