"""Training speed: picogpt's training step against the same model in torch.

Each engine trains a GPT-2 of the same shape on random batches, float32, on 2 threads (or
--threads):
- `picogpt`: the step train.py's loop takes, fasttrain.loss_and_grads and train.adamw;
- `backward`: the readable step, backward.loss_and_grads and train.adamw (with --backward);
- `torch`: transformers' GPT2LMHeadModel, cross-entropy, backward and torch.optim.AdamW (decay
  on matrices only, as train.py).
Shapes: `default` is train.py's (GPT-2's 50,257 tokens, 2 layers, 4 heads, n_embd 128, n_ctx 128,
16 windows a step), `poems` the poems recipe's (a 6,000-character vocabulary, 4 layers, n_ctx
64, 32 windows). Each engine runs in a child process of its own, so its memory peak is its own;
rounds alternate between the engines, and each ratio is of medians.

The `llama-poems` shape trains the LLaMA block (`--model llama`) at the poems shape: 4 query
heads over 2 key/value heads, SwiGLU of 352, tied head. picogpt's step is
llama/fasttrain.loss_and_grads (llama/backward.py's with --backward), torch's transformers'
LlamaForCausalLM (its default attention, SDPA) with the same AdamW.

The `couplet` shapes train the 2017 encoder-decoder instead: picogpt's step is
transformer.backward.loss_and_grads and train.adamw, torch's is torch.nn.Transformer with an
nn.Embedding shared by source, target and output (the same model: 2 + 2 layers, d_model 128, 4
heads, d_ff 512, pre-norm, ReLU, no dropout, 6,000 characters), padding and causal masks,
cross-entropy that ignores padding, and AdamW. A batch is 64 (`couplet`) or 128
(`couplet-128`) pairs of a source of 8 ids (7 characters and the end) and a target of 9 (the
start, 7 characters, the end): the decoder reads 9 positions and is scored on 9. Tokens a
second count the target's.

    python -m scripts.benchmarks.training --rounds 3 --steps 8 --shape default poems
    python -m scripts.benchmarks.training --rounds 5 --steps 10 --shape couplet couplet-128
    python -m scripts.benchmarks.training --rounds 3 --steps 8 --shape poems llama-poems

It also splits picogpt's step into its parts, to show where the time goes.
"""

import argparse
import json
import resource
import statistics
import time

from scripts.benchmarks.common import alternate, run_child

SHAPES = {"default": ({"n_vocab": 50257, "n_ctx": 128, "n_embd": 128, "n_head": 4,
                       "n_layer": 2}, 16),
          "poems": ({"n_vocab": 6000, "n_ctx": 64, "n_embd": 128, "n_head": 4, "n_layer": 4},
                    32)}
COUPLET = {"n_vocab": 6000, "n_src": 8, "n_ctx": 9, "n_embd": 128, "n_head": 4, "n_layer": 2,
           "d_ff": 512}  # n_ctx: the target's length
SHAPES |= {"couplet": (COUPLET, 64), "couplet-128": (COUPLET, 128),
           "llama-poems": ({**SHAPES["poems"][0], "model": "llama", "n_kv_head": 2,
                            "n_ffn": 352}, 32)}
HPARAMS = dict(SHAPES["default"][0])  # the shape a child trains, set from its --shape
PARTS = ("block_forward", "softmax_cross_entropy_", "block_backward")  # fasttrain's, timed
SEQ2SEQ_PARTS = ("encoder_layer_forward", "decoder_layer_forward", "softmax_cross_entropy_",
                 "decoder_layer_backward", "encoder_layer_backward")  # transformer/backward.py's


def run_steps(step, steps: int, n_batch: int, before=lambda: None) -> dict:
    """Two warm-up steps (first allocations, BLAS threads), then steps timed: tokens a second,
    seconds, and the process's CPU milliseconds a step (steadier on a shared machine)."""
    for _ in range(2):
        step()
    before()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    return {"tokens_per_s": steps * n_batch * HPARAMS["n_ctx"] / seconds, "seconds": seconds,
            "cpu_ms_per_step": (time.process_time() - cpu) / steps * 1000}


def timer(function, name: str, spent: dict):
    """function, adding the seconds each call takes to spent[name]."""
    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        return result
    return timed


def numpy_steps(engine: str, steps: int, n_batch: int, parts: bool) -> dict:
    import numpy as np

    from picogpt import backward, fasttrain, train
    from picogpt.llama import backward as llama_backward
    from picogpt.llama import fasttrain as llama_fasttrain
    from picogpt.llama import train as llama_train

    rng = np.random.default_rng(0)
    if HPARAMS.get("model") == "llama":
        hparams = llama_train.hparams(*(HPARAMS[key] for key in (
            "n_vocab", "n_ctx", "n_embd", "n_head", "n_layer", "n_kv_head", "n_ffn")))
        params, timed_module = llama_train.init_params(hparams, rng), llama_fasttrain
        module = llama_fasttrain if engine == "picogpt" else llama_backward
        settings = llama_train.forward_hparams(hparams)
    else:
        params, timed_module = train.init_params(HPARAMS, rng), fasttrain
        module = fasttrain if engine == "picogpt" else backward
        settings = {"n_head": HPARAMS["n_head"]}
    state = {"step": 0}
    ids = rng.integers(0, HPARAMS["n_vocab"], 100_000)
    data = train.batches(ids, n_batch, HPARAMS["n_ctx"], rng)
    spent = {}
    if parts:  # time each part by wrapping the functions loss_and_grads calls
        for name in PARTS:
            setattr(timed_module, name, timer(getattr(timed_module, name), name, spent))

    def step():
        inputs, targets = next(data)
        nonlocal params, state
        start = time.perf_counter()
        _, grads = module.loss_and_grads(inputs, targets, params, **settings)
        middle = time.perf_counter()
        params, state = train.adamw(params, grads, state, 1e-3)
        spent["loss_and_grads"] = spent.get("loss_and_grads", 0.0) + middle - start
        spent["adamw"] = spent.get("adamw", 0.0) + time.perf_counter() - middle

    return {**run_steps(step, steps, n_batch, before=spent.clear), "parts": spent}


def torch_steps(steps: int, n_batch: int) -> dict:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    if HPARAMS.get("model") == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(
            vocab_size=HPARAMS["n_vocab"], hidden_size=HPARAMS["n_embd"],
            intermediate_size=HPARAMS["n_ffn"], num_hidden_layers=HPARAMS["n_layer"],
            num_attention_heads=HPARAMS["n_head"], num_key_value_heads=HPARAMS["n_kv_head"],
            max_position_embeddings=HPARAMS["n_ctx"], tie_word_embeddings=True)).train()
        return torch_model_steps(model, steps, n_batch)
    config = GPT2Config(vocab_size=HPARAMS["n_vocab"], n_positions=HPARAMS["n_ctx"],
                        n_embd=HPARAMS["n_embd"], n_layer=HPARAMS["n_layer"],
                        n_head=HPARAMS["n_head"], activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return torch_model_steps(GPT2LMHeadModel(config).train(), steps, n_batch)


def torch_model_steps(model, steps: int, n_batch: int) -> dict:
    """Steps of a transformers causal LM: cross-entropy, backward, AdamW (decay on matrices)."""
    import numpy as np
    import torch

    matrices = [p for p in model.parameters() if p.ndim == 2]
    others = [p for p in model.parameters() if p.ndim != 2]
    optimiser = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}], lr=1e-3,
                                  betas=(0.9, 0.95))
    rng = np.random.default_rng(0)

    def step():
        window = torch.from_numpy(rng.integers(0, HPARAMS["n_vocab"],
                                               (n_batch, HPARAMS["n_ctx"] + 1)))
        logits = model(window[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 window[:, 1:].reshape(-1))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    return run_steps(step, steps, n_batch)


def pairs(rng, n_batch: int):
    """Random source and target ids of full length (none is the pad id, 0): [n_batch, n_src],
    and [n_batch, n_ctx + 1], the start to the end."""
    return (rng.integers(1, HPARAMS["n_vocab"], (n_batch, HPARAMS["n_src"])),
            rng.integers(1, HPARAMS["n_vocab"], (n_batch, HPARAMS["n_ctx"] + 1)))


def seq2seq_numpy_steps(steps: int, n_batch: int, parts: bool) -> dict:
    import numpy as np

    from picogpt import train, transformer
    from picogpt.transformer import backward as transformer_backward

    rng = np.random.default_rng(0)
    params, state = transformer.init_params(HPARAMS, rng), {"step": 0}
    spent = {}
    if parts:
        for name in SEQ2SEQ_PARTS:
            setattr(transformer_backward, name,
                    timer(getattr(transformer_backward, name), name, spent))

    def step():
        nonlocal params, state
        src, tgt = pairs(rng, n_batch)
        start = time.perf_counter()
        _, grads = transformer_backward.loss_and_grads(src, tgt[:, :-1], tgt[:, 1:], params,
                                                       HPARAMS["n_head"], 0, norm_first=True)
        middle = time.perf_counter()
        params, state = train.adamw(params, grads, state, 1e-3)
        spent["loss_and_grads"] = spent.get("loss_and_grads", 0.0) + middle - start
        spent["adamw"] = spent.get("adamw", 0.0) + time.perf_counter() - middle

    return {**run_steps(step, steps, n_batch, before=spent.clear), "parts": spent}


def seq2seq_torch_steps(steps: int, n_batch: int) -> dict:
    import math

    import numpy as np
    import torch

    from picogpt.transformer import sinusoidal_positions

    torch.manual_seed(0)
    d_model, n_layer = HPARAMS["n_embd"], HPARAMS["n_layer"]
    model = torch.nn.Transformer(d_model, HPARAMS["n_head"], n_layer, n_layer, HPARAMS["d_ff"],
                                 dropout=0.0, activation="relu", batch_first=True,
                                 norm_first=True).train()
    embedding = torch.nn.Embedding(HPARAMS["n_vocab"], d_model)
    weights = [*model.parameters(), embedding.weight]
    optimiser = torch.optim.AdamW(
        [{"params": [p for p in weights if p.ndim == 2], "weight_decay": 0.1},
         {"params": [p for p in weights if p.ndim != 2], "weight_decay": 0.0}], lr=1e-3,
        betas=(0.9, 0.95))
    positions = torch.from_numpy(sinusoidal_positions(max(HPARAMS["n_src"], HPARAMS["n_ctx"]),
                                                      d_model))
    causal = torch.nn.Transformer.generate_square_subsequent_mask(HPARAMS["n_ctx"])
    rng = np.random.default_rng(0)

    def embed(ids):
        return embedding(ids) * math.sqrt(d_model) + positions[: ids.shape[1]]

    def step():
        src, tgt = (torch.from_numpy(ids) for ids in pairs(rng, n_batch))
        src_pad, tgt_pad = src == 0, tgt[:, :-1] == 0  # the couplet task's masks, kept here
        x = model(embed(src), embed(tgt[:, :-1]), tgt_mask=causal, src_key_padding_mask=src_pad,
                  tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        logits = x @ embedding.weight.T  # tied, as picogpt's shared "embed"
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt[:, 1:].reshape(-1), ignore_index=0)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    return run_steps(step, steps, n_batch)


def child(engine: str, shape: str, steps: int, n_batch: int, parts: bool,
          threads: int) -> None:
    HPARAMS.update(SHAPES[shape][0])
    if engine == "torch":
        import torch

        torch.set_num_threads(threads)
        result = (seq2seq_torch_steps if "n_src" in HPARAMS else torch_steps)(steps, n_batch)
    elif "n_src" in HPARAMS:
        result = seq2seq_numpy_steps(steps, n_batch, parts)
    else:
        result = numpy_steps(engine, steps, n_batch, parts)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run(engine: str, shape: str, steps: int, parts: bool = False, threads: int = 2) -> dict:
    """One engine's figures, measured in a child process of its own."""
    return json.loads(run_child("scripts.benchmarks.training", "--child", engine, "--shape",
                                shape, "--steps", str(steps), *["--parts"] * parts,
                                "--threads", str(threads),
                                env={"OMP_NUM_THREADS": str(threads),
                                     "OPENBLAS_NUM_THREADS": str(threads)}))


SEQ2SEQ = ("couplet", "couplet-128")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--shape", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--backward", action="store_true",
                        help="also time backward.py's readable step")
    parser.add_argument("--child", choices=["picogpt", "backward", "torch"])
    parser.add_argument("--parts", action="store_true")
    parser.add_argument("--threads", type=int, default=2, help="BLAS and torch threads")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.shape[0], args.steps, SHAPES[args.shape[0]][1], args.parts,
              args.threads)
        return
    for shape in args.shape:
        engines = ["picogpt", "torch", *["backward"] * (args.backward and shape not in SEQ2SEQ)]
        results = alternate(args.rounds, {engine: lambda engine=engine, shape=shape: run(
            engine, shape, args.steps, threads=args.threads) for engine in engines})
        split = run("picogpt", shape, args.steps, parts=True, threads=args.threads)
        speeds = {engine: statistics.median(r["tokens_per_s"] for r in runs)
                  for engine, runs in results.items()}
        print(f"shape {shape}: {SHAPES[shape][0]}, batch {SHAPES[shape][1]} x "
              f"{SHAPES[shape][0]['n_ctx']}, float32, {args.threads} threads, "
              f"{args.rounds} rounds of {args.steps} steps")
        for engine, runs in results.items():
            per_round = ", ".join(f"{r['tokens_per_s']:,.0f}" for r in runs)
            peak = max(r["peak_rss_mib"] for r in runs)
            cpu = statistics.median(r["cpu_ms_per_step"] for r in runs)
            print(f"  {engine:8s} tokens/s per round: {per_round}; median "
                  f"{speeds[engine]:,.0f}; CPU {cpu:,.0f} ms a step; peak memory {peak:,.0f} MiB")
        for engine in engines:
            if engine != "torch":
                print(f"  {engine} / torch: {speeds[engine] / speeds['torch']:.2f}x")
        total, parts = split["seconds"], split["parts"]
        named = SEQ2SEQ_PARTS if shape in SEQ2SEQ else PARTS
        rest = ("the output layer's products, embeddings, final norms" if shape in SEQ2SEQ
                else "the unembedding's products, embedding, ln_f")
        rows = {**{name: parts[name] for name in (*named, "adamw")},
                rest: parts["loss_and_grads"] - sum(parts[name] for name in named)}
        print(f"  where picogpt's time goes ({total:.2f} s for {args.steps} steps, timed apart):")
        for name, seconds in sorted(rows.items(), key=lambda item: -item[1]):
            print(f"    {name:52s} {seconds / total:6.1%}")


if __name__ == "__main__":
    main()
