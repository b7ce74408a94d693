"""Time picogpt and Hugging Face transformers on the same random-weight 124M checkpoint.

    python -m scripts.benchmarks.speed                 # writes the checkpoint to a temp folder
    python -m scripts.benchmarks.speed --work /tmp/b   # keeps (and reuses) it there
    python -m scripts.benchmarks.speed --before /tmp/old   # adds the picogpt of another checkout

Needs the test extra (`pip install ".[test]"`). Each engine runs in its own process so their
memory peaks stay apart; load and start-up times are taken in fresh processes. Figures:

- load: cold (page cache dropped first, when this user may drop it) and warm, from process start
  until the weights are ready; picogpt's first run, which converts the TensorFlow checkpoint,
  is shown apart. transformers reads safetensors written by save_pretrained from the same arrays.
- warm start: process start until the first generated token reaches stdout.
- prefill tokens/s for a 16- and a 512-token prompt (logits of the last position only, which
  is all generation needs, for both engines); decode tokens/s for the 40 greedy tokens after
  each; decode time per token at position ~16 and ~900.
- peak resident memory of the generating process.
- picogpt's decode speed as a share of the memory-bandwidth limit: bytes read per token
  (every weight but the unused rows of wpe, plus the KV cache) / measured read bandwidth.

With --before, a third engine is the picogpt of another checkout (`git worktree add /tmp/old
HEAD~3`), run by that checkout's copy of this file, so a change is measured before and after,
and against transformers, in one run. Medians of --repeats runs within a process, then medians
over --rounds rounds in which the engines take turns (this kind of machine drifts by ~20% over
minutes). transformers decodes with its KV cache both through a plain loop of forward calls and
through `generate`; the ratios use the faster of the two.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scripts.benchmarks.common import (
    ROOT,
    TokenTimes,
    first_output_seconds,
    median_time,
    random_ids,
    run_child,
    threads,
)

PROMPT = "Alan Turing theorized that"
N_NEW = 40
STRIDE = 512  # scoring windows start every 512 tokens
MODULE = "scripts.benchmarks.speed"


@dataclass(frozen=True)
class Engine:
    """What one engine can be timed doing, by name."""

    prefill: Callable  # ids -> (greedy next id, state), as a prompt is fed before decoding
    step: Callable  # (next id, state) -> (greedy next id, state): one decode step
    sample: Callable  # (ids, n_new, n_samples) -> tokens made, top-k 50 sampling
    generate: Callable | None  # (ids, n_new, streamer) -> None: the library's own loop
    score: Callable  # ids -> each token's log-probability, windows of STRIDE


# ---- what runs inside each engine's process -------------------------------------------------

def picogpt_engine(work: Path) -> Engine:
    """picogpt, set up as the picogpt command sets itself up."""
    from picogpt.cli.command import reuse_freed_memory
    from picogpt.files.openai import load_encoder_hparams_and_params
    from picogpt.generate import generate_samples
    from picogpt.kvcache import KVCache, decode_step, prefill
    from picogpt.score import score

    reuse_freed_memory()
    _, hparams, params = load_encoder_hparams_and_params("124M", str(work / "models"))
    n_head = hparams["n_head"]

    def feed(ids):  # as generate feeds a prompt: in chunks, into a cache with room for all
        cache = KVCache(params, n_head, len(ids) + N_NEW)
        return int(np.argmax(prefill(ids, params, n_head, cache))), cache

    def step(next_id, cache):
        return int(np.argmax(decode_step(next_id, params, n_head, cache))), cache

    def sample(ids, n_new, n_samples):  # top-k 50, as transformers samples GPT-2 by default
        return len(list(generate_samples(ids, params, n_head, n_new, top_k=50, seed=0,
                                         stop_at_end=False, n_samples=n_samples)))

    return Engine(feed, step, sample, None, lambda ids: score(ids, params, n_head, stride=STRIDE))


def transformers_engine(work: Path) -> Engine:
    """The same for transformers' GPT2LMHeadModel with use_cache=True, plus its generate()."""
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(threads())
    model = GPT2LMHeadModel.from_pretrained(work / "hf").eval()

    @torch.inference_mode()
    def prefill(ids):
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        return int(out.logits[0, -1].argmax()), out.past_key_values

    @torch.inference_mode()
    def step(next_id, past):
        out = model(torch.tensor([[next_id]]), past_key_values=past, use_cache=True)
        return int(out.logits[0, -1].argmax()), out.past_key_values

    @torch.inference_mode()
    def generate(ids, n_new, streamer=None):
        model.generate(torch.tensor([ids]), max_new_tokens=n_new, min_new_tokens=n_new,
                       do_sample=False, use_cache=True, pad_token_id=50256, streamer=streamer)

    @torch.inference_mode()
    def sample(ids, n_new, n_samples):
        out = model.generate(torch.tensor([ids]), max_new_tokens=n_new, min_new_tokens=n_new,
                             do_sample=True, top_k=50, num_return_sequences=n_samples,
                             use_cache=True, pad_token_id=50256)
        return out[:, len(ids):].numel()

    @torch.inference_mode()
    def score(ids):  # the same windows as picogpt.score, one forward pass per window
        inputs, logprobs, start, scored = [50256, *ids[:-1]], [], 0, 0
        while scored < len(ids):
            window = inputs[start : start + model.config.n_positions]
            logits = model(torch.tensor([window])).logits[0, scored - start :]
            targets = torch.tensor(ids[scored : start + len(window)])[:, None]
            logprobs.append(torch.log_softmax(logits, -1).gather(1, targets))
            scored, start = start + len(window), start + STRIDE
        return torch.cat(logprobs)

    return Engine(prefill, step, sample, generate, score)


def measure_engine(engine: str, work: Path, repeats: int, n_prompt: int, n_samples: int) -> dict:
    """Throughput figures of one engine for one prompt length, run in this process."""
    made = {"picogpt": picogpt_engine, "transformers": transformers_engine}[engine](work)
    prefill, step, sample, generate, score = (made.prefill, made.step, made.sample,
                                              made.generate, made.score)
    figures = {}
    ids = random_ids(n_prompt)  # one prompt length per process: the memory peak is its own
    if n_prompt >= 4096:  # scoring a text of n_prompt tokens: one timed run
        start = time.perf_counter()
        score(ids)
        figures[f"score_{n_prompt}_tok_s"] = n_prompt / (time.perf_counter() - start)
        figures[f"peak_rss_mb_score_{n_prompt}"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return figures
    if n_samples > 1 and n_prompt != 16:  # only the memory peak
        sample(ids, N_NEW, n_samples)
    elif n_samples > 1:  # sampling, whole calls (prefill included): n_samples x N_NEW tokens / s
        for n in (1, n_samples):
            seconds = median_time(lambda n=n: sample(ids, N_NEW, n), repeats)
            figures[f"sample{n}_after_{n_prompt}_tok_s"] = n * N_NEW / seconds
    if n_samples > 1:
        figures[f"peak_rss_mb_{n_prompt}_x{n_samples}"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return figures
    if n_prompt != 880:
        seconds = median_time(lambda ids=ids: prefill(ids), repeats)
        figures[f"prefill_{n_prompt}_tok_s"] = n_prompt / seconds
    step_times, totals = [], []
    for _ in range(repeats):
        state = None  # let the last repeat's cache go first: one sequence at a time, as in use
        next_id, state = prefill(ids)
        start = time.perf_counter()
        for _ in range(N_NEW):
            t = time.perf_counter()
            next_id, state = step(next_id, state)
            step_times.append(time.perf_counter() - t)
        totals.append(time.perf_counter() - start)
    figures[f"decode_after_{n_prompt}_tok_s"] = N_NEW / statistics.median(totals)
    figures[f"ms_per_token_at_{n_prompt}"] = 1e3 * statistics.median(step_times)
    if generate is not None and n_prompt != 880:
        # generate() includes its prefill: subtract the prefill measured above
        total = median_time(lambda ids=ids: generate(ids, N_NEW), repeats)
        decode = total - n_prompt / figures[f"prefill_{n_prompt}_tok_s"]
        figures[f"generate_decode_after_{n_prompt}_tok_s"] = N_NEW / decode
        times = []  # the method: generate() timed token by token with a streamer
        for _ in range(repeats):
            streamer = TokenTimes()
            generate(ids, N_NEW, streamer)
            arrived = streamer.times[2:]  # after the prompt and the first new token
            times.append((arrived[-1] - arrived[0]) / (len(arrived) - 1))
        figures[f"streamer_decode_after_{n_prompt}_tok_s"] = 1 / statistics.median(times)
    figures[f"peak_rss_mb_{n_prompt}"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


# ---- what the parent does -------------------------------------------------------------------

def drop_page_cache() -> bool:
    """Ask Linux to forget cached file pages (needs root); False if it may not."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def load_seconds(engine: str, work: Path, cold: bool, cwd: Path = ROOT) -> float | None:
    """Seconds from starting a process until the engine's weights are loaded."""
    if cold and not drop_page_cache():
        return None
    return float(run_child(MODULE, "--child", "load", engine, "--work", str(work), "--t0",
                           repr(time.time()), cwd=cwd))


def first_token_seconds(engine: str, work: Path, cwd: Path = ROOT) -> float:
    """Seconds from starting a process until its first generated token is on stdout, warm:
    after one untimed run, so the weights are in the page cache (picogpt maps its weights
    and its load no longer reads them, so the load runs before it do not warm the cache)."""
    first_token_once(engine, work, cwd)
    return first_token_once(engine, work, cwd)


def first_token_once(engine: str, work: Path, cwd: Path = ROOT) -> float:
    """One run of first_token_seconds's measurement (picogpt: the command, as `python -m
    picogpt` from cwd, so that another checkout runs its own)."""
    if engine == "picogpt":
        command = [sys.executable, "-m", "picogpt", PROMPT, "--n_tokens", "40", "--models_dir",
                   str(work / "models")]
    else:
        command = [sys.executable, "-m", MODULE, "--child", "first-token", engine, "--work",
                   str(work)]
    return first_output_seconds(command, cwd=cwd)


def read_bandwidth() -> float:
    """Bytes/s NumPy reads from memory: the best of summing 1 GiB on one and on all threads."""
    data = np.ones(1 << 28, dtype=np.float32)  # 1 GiB, far beyond any cache
    halves = np.array_split(data, threads())
    with ThreadPoolExecutor(threads()) as pool:  # NumPy releases the GIL while summing
        best = min(median_time(lambda: data.sum(), 5),
                   median_time(lambda: list(pool.map(np.sum, halves)), 5))
    return data.nbytes / best


def prepare(work: Path) -> dict:
    """Write the checkpoint, convert it for picogpt (timed: the first run) and for transformers."""
    model_dir = work / "models" / "124M"
    if not (model_dir / "hparams.json").exists():
        run_child("scripts.fixtures.checkpoint", str(model_dir), "--size", "124M", "--reference",
                  str(work / "reference.npz"))
    for stale in (model_dir / "params").glob("*"):
        stale.unlink()
    first_run = load_seconds("picogpt", work, cold=False)
    if not (work / "hf" / "config.json").exists():
        run_child(MODULE, "--child", "save-hf", "transformers", "--work", str(work))
    hparams = json.loads((model_dir / "hparams.json").read_text())
    return {"hparams": hparams, "first_run_s": first_run}


def weight_bytes(hparams: dict) -> tuple[int, int]:
    """(bytes of all weights, bytes one decode step reads from them: all but unused wpe rows)."""
    n_embd, n_layer = hparams["n_embd"], hparams["n_layer"]
    per_block = 12 * n_embd * n_embd + 13 * n_embd  # c_attn, c_proj, c_fc, mlp c_proj, ln
    total = 4 * (hparams["n_vocab"] * n_embd + hparams["n_ctx"] * n_embd + n_layer * per_block
                 + 2 * n_embd)
    return total, total - 4 * (hparams["n_ctx"] - 1) * n_embd


def report(results: dict, info: dict, bandwidth: float) -> str:
    """The figures as a table, the ratios and the bandwidth share."""
    p, t = results["picogpt"], results["transformers"]
    for n in (16, 512):  # transformers' best decode path
        t[f"best_decode_after_{n}_tok_s"] = max(t[f"decode_after_{n}_tok_s"],
                                                t[f"generate_decode_after_{n}_tok_s"],
                                                t[f"streamer_decode_after_{n}_tok_s"])
        p[f"best_decode_after_{n}_tok_s"] = p[f"decode_after_{n}_tok_s"]
    total, per_token = weight_bytes(info["hparams"])
    kv_per_position = 2 * info["hparams"]["n_layer"] * info["hparams"]["n_embd"] * 4
    rows = [("load, cold (s)", "load_cold_s"), ("load, warm (s)", "load_warm_s"),
            ("process start to first token (s)", "first_token_s"),
            ("prefill 16 tokens (tok/s)", "prefill_16_tok_s"),
            ("prefill 512 tokens (tok/s)", "prefill_512_tok_s"),
            ("decode 40 after 16, loop (tok/s)", "decode_after_16_tok_s"),
            ("decode 40 after 16, generate() (tok/s)", "generate_decode_after_16_tok_s"),
            ("decode 40 after 16, generate()+streamer", "streamer_decode_after_16_tok_s"),
            ("decode 40 after 512, loop (tok/s)", "decode_after_512_tok_s"),
            ("decode 40 after 512, generate() (tok/s)", "generate_decode_after_512_tok_s"),
            ("decode 40 after 512, generate()+streamer", "streamer_decode_after_512_tok_s"),
            ("decode ms/token at ~16", "ms_per_token_at_16"),
            ("decode ms/token at ~900", "ms_per_token_at_880"),
            ("peak memory, 40 after 16 (MiB)", "peak_rss_mb_16"),
            ("peak memory, 40 after 512 (MiB)", "peak_rss_mb_512"),
            ("peak memory, 40 after 880 (MiB)", "peak_rss_mb_880"),
            ("sample 40 after 16, 1 sample (tok/s)", "sample1_after_16_tok_s"),
            ("sample 40 after 16, 8 samples (tok/s)", "sample8_after_16_tok_s"),
            ("peak memory, 8 samples after 512 (MiB)", "peak_rss_mb_512_x8"),
            ("score 4096 tokens, stride 512 (tok/s)", "score_4096_tok_s"),
            ("peak memory, score 4096 tokens (MiB)", "peak_rss_mb_score_4096"),
            ("peak memory, score 16384 tokens (MiB)", "peak_rss_mb_score_16384")]
    before = results.get("before", {})  # --before: that checkout's picogpt
    lines = [f"{'':42}{'picogpt':>12}{'transformers':>14}{'ratio':>8}"
             + (f"{'before':>12}{'after/before':>14}" if before else "")]
    for label, key in rows:
        a, b, o = p.get(key), t.get(key), before.get(key)
        cells = [f"{v:12.3f}" if isinstance(v, float) and v < 10 else
                 f"{v:12.1f}" if isinstance(v, float) else f"{'-':>12}" for v in (a, b, o)]
        ratio = f"{a / b:8.2f}" if isinstance(a, float) and isinstance(b, float) else f"{'':8}"
        lines.append(f"{label:42}{cells[0]}{cells[1]:>14}{ratio}"
                     + (f"{cells[2]}{a / o:14.3f}" if isinstance(o, float) and a else ""))
    lines.append(f"picogpt first run, converting the TF checkpoint: {info['first_run_s']:.1f} s")
    best = {n: p[f"best_decode_after_{n}_tok_s"] / t[f"best_decode_after_{n}_tok_s"]
            for n in (16, 512)}
    lines.append(f"decode ratio vs transformers' faster path: after 16 {best[16]:.2f}x, "
                 f"after 512 {best[512]:.2f}x")
    lines.append(f"per-token time at ~900 / at ~16: picogpt "
                 f"{p['ms_per_token_at_880'] / p['ms_per_token_at_16']:.2f}x")
    lines.append(f"read bandwidth {bandwidth / 1e9:.1f} GB/s; a decode step reads "
                 f"{per_token / 1e6:.0f} MB of weights + {kv_per_position / 1024:.0f} KiB of KV "
                 f"per position")
    for n in (16, 512):
        limit = bandwidth / (per_token + kv_per_position * (n + N_NEW // 2))
        lines.append(f"after {n}: bandwidth limit {limit:.1f} tok/s; picogpt reaches "
                     f"{p[f'decode_after_{n}_tok_s'] / limit:.0%} of it")
    picogpts = [("picogpt", p), ("before", before)][: 2 if before else 1]
    for name, r in picogpts:
        lines.append(f"8 samples vs 1 (tokens/s): {name} "
                     f"{r['sample8_after_16_tok_s'] / r['sample1_after_16_tok_s']:.2f}x")
    lines.append(f"8 samples vs 1 (tokens/s): transformers "
                 f"{t['sample8_after_16_tok_s'] / t['sample1_after_16_tok_s']:.2f}x; "
                 f"picogpt 8 samples vs transformers 8 samples "
                 f"{p['sample8_after_16_tok_s'] / t['sample8_after_16_tok_s']:.2f}x")
    for name, r in picogpts:
        shares = ", ".join(f"after {n} {r[f'peak_rss_mb_{n}'] * 2**20 / total:.2f}x"
                           for n in (16, 512, 880))
        shares += f", 8 samples after 512 {r['peak_rss_mb_512_x8'] * 2**20 / total:.2f}x"
        lines.append(f"peak memory / weight bytes ({total / 1e6:.0f} MB): {name} {shares}")
    return "\n".join(lines)


def child_mode(args) -> None:
    """The --child modes: one measurement in a fresh process, printed as the last line."""
    work = Path(args.work)
    if args.child == "load":
        if args.engine == "picogpt":
            from picogpt.files.openai import load_encoder_hparams_and_params
            load_encoder_hparams_and_params("124M", str(work / "models"))
        else:
            transformers_engine(work)
        print(time.time() - args.t0)
    elif args.child == "first-token":  # what picogpt's CLI does, with transformers
        from transformers import GPT2TokenizerFast
        model_dir = work / "models" / "124M"
        tokenizer = GPT2TokenizerFast(vocab=str(model_dir / "encoder.json"),
                                      merges=str(model_dir / "vocab.bpe"))
        next_id, _ = transformers_engine(work).prefill(tokenizer.encode(PROMPT))
        print(tokenizer.decode([next_id]), flush=True)
    elif args.child == "save-hf":
        from scripts.fixtures.reference import hf_model_of
        hparams = json.loads((work / "models" / "124M" / "hparams.json").read_text())
        hf_model_of(hparams, dict(np.load(work / "reference.npz"))).save_pretrained(work / "hf")
        print("saved")
    else:
        print(json.dumps(measure_engine(args.engine, work, args.repeats, args.n_prompt,
                                        args.n_samples)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="folder for the checkpoints")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds in which the engines take turns; figures are medians")
    parser.add_argument("--json", type=Path, default=None, help="also save the figures here")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose picogpt is timed too, as 'before'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("engine", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--n_prompt", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--n_samples", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_mode(args)
    work = args.work or Path(tempfile.mkdtemp(prefix="picogpt-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bench: {threads()} threads, numpy {np.__version__}, checkpoint in {work}",
          file=sys.stderr)
    info = prepare(work)
    # each engine's kind and the checkout its children run from
    engines = {"picogpt": ("picogpt", ROOT), "transformers": ("transformers", ROOT)}
    if args.before:
        engines["before"] = ("picogpt", args.before.resolve())
    rounds = {engine: [] for engine in engines}
    # this machine's speed drifts by ~20% from minute to minute: the engines take turns within
    # each round, in the opposite order every other round, so every ratio compares runs made
    # under the same conditions
    for r in range(args.rounds):
        for engine in list(engines) if r % 2 == 0 else list(engines)[::-1]:
            kind, cwd = engines[engine]
            figures = {"load_cold_s": load_seconds(kind, work, cold=True, cwd=cwd),
                       "load_warm_s": load_seconds(kind, work, cold=False, cwd=cwd),
                       "first_token_s": first_token_seconds(kind, work, cwd)}
            runs = [(16, 1), (512, 1), (880, 1), (16, 8), (512, 8), (4096, 1)]
            if kind == "picogpt":  # scoring memory stays flat: a text four times as long
                runs.append((16384, 1))
            for n_prompt, n_samples in runs:
                figures.update(json.loads(run_child(
                    MODULE, "--child", "measure", kind, "--work", str(work), "--repeats",
                    str(args.repeats), "--n_prompt", str(n_prompt), "--n_samples",
                    str(n_samples), cwd=cwd)))
            rounds[engine].append(figures)
    results = {engine: {key: statistics.median(r[key] for r in runs) if runs[0][key] is not None
                        else None for key in runs[0]} for engine, runs in rounds.items()}
    spread = {engine: {key: (min(r[key] for r in runs), max(r[key] for r in runs))
                       for key in runs[0] if runs[0][key] is not None}
              for engine, runs in rounds.items()}
    info["spread"] = spread
    bandwidth = read_bandwidth()
    print(report(results, info, bandwidth))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "info": info,
                                         "bandwidth": bandwidth}, indent=1))
    decode = [r["decode_after_16_tok_s"] for r in rounds["picogpt"]]
    print(f"picogpt decode after 16 over the rounds: {min(decode):.1f} to {max(decode):.1f} tok/s")


if __name__ == "__main__":
    main()
