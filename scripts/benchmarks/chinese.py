"""Decode speed of a uer-shaped Chinese GPT-2 (BERT's vocabulary): picogpt against transformers.

    python -m scripts.benchmarks.chinese --work /tmp/chinese [--rounds 5]
    python -m scripts.benchmarks.chinese --sizes    # picogpt alone on each uer size

Writes (or reuses) WORK/uer: random weights of uer/gpt2-chinese-cluecorpussmall's shape
(n_vocab 21128, n_ctx 1024, 12 layers, n_embd 768, 12 heads: 102M parameters) saved by
GPT2LMHeadModel.save_pretrained, with BertTokenizer's files over scripts.fixtures.bert_vocab's
vocab.txt. picogpt loads it as `--hf WORK/uer` does, transformers with from_pretrained; both
run in this one process on the same threads. Each round feeds [CLS] and 15 random characters
to both engines in turn, then times 40 greedy decode steps with each one's KV cache
(transformers: a loop of forward calls, and generate() less its prefill; the faster of the
two counts). Prints tokens/s per round, the medians and picogpt's ratio. Needs the test extra.

With --sizes, picogpt alone decodes on random weights (held in memory, never written) of each
uer size in SIZES, for docs/chinese-gpt2.md: parameters, and decode tokens/s after 16 tokens.
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from scripts.benchmarks.common import threads

SHAPE = {"n_vocab": 21128, "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12}
N_PROMPT, N_NEW = 16, 40
# (n_layer, n_embd, n_head) of uer's GPT2-Chinese sizes, as their config.json files give them
SIZES = {"distil": (6, 768, 12), "base": (12, 768, 12), "medium": (24, 1024, 16),
         "large": (36, 1280, 20), "GPT-2 124M, for comparison": (12, 768, 12)}


def size_speeds(rounds: int) -> None:
    """picogpt's decode speed on random weights of each uer size."""
    from picogpt.files.params import nest
    from picogpt.kvcache import KVCache, decode_step, prefill
    from scripts.fixtures.checkpoint import random_arrays

    for name, (n_layer, n_embd, n_head) in SIZES.items():
        hparams = {**SHAPE, "n_layer": n_layer, "n_embd": n_embd, "n_head": n_head,
                   "n_vocab": 50257 if name.startswith("GPT-2") else SHAPE["n_vocab"]}
        arrays = random_arrays(hparams, 0, sharp=False)
        params = nest({key.removeprefix("model/").replace("/", "."): a[0] if a.ndim == 3 else a
                       for key, a in arrays.items()})
        del arrays
        n_params = sum(a.size for a in leaves(params))
        speeds = []
        for n_new in [4] + [N_NEW] * rounds:  # the first, short, is untimed
            cache = KVCache(params, n_head, N_PROMPT + n_new)
            next_id = int(np.argmax(prefill(list(range(1000, 1000 + N_PROMPT)), params, n_head,
                                            cache)))
            start = time.perf_counter()
            for _ in range(n_new):
                next_id = int(np.argmax(decode_step(next_id, params, n_head, cache)))
            speeds.append(n_new / (time.perf_counter() - start))
        print(f"{name}: {n_layer} layers, n_embd {n_embd}, {n_params / 1e6:.1f}M parameters; "
              f"decode {N_NEW} after {N_PROMPT}: {statistics.median(speeds[1:]):.1f} tok/s "
              f"(median of {rounds}, {threads()} threads)", flush=True)
        del params, cache


def leaves(tree):
    """Every array of a params tree."""
    if isinstance(tree, dict):
        return [a for value in tree.values() for a in leaves(value)]
    if isinstance(tree, list):
        return [a for value in tree for a in leaves(value)]
    return [tree]


def write_folder(folder: Path) -> None:
    """The uer-shaped folder, as save_pretrained writes it."""
    import torch
    from transformers import BertTokenizer, GPT2Config, GPT2LMHeadModel

    from scripts.fixtures import bert_vocab

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=SHAPE["n_vocab"], n_positions=SHAPE["n_ctx"],
                        n_embd=SHAPE["n_embd"], n_head=SHAPE["n_head"], n_layer=SHAPE["n_layer"],
                        tokenizer_class="BertTokenizer")
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    vocab = bert_vocab.write(folder, bert_vocab.chinese_vocab())
    BertTokenizer(str(vocab), do_lower_case=False).save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", action="store_true", help="picogpt alone on each uer size")
    args = parser.parse_args()
    if args.sizes:
        return size_speeds(args.rounds)
    if args.work is None:
        parser.error("--work is needed to time picogpt against transformers")
    folder = args.work / "uer"
    if not (folder / "model.safetensors").is_file():
        write_folder(folder)

    import torch
    from transformers import GPT2LMHeadModel

    from picogpt.cli.command import reuse_freed_memory
    from picogpt.files.hf import load_hf
    from picogpt.kvcache import KVCache, decode_step, prefill

    reuse_freed_memory()
    torch.set_num_threads(threads())
    encoder, hparams, params = load_hf(str(folder))
    assert hparams == SHAPE and encoder.n_vocab == SHAPE["n_vocab"], (hparams, encoder.n_vocab)
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    n_head = hparams["n_head"]

    def picogpt_decode(ids: list[int]) -> float:
        cache = KVCache(params, n_head, len(ids) + N_NEW)
        next_id = int(np.argmax(prefill(ids, params, n_head, cache)))
        start = time.perf_counter()
        for _ in range(N_NEW):
            next_id = int(np.argmax(decode_step(next_id, params, n_head, cache)))
        return N_NEW / (time.perf_counter() - start)

    @torch.inference_mode()
    def transformers_decode(ids: list[int]) -> float:
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        next_id, past = int(out.logits[0, -1].argmax()), out.past_key_values
        start = time.perf_counter()
        for _ in range(N_NEW):
            out = model(torch.tensor([[next_id]]), past_key_values=past, use_cache=True)
            next_id, past = int(out.logits[0, -1].argmax()), out.past_key_values
        loop = N_NEW / (time.perf_counter() - start)
        start = time.perf_counter()
        model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        prefill_time = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(torch.tensor([ids]), max_new_tokens=N_NEW, min_new_tokens=N_NEW,
                       do_sample=False, use_cache=True, pad_token_id=0)
        generate = N_NEW / (time.perf_counter() - start - prefill_time)
        return max(loop, generate)

    rng = np.random.default_rng(0)
    engines = {"picogpt": picogpt_decode, "transformers": transformers_decode}
    speeds = {name: [] for name in engines}
    for decode in engines.values():  # one untimed run each: first calls allocate
        decode([encoder.start, *rng.integers(1000, 8000, N_PROMPT - 1).tolist()])
    for i in range(args.rounds):
        ids = [encoder.start, *rng.integers(1000, 8000, N_PROMPT - 1).tolist()]
        for name in list(engines) if i % 2 == 0 else list(engines)[::-1]:
            speeds[name].append(engines[name](ids))
        print(f"round {i + 1}: " + ", ".join(f"{name} {speeds[name][-1]:.1f} tok/s"
                                             for name in engines), flush=True)
    ratios = [p / t for p, t in zip(speeds["picogpt"], speeds["transformers"])]
    print(f"decode {N_NEW} after {N_PROMPT} (tok/s, median of {args.rounds}): picogpt "
          f"{statistics.median(speeds['picogpt']):.1f}, transformers "
          f"{statistics.median(speeds['transformers']):.1f}; ratio per round "
          f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}x "
          f"({threads()} threads)")


if __name__ == "__main__":
    main()
