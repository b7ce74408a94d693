"""Time picogpt's LLaMA kind and transformers (float32 and bfloat16) at Qwen2.5-0.5B's shape.

    python -m scripts.benchmarks.llama_speed                 # a temp folder for the weights
    python -m scripts.benchmarks.llama_speed --work /tmp/q   # keeps (and reuses) them there

Random weights (transformers' own initialisation of Qwen2ForCausalLM at Qwen2.5-0.5B's config:
24 layers, hidden 896, 14 query and 2 key/value heads of 64, FFN 4,864, 151,936 rows, tied),
saved once in bfloat16 as the hub holds them; picogpt converts them to its float32 store,
transformers loads them as float32 and as bfloat16. Each engine measures in a process of its
own (its memory peak is its own), and the engines take turns in each round, the order reversed
every other round (speed.py's method: docs/performance.md). Figures, medians over rounds:

- prefill of a 128-token prompt (the last position's logits only, for both engines);
- decode: 32 greedy tokens after a 16-token prompt, each with the KV cache;
- peak resident memory of that process, against the float32 weights' bytes.

Each figure is also given as a share of what limits.py measures on this machine: decoding reads
every weight once a token (bandwidth / float32 weight bytes), prefill is products (FLOPs a token
over the square GEMM's FLOP/s). The CPU, the threads and the load average are printed, since the
machine may be shared.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scripts.benchmarks.common import alternate, run_child, threads

MODULE = "scripts.benchmarks.llama_speed"
QWEN25_05B = {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
              "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
              "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
N_PROMPT, N_NEW, N_PREFILL = 16, 32, 128
ENGINES = ("picogpt", "transformers-float32", "transformers-bfloat16")


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def save_weights(work: Path) -> None:
    """The random Qwen2.5-0.5B-shaped model, saved in bfloat16 with a byte vocabulary."""
    import torch
    import transformers

    from scripts.fixtures.llama import byte_vocabulary

    config = transformers.Qwen2Config(**QWEN25_05B)
    config.rope_parameters = {"rope_type": "default", "rope_theta": 1e6}
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(work / "hf")
    byte_vocabulary(work / "hf")


def picogpt_engine(work: Path):
    """(prefill, step) of picogpt on the weights, the whole vocabulary kept."""
    from picogpt.files.llama_hf import read_llama_config, read_weights
    from picogpt.llama.engine import LlamaCache, decode_step, prefill

    folder = work / "hf"
    hparams = read_llama_config(json.loads((folder / "config.json").read_text()),
                                folder / "config.json")
    params = read_weights(folder, hparams)

    def run_prompt(ids, n_new):
        cache = LlamaCache(params, hparams, len(ids) + n_new, batch=(1,))
        return int(prefill([ids], params, hparams, cache)[0].argmax()), cache

    def step(next_id, cache):
        return int(decode_step([next_id], params, hparams, cache)[0].argmax()), cache

    return run_prompt, step


def transformers_engine(work: Path, dtype: str):
    """(prefill, step) of transformers' Qwen2ForCausalLM in dtype, its own KV cache."""
    import torch
    import transformers

    torch.set_num_threads(threads())
    model = transformers.Qwen2ForCausalLM.from_pretrained(
        work / "hf", dtype=getattr(torch, dtype)).eval()

    @torch.inference_mode()
    def run_prompt(ids, n_new):
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        return int(out.logits[0, -1].argmax()), out.past_key_values

    @torch.inference_mode()
    def step(next_id, past):
        out = model(torch.tensor([[next_id]]), past_key_values=past, use_cache=True)
        return int(out.logits[0, -1].argmax()), out.past_key_values

    return run_prompt, step


def measure(engine: str, work: Path, repeats: int) -> dict:
    """This process's figures for one engine."""
    run_prompt, step = (picogpt_engine(work) if engine == "picogpt" else
                        transformers_engine(work, engine.split("-")[1]))
    long, short = list(range(300, 300 + N_PREFILL)), list(range(100, 100 + N_PROMPT))
    run_prompt(long, 1)  # warm: threads, pages
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_prompt(long, 1)
        times.append(time.perf_counter() - start)
    figures = {"prefill_tok_s": N_PREFILL / statistics.median(times)}
    totals = []
    for _ in range(repeats):
        next_id, state = run_prompt(short, N_NEW)
        start = time.perf_counter()
        for _ in range(N_NEW):
            next_id, state = step(next_id, state)
        totals.append(time.perf_counter() - start)
    figures["decode_tok_s"] = N_NEW / statistics.median(totals)
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def weight_bytes() -> int:
    """Bytes of the float32 weights (tied: the embedding once)."""
    e, f, v, n = (QWEN25_05B[k] for k in ("hidden_size", "intermediate_size", "vocab_size",
                                         "num_hidden_layers"))
    q, kv = e, 2 * 64
    block = e * q + 2 * e * kv + q * e + 3 * e * f + q + 2 * kv + 2 * e
    return 4 * (v * e + n * block + e)


def limits() -> dict:
    """limits.py's two measures on this machine: read bandwidth and the square GEMM's FLOP/s."""
    from scripts.benchmarks.limits import gemm_flops
    from scripts.benchmarks.speed import read_bandwidth

    return {"bandwidth": read_bandwidth(), "gemm": gemm_flops(2048, 2048, 2048)}


def report(results: dict, limit: dict) -> str:
    """The table, the ratios to transformers' float32, and the shares of the limits."""
    total = weight_bytes()
    decode_limit = limit["bandwidth"] / total
    n_params = total / 4
    prefill_flops = 2 * (n_params - QWEN25_05B["vocab_size"] * QWEN25_05B["hidden_size"])
    prefill_limit = limit["gemm"] / prefill_flops
    p, t32, t16 = (results[name] for name in ENGINES)
    lines = [f"{'':30}{'picogpt':>10}{'tf float32':>12}{'tf bf16':>10}{'vs f32':>8}"
             f"{'vs bf16':>9}{'of limit':>10}"]
    for label, key, limit_value in (("prefill 128 (tok/s)", "prefill_tok_s", prefill_limit),
                                    ("decode 32 after 16 (tok/s)", "decode_tok_s", decode_limit),
                                    ("peak memory (MiB)", "peak_rss_mb", None)):
        share = f"{p[key] / limit_value:10.0%}" if limit_value else f"{'':10}"
        lines.append(f"{label:30}{p[key]:10.1f}{t32[key]:12.1f}{t16[key]:10.1f}"
                     f"{p[key] / t32[key]:8.2f}{p[key] / t16[key]:9.2f}{share}")
    lines.append(f"limits: read bandwidth {limit['bandwidth'] / 1e9:.1f} GB/s -> decode at most "
                 f"{decode_limit:.1f} tok/s ({total / 1e9:.2f} GB of float32 weights a token); "
                 f"square GEMM {limit['gemm'] / 1e9:.0f} GFLOP/s -> prefill at most "
                 f"{prefill_limit:.0f} tok/s ({prefill_flops / 1e9:.2f} GFLOP a token)")
    for name in ENGINES:
        lines.append(f"peak memory / float32 weights ({total / 2**20:.0f} MiB): {name} "
                     f"{results[name]['peak_rss_mb'] * 2**20 / total:.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="folder for the weights")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure")
    parser.add_argument("--rounds", type=int, default=2, help="rounds the engines take turns in")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="picogpt-llama-bench-"))
    if args.child:
        return print(json.dumps(measure(args.child, work, args.repeats)))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_CACHE_HOME", str(work / "cache"))  # picogpt's store, here
    print(f"bench: {cpu_name()}, {threads()} threads, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; weights in {work}", file=sys.stderr)
    if not (work / "hf" / "config.json").is_file():
        save_weights(work)
    run_child(MODULE, "--child", "picogpt", "--work", str(work), "--repeats", "1")  # converts
    rounds = alternate(args.rounds, {name: lambda name=name: json.loads(run_child(
        MODULE, "--child", name, "--work", str(work), "--repeats", str(args.repeats)))
        for name in ENGINES})
    results = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
               for name, runs in rounds.items()}
    print(report(results, limits()))
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
