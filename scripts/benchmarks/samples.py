"""Eight samples (and one) decoded together: picogpt against transformers, the steps alone.

    python -m scripts.benchmarks.samples --work /tmp/bench    # speed.py's checkpoints
    python -m scripts.benchmarks.samples --work /tmp/bench --before /tmp/old   # and another

Top-k 40, 40 new tokens after a 16-token prompt, as issue 54 measured it. Each engine times
the arrival of each step's tokens (picogpt: its generator yielding them; transformers: a
streamer's put), and counts only the steps after the first: the prompt's feeding and the first
step, which both engines do differently (transformers copies the prompt's cache per sample), are
left out the same way. Each engine runs in its own process, --repeats times, the median taken;
the engines take turns over --rounds rounds, in the opposite order every other round. Needs
speed.py's --work folder (the checkpoint and transformers' copy of it): run speed.py once, or
`python -m scripts.benchmarks.speed --child save-hf transformers --work W` after the fixture.
Prints the host, the load before and after, wall and CPU seconds. --before adds the picogpt of
another checkout (which needs this file: copy it in), run from there, as a third engine.
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from scripts.benchmarks.common import ROOT, TokenTimes, random_ids, run_child, threads

MODULE = "scripts.benchmarks.samples"
N_PROMPT, N_NEW, TOP_K = 16, 40, 40


def picogpt_steps(work: Path, n_samples: int, repeats: int) -> float:
    """Tokens/s of picogpt's steps after the first, median of repeats."""
    from picogpt.cli.command import reuse_freed_memory
    from picogpt.files.openai import load_encoder_hparams_and_params
    from picogpt.generate import generate_samples

    reuse_freed_memory()
    _, hparams, params = load_encoder_hparams_and_params("124M", str(work / "models"))
    rates = []
    for repeat in range(repeats + 1):  # the first is a warm-up
        times = []
        for i, _ in generate_samples(random_ids(N_PROMPT), params, hparams["n_head"], N_NEW,
                                     n_samples=n_samples, top_k=TOP_K, seed=repeat,
                                     stop_at_end=False):
            if i == n_samples - 1:  # the step's last sample: the step is done
                times.append(time.perf_counter())
        rates.append(n_samples * (len(times) - 1) / (times[-1] - times[0]))
    return statistics.median(rates[1:])


def transformers_steps(work: Path, n_samples: int, repeats: int) -> float:
    """Tokens/s of transformers' generate() steps after the first, median of repeats."""
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(threads())
    model = GPT2LMHeadModel.from_pretrained(work / "hf").eval()

    rates = []
    for repeat in range(repeats + 1):
        streamer = TokenTimes()
        torch.manual_seed(repeat)
        with torch.inference_mode():
            model.generate(torch.tensor([random_ids(N_PROMPT)]), max_new_tokens=N_NEW,
                           min_new_tokens=N_NEW, do_sample=True, top_k=TOP_K,
                           num_return_sequences=n_samples, use_cache=True,
                           pad_token_id=50256, streamer=streamer)
        steps = streamer.times[1:]  # after the prompt
        rates.append(n_samples * (len(steps) - 1) / (steps[-1] - steps[0]))
    return statistics.median(rates[1:])


def host() -> str:
    """The CPU's model name as /proc/cpuinfo gives it, and the cores this process may use."""
    names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
             .splitlines() if line.startswith("model name")]
    return f"{names[0] if names else 'unknown CPU'}, {threads()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="speed.py's folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per process")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose picogpt is timed too, as 'before'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n_samples", type=int, default=8, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = {"picogpt": picogpt_steps, "transformers": transformers_steps}[args.child]
        print(json.dumps(run(args.work, args.n_samples, args.repeats)))
        return
    print(f"host: {host()}; load before {os.getloadavg()}")
    start, cpu = time.perf_counter(), os.times()
    figures = {}
    # each engine's kind and the checkout it runs from
    engines = {"picogpt": ("picogpt", ROOT), "transformers": ("transformers", ROOT)}
    if args.before:
        engines["before"] = ("picogpt", args.before.resolve())
    for r in range(args.rounds):
        for engine in list(engines) if r % 2 == 0 else list(engines)[::-1]:
            kind, cwd = engines[engine]
            for n in (1, 8):
                figures.setdefault((engine, n), []).append(json.loads(run_child(
                    MODULE, "--child", kind, "--work", str(args.work.resolve()), "--repeats",
                    str(args.repeats), "--n_samples", str(n), cwd=cwd,
                    env={"PYTHONPATH": str(cwd)})))
    cpu = os.times()
    for n in (1, 8):
        t = statistics.median(figures["transformers", n])
        for engine in [e for e in engines if e != "transformers"]:
            p = statistics.median(figures[engine, n])
            rounds = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(figures[engine, n],
                                                                    figures["transformers", n]))
            print(f"{n} sample(s), top-k {TOP_K}, steps 2-{N_NEW} after {N_PROMPT}: {engine} "
                  f"{p:.1f} tok/s, transformers {t:.1f} tok/s, {p / t:.2f}x (rounds: {rounds})")
    print(f"load after {os.getloadavg()}; wall {time.perf_counter() - start:.0f} s, children's "
          f"CPU {cpu.children_user + cpu.children_system:.0f} s")


if __name__ == "__main__":
    main()
