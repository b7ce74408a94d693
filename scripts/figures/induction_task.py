"""The pictures of docs/induction.md's run: an induction head forming, and the heads it formed.

    python -m picogpt.train --task induction --name demo --models_dir docs/induction
    python -m scripts.figures.induction_task --models_dir docs/induction --name demo
    python -m scripts.figures.induction_task --models_dir docs/induction --name demo --language zh

Reads the model folder and its curve.json and writes, into --out, task-curve.png (above: the
training loss and the held-out first and second copies, with and without lead-in tokens;
below: the scores of the heads that formed, over the same steps) and task-attention.png (the
attention of the formed previous-token and induction heads on a run of random tokens and its
copy, above the same two heads of the GPT-2 written by hand in scripts/fixtures/circuits.py).
With --language zh the files end in -zh and the words are Chinese. It prints the numbers the
page quotes.
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from picogpt.files.openai import load_encoder_hparams_and_params  # noqa: E402
from picogpt.inside import induction_score, previous_token_score, repeated_tokens, trace  # noqa: E402
from scripts.figures.common import ATTENTION, heatmap, save, use_language  # noqa: E402
from scripts.fixtures.circuits import induction_circuit  # noqa: E402

TEXT = {
    "en": {"batch": "training batch", "first": "held-out first copy",
           "second": "held-out second copy", "second_lead": "second copy after lead-in tokens",
           "loss": "loss (nats per token)", "step": "training step",
           "warmup": "warm-up ends", "lead_in": "lead-in begins",
           "curve": "{name}: loss while training (2 layers, 2 heads, vocabulary of {n_vocab})",
           "heads": "head scores on the held-out probes",
           "previous": "layer {layer} head {head}: previous-token score",
           "induction": "layer {layer} head {head}: induction score",
           "others": "every other head, best of each score", "score": "score",
           "trained": "trained (seed {seed}), layer {layer} head {head}: {kind} {score:.2f}",
           "by_hand": "written by hand, layer {layer} head {head}: {kind} {score:.2f}",
           "kind": {"previous": "previous-token", "induction": "induction"},
           "key": "key (looked at)", "query": "query (looking)",
           "attention": "the two heads on a run of random tokens and its copy"},
    "zh": {"batch": "训练批次", "first": "留出探测：第一遍", "second": "留出探测：第二遍",
           "second_lead": "第二遍（前面有引导词元）", "loss": "损失（奈特/词元）",
           "step": "训练步数", "warmup": "预热结束", "lead_in": "开始加入引导词元",
           "curve": "演示模型 {name}：训练中的损失（2 层、2 个头、词表 {n_vocab} 个词元）",
           "heads": "留出探测文本上的头分数",
           "previous": "第 {layer} 层 {head} 号头：前一词元分数",
           "induction": "第 {layer} 层 {head} 号头：归纳分数",
           "others": "其余各头，每种分数取最高", "score": "分数",
           "trained": "训练所得（随机种子 {seed}），第 {layer} 层 {head} 号头：{kind} {score:.2f}",
           "by_hand": "手工写成，第 {layer} 层 {head} 号头：{kind} {score:.2f}",
           "kind": {"previous": "前一词元", "induction": "归纳"},
           "key": "键（被看的位置）", "query": "查询（正在看的位置）",
           "attention": "两个头在一段随机词元及其重复上的注意力"},
}


def formed(last: dict) -> dict[str, tuple[int, int]]:
    """The heads that formed: the best previous-token head of layer 0 and the best induction
    head of the last layer, at the end of training."""
    previous, induction = np.array(last["previous"]), np.array(last["induction"])
    return {"previous": (0, int(np.argmax(previous[0]))),
            "induction": (len(induction) - 1, int(np.argmax(induction[-1])))}


def draw_curve(curve: dict, name: str, text: dict, path: Path) -> None:
    measured, settings = curve["measured"], curve["settings"]
    steps = [m["step"] for m in measured]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7.4), sharex=True,
                                         layout="constrained", height_ratios=[3, 2])
    top.plot(np.arange(len(curve["loss"])), curve["loss"], color="#bbbbbb", lw=0.7,
             label=text["batch"])
    for key, colour, style, lead in (("first", "#3574d4", "o-", None),
                                     ("second", "#d04030", "o-", False),
                                     ("second_lead", "#e8a020", "s--", True)):
        values = [np.mean([c["first" if key == "first" else "second"] for c in m["copies"]
                           if lead is None or (c["lead_in"] > 0) == lead]) for m in measured]
        top.plot(steps, values, style, color=colour, ms=2.5, lw=1.2, label=text[key])
    for axes in (top, bottom):
        for at, label in ((settings["warmup"], "warmup"), (settings["lead_in_from"], "lead_in")):
            axes.axvline(at, color="#777777", ls=":", lw=1)
            if axes is top:
                axes.text(at, 5.55, f" {text[label]}", fontsize=8, color="#555555", va="top")
    top.set_ylim(0, 5.6)
    top.set_ylabel(text["loss"])
    top.set_title(text["curve"].format(name=name, n_vocab=settings["n_vocab"]), fontsize=10)
    top.legend(fontsize=8, loc="center right")
    heads = formed(measured[-1])
    for kind, colour in (("previous", "#2a9d4a"), ("induction", "#8a3ab9")):
        layer, head = heads[kind]
        bottom.plot(steps, [m[kind][layer][head] for m in measured], "o-", color=colour, ms=2.5,
                    lw=1.4, label=text[kind].format(layer=layer, head=head))
        others = [max(s for (i, j), s in np.ndenumerate(np.array(m[kind])) if (i, j) != heads[kind])
                  for m in measured]
        bottom.plot(steps, others, "--", color=colour, lw=0.9, alpha=0.6)
    bottom.plot([], [], "--", color="#777777", lw=0.9, label=text["others"])
    bottom.set_ylim(0, 1.05)
    bottom.set_xlabel(text["step"])
    bottom.set_ylabel(text["score"])
    bottom.set_title(text["heads"], fontsize=10)
    bottom.legend(fontsize=8, loc="center right")
    save(figure, path)


def draw_attention(params: dict, n_head: int, heads: dict, seed: int, text: dict,
                   path: Path) -> dict:
    """Above, the trained model's two heads on [CLS], 10 random tokens and the same 10; below,
    the hand-written circuit's two heads on its own text of the same form."""
    n_vocab = len(params["wte"])
    rows = [("trained", params, n_head, heads, repeated_tokens(10, seed=5, n_vocab=n_vocab)),
            ("by_hand", induction_circuit(), 3, {"previous": (0, 0), "induction": (1, 0)},
             repeated_tokens(10, seed=3, n_vocab=20))]
    figure, grid = plt.subplots(2, 2, figsize=(12, 12), layout="constrained")
    scores = {}
    for row, (which, model, heads_of, where, ids) in zip(grid, rows):
        _, values = trace(ids, model, heads_of)
        kinds = {"previous": previous_token_score(values), "induction": induction_score(values,
                                                                                        ids)}
        start = len(model["wte"]) - 1
        labels = ["[CLS]" if i == start else f"t{i}" for i in ids]
        for axes, (kind, (layer, head)) in zip(row, where.items()):
            score = float(kinds[kind][layer, head])
            scores[which, kind] = score
            heatmap(axes, values[f"blocks.{layer}.attn.pattern"][head], labels, ATTENTION,
                    text[which].format(seed=seed, layer=layer, head=head,
                                       kind=text["kind"][kind], score=score), colour_bar=False)
            axes.set_xlabel(text["key"])
            axes.set_ylabel(text["query"])
    figure.suptitle(text["attention"])
    save(figure, path)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models_dir", default="docs/induction")
    parser.add_argument("--name", default="demo")
    parser.add_argument("--out", type=Path, default=Path("docs/induction"))
    parser.add_argument("--language", choices=sorted(TEXT), default="en")
    args = parser.parse_args()
    use_language(args.language)
    text, end = TEXT[args.language], "" if args.language == "en" else "-zh"
    _, hparams, params = load_encoder_hparams_and_params(args.name, args.models_dir)
    curve = json.loads((Path(args.models_dir) / args.name / "curve.json").read_text())
    draw_curve(curve, args.name, text, args.out / f"task-curve{end}.png")
    heads = formed(curve["measured"][-1])
    scores = draw_attention(params, hparams["n_head"], heads, curve["settings"]["seed"], text,
                            args.out / f"task-attention{end}.png")
    for m in curve["measured"][:: max(1, len(curve["measured"]) // 16)] + curve["measured"][-1:]:
        (pl, ph), (il, ih) = heads["previous"], heads["induction"]
        print(f"step {m['step']:5}: first {m['first']:.2f}, second {m['second']:.2f}; "
              f"previous-token L{pl}H{ph} {m['previous'][pl][ph]:.2f}, induction L{il}H{ih} "
              f"{m['induction'][il][ih]:.2f}")
    print(f"on the attention picture's texts: {scores}")


if __name__ == "__main__":
    main()
