"""Draw GPT-2 as two diagrams with every array's shape: the whole model, and one attention layer.

model.png follows `gpt2` from ids to logits (wte + wpe, n_layer pre-norm blocks, ln_f, @ wte.T);
attention.png follows `mha` (c_attn, heads split, q k^T / sqrt(d_head) + mask, softmax, @ v,
heads merged, c_proj). The small mask and weights drawn in attention.png are computed by
picogpt.model's own future_mask and attention_weights on random q and k. Each picture is drawn
in English and, with -zh in its name, in Chinese (Debian: fonts-noto-cjk).

    python -m scripts.figures.architecture docs/architecture
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

from picogpt.model import attention_weights, future_mask  # noqa: E402
from scripts.figures.common import ATTENTION, save, use_language  # noqa: E402

TEXT = {
    "en": {
        "model_title": "GPT-2's forward pass: gpt2(ids, **params, n_head)",
        "ids": "token ids",
        "wte": "token embedding  wte[ids]",
        "wpe": "position embedding  wpe[0 : n_seq]",
        "embed": "embed: added, not concatenated",
        "ln_1": "layer_norm  (ln_1)",
        "mha": "mha  (attn): multi-head self-attention",
        "mha_note": "[n_seq, n_embd] → [n_seq, n_embd]: the next picture",
        "ln_2": "layer_norm  (ln_2)",
        "ffn": "ffn  (mlp): linear c_fc → gelu → linear c_proj",
        "ffn_shape": "[n_seq, n_embd] → [n_seq, 4·n_embd] → [n_seq, n_embd]",
        "residual": "residual stream  x  [n_seq, n_embd]",
        "block": "transformer_block × n_layer",
        "ln_f": "layer_norm  (ln_f)",
        "unembed": "@ wte.T",
        "tied": "the same wte\n(tied weights)",
        "logits": "logits: a score for each possible next token, at every position",
        "sizes": "124M: n_embd 768, n_head 12, n_layer 12, n_vocab 50257, n_ctx 1024",
        "attn_title": "One attention layer: mha(x, c_attn, c_proj, n_head)",
        "x": "x = layer_norm(resid, ln_1)",
        "c_attn": "linear  c_attn",
        "split": "np.split into q, k, v",
        "split_heads": "split_heads: n_embd = n_head × d_head",
        "scores": "q @ k.T",
        "scale": "/ sqrt(d_head)",
        "scale_note": "the code divides q first: the same numbers",
        "mask": "+ future_mask",
        "softmax": "softmax: each row sums to 1",
        "mix": "@ v: each query's weighted mix of the values",
        "merge": "merge_heads",
        "c_proj": "linear  c_proj, then added to the residual stream",
        "per_head": "every head at once, side by side",
        "mask_pic": "future_mask(5, 5), added to the scores",
        "weights_pic": "one head's attention_weights, 5 positions",
        "key": "key position",
        "query": "query position",
    },
    "zh": {
        "model_title": "GPT-2 的前向传播：gpt2(ids, **params, n_head)",
        "ids": "词元 id",
        "wte": "词嵌入  wte[ids]",
        "wpe": "位置嵌入  wpe[0 : n_seq]",
        "embed": "embed：两者相加，不是拼接",
        "ln_1": "层归一化  (ln_1)",
        "mha": "mha（attn）：多头自注意力",
        "mha_note": "[n_seq, n_embd] → [n_seq, n_embd]：见下一张图",
        "ln_2": "层归一化  (ln_2)",
        "ffn": "ffn（mlp）：线性层 c_fc → gelu → 线性层 c_proj",
        "ffn_shape": "[n_seq, n_embd] → [n_seq, 4·n_embd] → [n_seq, n_embd]",
        "residual": "残差流  x  [n_seq, n_embd]",
        "block": "transformer_block，重复 n_layer 次",
        "ln_f": "层归一化  (ln_f)",
        "unembed": "@ wte.T",
        "tied": "同一张 wte\n（权重共享）",
        "logits": "logits：每个位置上，每个候选的下一个词元各一个分数",
        "sizes": "124M：n_embd 768，n_head 12，n_layer 12，n_vocab 50257，n_ctx 1024",
        "attn_title": "一层注意力：mha(x, c_attn, c_proj, n_head)",
        "x": "x = layer_norm(残差流, ln_1)",
        "c_attn": "线性层  c_attn",
        "split": "np.split 切成 q、k、v",
        "split_heads": "split_heads：n_embd = n_head × d_head",
        "scores": "q @ k.T",
        "scale": "/ sqrt(d_head)",
        "scale_note": "代码里先除 q，结果相同",
        "mask": "+ future_mask",
        "softmax": "softmax：每行之和为 1",
        "mix": "@ v：每个查询对各个值的加权和",
        "merge": "merge_heads",
        "c_proj": "线性层  c_proj，再加回残差流",
        "per_head": "所有头并排，一次算完",
        "mask_pic": "future_mask(5, 5)：加到分数上",
        "weights_pic": "一个头的 attention_weights（5 个位置）",
        "key": "键的位置",
        "query": "查询的位置",
    },
}

COLOURS = {"data": "#eef3fb", "norm": "#fdf1d8", "attn": "#f9dede", "ffn": "#dff2e1",
           "out": "#ece6f6", "edge": "#555555"}
MONO = "DejaVu Sans Mono"


def mono() -> list[str]:
    """Monospace for code and shapes, falling back to the language's font for its characters."""
    return [MONO, *matplotlib.rcParams["font.family"]]


def box(axes, x, y, width, text, shape=None, colour="data", height=None, note=None):
    """A rounded box centred at (x, y): a label and, below it, the array's shape in monospace,
    then an optional small note."""
    height = height or (1.25 if note else 0.95 if shape else 0.6)
    axes.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                  boxstyle="round,pad=0.02,rounding_size=0.12",
                                  fc=COLOURS[colour], ec=COLOURS["edge"], lw=1))
    middle = y + 0.15 if note else y  # a note takes the bottom line
    if note:
        axes.text(x, y - 0.38, note, ha="center", va="center", fontsize=8, color="#555555")
    if shape:
        axes.text(x, middle + 0.17, text, ha="center", va="center", fontsize=10)
        axes.text(x, middle - 0.22, shape, ha="center", va="center", fontsize=8.5, family=mono(),
                  color="#333333")
    else:
        axes.text(x, y, text, ha="center", va="center", fontsize=10)
    return (x, y - height / 2), (x, y + height / 2)


def arrow(axes, start, end, style="-|>", **kwargs):
    kwargs = {"color": COLOURS["edge"], "lw": 1.1, **kwargs}
    axes.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, shrinkA=0,
                                   shrinkB=0, **kwargs))


def plus(axes, x, y):
    """The residual sum: a circle with a plus."""
    axes.add_patch(plt.Circle((x, y), 0.22, fc="white", ec=COLOURS["edge"], lw=1.1))
    axes.text(x, y - 0.02, "+", ha="center", va="center", fontsize=13)


def canvas(width, height, inches):
    figure = plt.figure(figsize=inches)
    axes = figure.add_axes([0, 0, 1, 1])
    axes.set_xlim(0, width)
    axes.set_ylim(0, height)
    axes.set_aspect("equal")
    axes.axis("off")
    return figure, axes


def draw_model(text: dict):
    """ids at the top, logits at the bottom, the residual stream down the left."""
    figure, axes = canvas(11, 16.4, (8.2, 12.2))
    centre, left = 5.0, 1.1
    axes.text(centre + 0.4, 15.95, text["model_title"], ha="center", fontsize=12.5,
              weight="bold")
    bottom, _ = box(axes, centre, 15.0, 3.2, text["ids"], "ids  [n_seq]")
    _, wte_top = box(axes, 3.1, 13.4, 3.7, text["wte"], "[n_seq, n_embd]")
    _, wpe_top = box(axes, 7.15, 13.4, 3.9, text["wpe"], "[n_seq, n_embd]")
    arrow(axes, bottom, (3.1, wte_top[1]))
    arrow(axes, (centre + 0.3, bottom[1]), (7.15, wpe_top[1]))
    plus(axes, centre, 12.15)
    arrow(axes, (3.1, 12.92), (centre - 0.22, 12.15))
    arrow(axes, (7.15, 12.92), (centre + 0.22, 12.15))
    axes.text(centre + 0.4, 12.15, text["embed"], ha="left", va="center", fontsize=9,
              color="#444444")
    # one block, inside a dashed frame, with the residual stream down its left side
    axes.add_patch(Rectangle((0.45, 3.95), 9.3, 7.5, fill=False, ls="--", ec="#888888", lw=1))
    axes.text(9.6, 11.2, text["block"], ha="right", va="center", fontsize=10.5,
              family=mono(), weight="bold")
    arrow(axes, (centre, 11.93), (centre, 10.95), style="-")
    axes.plot([left, centre], [10.95, 10.95], color=COLOURS["edge"], lw=1.1)
    ln1_bottom, ln1_top = box(axes, centre, 10.2, 3.4, text["ln_1"], colour="norm")
    arrow(axes, (centre, 10.95), ln1_top)
    mha_bottom, mha_top = box(axes, centre, 8.95, 5.6, text["mha"], text["mha_note"],
                              colour="attn")
    arrow(axes, ln1_bottom, mha_top)
    plus(axes, centre, 7.7)
    arrow(axes, mha_bottom, (centre, 7.92))
    axes.plot([left, left], [10.95, 7.7], color=COLOURS["edge"], lw=1.1)
    arrow(axes, (left, 7.7), (centre - 0.22, 7.7))
    axes.plot([left, left], [7.2, 4.45], color=COLOURS["edge"], lw=1.1)
    axes.plot([left, centre], [7.2, 7.2], color=COLOURS["edge"], lw=1.1)
    axes.plot([centre, centre], [7.48, 7.2], color=COLOURS["edge"], lw=1.1)
    ln2_bottom, ln2_top = box(axes, centre, 6.55, 3.4, text["ln_2"], colour="norm")
    arrow(axes, (centre, 7.2), ln2_top)
    ffn_bottom, ffn_top = box(axes, centre + 0.45, 5.35, 7.4, text["ffn"], text["ffn_shape"],
                              colour="ffn")
    arrow(axes, ln2_bottom, (centre, ffn_top[1]))
    plus(axes, centre, 4.45)
    arrow(axes, (centre, ffn_bottom[1]), (centre, 4.67))
    arrow(axes, (left, 4.45), (centre - 0.22, 4.45))
    axes.text(left - 0.28, 9.0, text["residual"], rotation=90, ha="center", va="center",
              fontsize=9, color="#444444")
    # after the blocks
    lnf_bottom, lnf_top = box(axes, centre, 3.3, 3.4, text["ln_f"], colour="norm")
    arrow(axes, (centre, 4.23), lnf_top)
    unembed_bottom, unembed_top = box(axes, centre, 2.15, 3.0, text["unembed"],
                                      "[n_embd, n_vocab]", colour="out")
    arrow(axes, lnf_bottom, unembed_top)
    logits_bottom, logits_top = box(axes, centre + 0.4, 0.85, 8.4, text["logits"],
                                    "[n_seq, n_vocab]", colour="out")
    arrow(axes, unembed_bottom, (centre, logits_top[1]))
    # the tie: wte is also the output layer
    axes.plot([1.25, 0.2, 0.2], [13.4, 13.4, 2.15], color=COLOURS["edge"], ls=":", lw=1.3)
    arrow(axes, (0.2, 2.15), (centre - 1.5, 2.15), ls=":", lw=1.3)
    axes.text(0.4, 2.95, text["tied"], ha="left", va="center", fontsize=8.5, color="#444444")
    axes.text(centre + 0.4, 0.0, text["sizes"], ha="center", va="center", fontsize=8.5,
              color="#444444")
    return figure


def draw_attention(text: dict):
    """mha top to bottom in the left column; the mask and one head's weights on the right."""
    figure, axes = canvas(13.6, 15.6, (10.2, 11.7))
    centre = 4.1
    axes.text(6.8, 15.15, text["attn_title"], ha="center", fontsize=12.5, weight="bold")
    steps = [  # label, shape, colour, y, width
        (text["x"], "[n_seq, n_embd]", "norm", 14.2, 5.6),
        (text["c_attn"], "[n_seq, n_embd] → [n_seq, 3·n_embd]", "data", 12.85, 6.2),
        (text["split"], "3 × [n_seq, n_embd]", "data", 11.5, 5.6),
        (text["split_heads"], "3 × [n_head, n_seq, d_head]", "data", 10.15, 6.6),
        (text["scores"], "[n_head, n_seq, n_seq]", "attn", 8.8, 5.6),
        (text["scale"], "d_head = 64 in 124M: / 8", "attn", 7.45, 5.6),
        (text["mask"], "-1e10 above the diagonal", "attn", 6.1, 5.6),
        (text["softmax"], "[n_head, n_seq, n_seq]", "attn", 4.75, 5.6),
        (text["mix"], "[n_head, n_seq, d_head]", "attn", 3.4, 6.6),
        (text["merge"], "[n_seq, n_head·d_head] = [n_seq, n_embd]", "data", 2.05, 6.6),
        (text["c_proj"], "[n_seq, n_embd] → [n_seq, n_embd]", "data", 0.7, 6.6),
    ]
    if text is TEXT["zh"]:
        steps[6] = (text["mask"], "对角线以上加 -1e10", "attn", 6.1, 5.6)
        steps[5] = (text["scale"], "124M 中 d_head = 64：除以 8", "attn", 7.45, 5.6)
    previous = None
    for label, shape, colour, y, width in steps:
        note = text["scale_note"] if label == text["scale"] else None  # model.py scales q
        bottom, top = box(axes, centre, y, width, label, shape, colour, note=note)
        if previous:
            arrow(axes, previous, top)
        previous = bottom
    # the per-head part, bracketed on the left
    axes.plot([0.45, 0.3, 0.3, 0.45], [10.6, 10.6, 2.95, 2.95], color="#888888", lw=1.2)
    axes.text(0.12, 6.8, text["per_head"], rotation=90, ha="center", va="center", fontsize=9,
              color="#444444")
    # the real mask and one head's real weights, from picogpt.model
    rng = np.random.default_rng(1)
    q, k = (rng.normal(size=(5, 4)).astype(np.float32) for _ in range(2))
    mask = future_mask(5, 5, np.float32)
    weights = attention_weights(q * 2, k, mask)
    for data, title, y, colours in [
        ((mask == 0).astype(float), text["mask_pic"], 0.42, {"cmap": "Greys_r", "vmin": 0,
                                                               "vmax": 1}),
        (weights, text["weights_pic"], 0.06, ATTENTION),
    ]:
        inset = figure.add_axes([0.67, y, 0.25, 0.25])
        inset.imshow(data, interpolation="nearest", **colours)
        inset.set_title(title, fontsize=9.5)
        inset.set_xticks(range(5))
        inset.set_yticks(range(5))
        inset.tick_params(labelsize=8)
        inset.set_xlabel(text["key"], fontsize=9)
        inset.set_ylabel(text["query"], fontsize=9)
        if data is weights:
            for i in range(5):
                for j in range(5):
                    if weights[i, j] > 0.005:
                        inset.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center",
                                   fontsize=6.5, color="white" if weights[i, j] > 0.6 else "k")
        else:
            for i in range(5):
                for j in range(5):
                    inset.text(j, i, "0" if mask[i, j] == 0 else "-1e10", ha="center",
                               va="center", fontsize=6.5,
                               color="k" if mask[i, j] == 0 else "white")
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for model.png, attention.png and -zh")
    args = parser.parse_args()
    for language, suffix in (("en", ""), ("zh", "-zh")):
        use_language(language)
        for name, draw in (("model", draw_model), ("attention", draw_attention)):
            figure = draw(TEXT[language])
            save(figure, args.out / f"{name}{suffix}.png")
            plt.close(figure)
            print(f"wrote {args.out / f'{name}{suffix}.png'}")


if __name__ == "__main__":
    main()
