'''The file `python -m picogpt.exercises new` writes: seed 001's ten functions to fill in, and
three optional ones: cross_attention (the couplet model's, docs/couplet.md), rms_norm and rope
(the LLaMA block's, docs/gpt2-to-llama.md).

Owns the file's text (each function with the seed's signature, a docstring in Chinese and then
English giving its inputs and output with shapes and the page that explains it, and a body that
raises NotImplementedError) and `write_template`, which never replaces a file that exists.
'''

from pathlib import Path

from picogpt.errors import PicoGPTError, _, reason

TEMPLATE = '''"""我的 GPT-2：亲手写种子 001 的十个函数。
My GPT-2: seed 001's ten functions, written by hand.

按顺序逐个填写，随时运行检查（Fill them in, in order; check at any time with）:

    python -m picogpt.exercises check {file}

数组都是 float32；形状记号与 picogpt 相同：n_seq 是词元个数，n_embd 是隐藏维度，n_head 是头数，
d_head = n_embd // n_head，n_vocab 是词表大小。All arrays are float32.
讲解 / explained in: picogpt 的 docs/zh/exercises.md（English: docs/exercises.md）。
"""

import numpy as np


def gelu(x):
    """GELU 激活函数，GPT-2 用的是 tanh 近似式。x: 任意形状 -> 同样形状。
    讲解：docs/zh/reading-model.md 「gelu：激活函数」。

    GELU, in the tanh form GPT-2 was trained with. x: any shape -> the same shape.
    Explained in docs/reading-model.md, "gelu: the activation".
    """
    raise NotImplementedError


def softmax(x):
    """沿最后一维把分数变成概率，每行之和为 1。x: [..., n] -> [..., n]。
    讲解：docs/zh/reading-model.md 「softmax：把分数变成概率」。

    Scores into probabilities along the last axis; each row sums to 1. x: [..., n] -> [..., n].
    Explained in docs/reading-model.md, "softmax: scores into probabilities".
    """
    raise NotImplementedError


def layer_norm(x, g, b, eps: float = 1e-5):
    """层归一化：每个位置归一化为均值 0、方差 1，再乘以增益 g、加上平移 b。
    x: [n_seq, n_embd]，g、b: [n_embd] -> [n_seq, n_embd]。
    讲解：docs/zh/reading-model.md 「layer_norm：层归一化」；
    docs/zh/from-the-seeds.md 「层归一化」一节。

    Layer normalisation: each position to mean 0 and variance 1, then times g plus b.
    x: [n_seq, n_embd], g, b: [n_embd] -> [n_seq, n_embd].
    Explained in docs/reading-model.md, "layer_norm", and docs/from-the-seeds.md, "LayerNorm".
    """
    raise NotImplementedError


def linear(x, w, b):
    """线性层（仿射变换）。x: [n_seq, n_in]，w: [n_in, n_out]，b: [n_out] -> [n_seq, n_out]。
    讲解：docs/zh/reading-model.md 「linear：仿射变换」。

    The linear layer (affine map). x: [n_seq, n_in], w: [n_in, n_out], b: [n_out]
    -> [n_seq, n_out]. Explained in docs/reading-model.md, "linear: the affine map".
    """
    raise NotImplementedError


def ffn(x, c_fc, c_proj):
    """前馈神经网络：升维到 4 * n_embd，过 GELU，再投影回 n_embd。
    x: [n_seq, n_embd]；c_fc、c_proj 各是一个 {{"w", "b"}} 字典 -> [n_seq, n_embd]。
    讲解：docs/zh/reading-model.md 「ffn：前馈神经网络」。

    The feed-forward network: up to 4 * n_embd, GELU, back down to n_embd.
    x: [n_seq, n_embd]; c_fc and c_proj are {{"w", "b"}} dicts -> [n_seq, n_embd].
    Explained in docs/reading-model.md, "ffn: the feed-forward network".
    """
    raise NotImplementedError


def attention(q, k, v, mask):
    """缩放点积注意力（加上掩码）。q: [n_q, d_head]，k: [n_k, d_head]，v: [n_k, d_v]，
    mask: [n_q, n_k] -> [n_q, d_v]。
    讲解：docs/zh/reading-model.md 「注意力」；
    docs/zh/from-the-seeds.md 「为什么分数要除以 sqrt(d_head)」。

    Scaled dot-product attention, plus the mask. q: [n_q, d_head], k: [n_k, d_head],
    v: [n_k, d_v], mask: [n_q, n_k] -> [n_q, d_v].
    Explained in docs/reading-model.md, "Attention", and docs/from-the-seeds.md.
    """
    raise NotImplementedError


def mha(x, c_attn, c_proj, n_head):
    """多头因果自注意力：c_attn 算出 q、k、v，分成 n_head 个头，各自做带因果掩码的注意力，
    合并，再经过 c_proj。x: [n_seq, n_embd] -> [n_seq, n_embd]。
    讲解：docs/zh/reading-model.md 「因果掩码」「多头的切分与合并」「mha」三节。

    Causal multi-head self-attention: q, k, v from c_attn, cut into n_head heads, causal
    attention in each, joined, then c_proj. x: [n_seq, n_embd] -> [n_seq, n_embd].
    Explained in docs/reading-model.md: the causal mask, split_heads, mha.
    """
    raise NotImplementedError


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    """一个 Transformer 块（GPT-2 是前置归一化）：注意力和前馈网络，各自加回残差流。
    x: [n_seq, n_embd] -> [n_seq, n_embd]。
    讲解：docs/zh/reading-model.md 「transformer_block：前置归一化的块」。

    One transformer block (GPT-2's is pre-norm): attention and the feed-forward network, each
    added back onto the residual stream. x: [n_seq, n_embd] -> [n_seq, n_embd].
    Explained in docs/reading-model.md, "transformer_block: a pre-norm block".
    """
    raise NotImplementedError


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    """整个 GPT-2：词嵌入加位置嵌入，经过每个块，最后的层归一化，再乘以 wte.T 得到 logits。
    inputs: n_seq 个词元 id 的列表；wte: [n_vocab, n_embd]；wpe: [n_ctx, n_embd]
    -> [n_seq, n_vocab]。讲解：docs/zh/reading-model.md 「embed 与 gpt2：从 id 到 logits」。

    The whole GPT-2: token plus position embeddings, every block, the final layer norm, then
    wte.T for the logits. inputs: a list of n_seq token ids; wte: [n_vocab, n_embd];
    wpe: [n_ctx, n_embd] -> [n_seq, n_vocab]. Explained in docs/reading-model.md, "embed and gpt2".
    """
    raise NotImplementedError


def generate(inputs, params, n_head, n_tokens_to_generate):
    """贪心解码：每一步取最可能的下一个词元，接到输入后面，共 n_tokens_to_generate 步。
    inputs: 词元 id 的列表 -> 新生成的 n_tokens_to_generate 个 id（不含提示词）。
    讲解：docs/zh/generation.md 「循环」。

    Greedy decoding: take the most likely next token, append it, n_tokens_to_generate times.
    inputs: a list of token ids -> the n_tokens_to_generate new ids (not the prompt).
    Explained in docs/generation.md, "The loop".
    """
    raise NotImplementedError


def cross_attention(x, memory, q, k, v, c_proj, n_head):
    """选做，十个函数之外：2017 年编码器-解码器（对对子模型）的交叉注意力。查询来自 x（解码器的
    位置），键和值来自 memory（编码器的输出）；分成 n_head 个头，每个头做注意力，不加掩码，合并，
    再经过 c_proj。x: [n_q, n_embd]，memory: [n_k, n_embd]；q、k、v、c_proj 各是一个
    {{"w", "b"}} 字典 -> [n_q, n_embd]。还没写时（仍是 raise NotImplementedError）检查会跳过它。
    讲解：docs/zh/couplet.md 「练习」第 1 题。

    Optional, beyond the ten: cross-attention of the 2017 encoder-decoder (the couplet model).
    Queries from x (the decoder's positions), keys and values from memory (the encoder's
    output); cut into n_head heads, attention in each with no mask, joined, then c_proj.
    x: [n_q, n_embd], memory: [n_k, n_embd]; q, k, v and c_proj are {{"w", "b"}} dicts
    -> [n_q, n_embd]. Until it is written (still raise NotImplementedError) no check counts it.
    Explained in docs/couplet.md, "Exercises", 1.
    """
    raise NotImplementedError


def rms_norm(x, weight, eps):
    """选做：LLaMA 与 Qwen 的 RMSNorm。每一行除以它的均方根（各元素平方的均值加 eps，再开
    平方），再乘以 weight；不减均值，也没有偏置。x: [..., n]，weight: [n] -> [..., n]。
    还没写时检查会跳过它。讲解：docs/zh/gpt2-to-llama.md 「用数字看每一处改动」。

    Optional: the RMSNorm of LLaMA and Qwen. Divide each row by its root mean square (the mean
    of the squares plus eps, square-rooted), then scale by weight; no mean taken away, no bias.
    x: [..., n], weight: [n] -> [..., n]. Until it is written no check counts it.
    Explained in docs/gpt2-to-llama.md, "Each change, in numbers".
    """
    raise NotImplementedError


def rope(x, cos, sin):
    """选做：旋转位置编码（RoPE），transformers 的写法：第 i 个特征与第 i + d_head // 2 个配成一对，
    每一对按该位置的角度旋转：(a, b) -> (a·cos - b·sin, a·sin + b·cos)。cos、sin 已按这种配对
    排好（前后两半相同）。x: [..., n_seq, d_head]，cos、sin: [n_seq, d_head]
    -> [..., n_seq, d_head]。
    还没写时检查会跳过它。讲解：docs/zh/gpt2-to-llama.md 「RoPE 的两种写法」。

    Optional: rotary positions (RoPE) as transformers writes them: feature i pairs with feature
    i + d_head // 2, and each pair turns by its position's angle: (a, b) -> (a cos - b sin,
    a sin + b cos). cos and sin come laid out for that pairing (both halves alike).
    x: [..., n_seq, d_head], cos, sin: [n_seq, d_head] -> [..., n_seq, d_head].
    Until it is written no check counts it. Explained in docs/gpt2-to-llama.md, "RoPE's two
    conventions".
    """
    raise NotImplementedError
'''


def write_template(path: str) -> None:
    """Write the file to fill in at path; a file already there is never replaced."""
    try:
        with open(path, "x", encoding="utf-8") as f:  # "x": fails if the file exists
            f.write(TEMPLATE.format(file=Path(path).name))
    except FileExistsError:
        raise PicoGPTError(_("{file} already exists and is left as it is; give a new name, or "
                             "check it with: python -m picogpt.exercises check {file}").format(
                                 file=path)) from None
    except OSError as e:
        raise PicoGPTError(_("cannot write {file}: {reason}.").format(
            file=path, reason=reason(e))) from None
