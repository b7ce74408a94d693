// The drawing code of picogpt's pages: the --explain page and the --explore page both inline
// this file. Every number it draws comes from the data the page is given (computed by trace,
// logit_lens, the head scores and the generation API); nothing here computes the model.
// Every word exists in English and Chinese; `Views.lang` is the current language.
"use strict";
const Views = (() => {
  const TEXT = {
    en: {
      title: M => `Inside one run of ${modelName(M, "en")}`,
      explore_title: M => `Explore ${modelName(M, "en")}`,
      h_prompt: "Prompt",
      n_prompt: "Type or change the text: its tokens and the next token's distribution follow as you type.",
      count: (n, ctx) => `${n} ${n === 1 ? "token" : "tokens"} of the ${ctx} the model can read`,
      h_next: "Next token",
      n_next: "The most likely next tokens, as the model gives them (before, grey) and after the sampler's filters (after, blue). Move a control and the distribution changes at once: no new model call. Click a candidate to append it.",
      temperature: "temperature", top_k: "top-k", top_p: "top-p", penalty: "repetition penalty",
      off: "off", entropy: e => `entropy after the filters: ${e} nats`,
      greedy: "take the greedy token", draw: "draw with seed", back: "back one step",
      generate: "generate", n_generate: "tokens",
      busy: "working ...",

      h_tokens: "Tokens",
      n_tokens: "Each BPE piece with its id. Grey: the prompt; blue: generated (click one to see its step). A piece that holds only part of a UTF-8 character shows its bytes in hex; the character its pieces form together is written under them, in a dashed box.",
      n_tokens_wordpiece: "Each WordPiece token with its id: the model's own list of whole tokens (in BERT's Chinese vocabulary, one for each character); a piece inside a word is shown without its ##. Grey: the prompt; blue: generated (click one to see its step).",
      n_tokens_chars: "Each token with its id: a character vocabulary, one character a token (a line break too); a character training saw fewer than twice is <|unknown|>. Grey: the prompt; blue: generated (click one to see its step).",
      h_steps: "Step candidates",
      n_steps: "The distribution each generated token was drawn from: the most likely candidates with their probability as the model gave it (before, grey) and after the sampling filters (after, blue). Each column's bars are drawn against the largest value in that column, given in its header.",
      step: "step", candidate: "candidate", before: "before", after: "after",
      chosen: (t, id, e) => `chosen ${t} (id ${id}), entropy ${e} nats`,
      h_attn: "Attention",
      n_attn: "Row: a query position; column: a key position it may look at (only earlier ones: the mask is causal). The tokens label both axes. Every row sums to 1. Hover for the exact weight.",
      layer: "layer", head: "head", overview: "all heads of this layer (click one)",
      scale_attn: "weight: white is 0, blue is 1; the shade follows the square root of the weight, so that small weights stay visible",
      range: (a, b, n) => `(positions ${a} to ${b} only: the page keeps the last ${n} to stay small)`,
      tip: (l, h, q, tq, k, tk, w) => `layer ${l} head ${h}: query ${q} ${tq} -> key ${k} ${tk}: ${w}`,
      h_heads: "Head scores",
      n_heads: "For each layer (row) and head (column), averaged over this text: the weight on the previous token, the weight on the first token, and, at a token seen before, the weight on the tokens that followed it then (an induction head). Click a cell to see that head's attention above.",
      scale_heads: "score: white is 0, blue is 1",
      score_previous: "previous token", score_first: "first token", score_induction: "induction",
      no_repeat: "no token of this text occurs twice, so there is no induction score",
      one_token: "the text is one token long: there is no earlier token to score",
      head_tip: (kind, l, h, v) => `${kind}: layer ${l} head ${h}: ${v}`,
      h_lens: "Logit lens",
      n_lens: "What each layer would predict next if it were the last (ln_f and the unembedding applied to its residual stream): the top token and its probability. Early layers are a rough guide only; the last row is the model's own prediction. Hover for the top 3.",
      scale_lens: "cell colour: the top token's probability, from clear (0) to blue (1)",
      lens_layer: "layer", embed: "embed", block: "block",
      h_wpe: "Position embeddings",
      n_wpe: "Cosine similarity of the learned position embeddings wpe, for the first positions: row i, column j compares position i with position j.",
      scale_wpe: "cosine similarity: black is 0 or below, white is 1",
      settings: (S, M, n, p, g) => `${modelName(M, "en")}: ${n} tokens (${p} prompt, ${g} generated). ` +
        (S.top_k === null && S.top_p === null ? "greedy" :
         `sampling: temperature ${S.temperature}, top_k ${S.top_k ?? "off"}, top_p ${S.top_p ?? "off"}, seed ${S.seed ?? "none"}`) +
        `, repetition penalty ${S.repetition_penalty}.`,
      released: size => `GPT-2 ${size}`,
      trained: (name, M) => `"${name}", a ${M.n_layer}-layer model trained by picogpt (not GPT-2)`,
      hf: name => `the Hugging Face model ${name} (GPT-2's architecture)`,
      random: M => `a ${M.n_layer}-layer model with random weights (not GPT-2)`,
    },
    zh: {
      title: M => `一次运行的内部：${modelName(M, "zh")}`,
      explore_title: M => `探索 ${modelName(M, "zh")}`,
      h_prompt: "提示词",
      n_prompt: "输入或修改文本：它的词元和下一个词元的分布会随着输入即时更新。",
      count: (n, ctx) => `${n} 个词元（模型最多读 ${ctx} 个）`,
      h_next: "下一个词元",
      n_next: "最可能的下一个词元：灰色是模型给出的原始概率（过滤前），蓝色是经过采样过滤之后的概率（过滤后）。拖动任一控件，分布立即改变，不需要重新运行模型。点击某个候选即可把它接到文本后面。",
      temperature: "温度", top_k: "top-k", top_p: "top-p", penalty: "重复惩罚",
      off: "关闭", entropy: e => `过滤后的熵：${e} 奈特`,
      greedy: "取贪心词元", draw: "按种子抽取", back: "退回一步",
      generate: "生成", n_generate: "个词元",
      busy: "计算中……",

      h_tokens: "词元序列",
      n_tokens: "每个 BPE 片段及其 id。灰色为提示词，蓝色为生成的词元（点击可查看那一步）。只含某个 UTF-8 字符部分字节的片段以十六进制显示字节；这几个片段合起来组成的字符写在它们下方的虚线框里。",
      n_tokens_wordpiece: "每个 WordPiece 词元及其 id。词表是模型自己的一张整词元列表（BERT 的中文词表里一个汉字一个词元）；词内的片段显示时去掉开头的 ##。灰色为提示词，蓝色为生成的词元（点击可查看那一步）。",
      n_tokens_chars: "每个词元及其 id。这是字符词表：一个字符一个词元（换行也是）；训练文本中出现不到两次的字符记作 <|unknown|>。灰色为提示词，蓝色为生成的词元（点击可查看那一步）。",
      h_steps: "每一步的候选",
      n_steps: "每个生成的词元从哪个分布中选出：概率最高的几个候选，灰色是模型给出的原始概率（过滤前），蓝色是经过采样过滤之后的概率（过滤后）。每一列的条形以该列的最大值为满格，最大值写在列标题中。",
      step: "步骤", candidate: "候选", before: "过滤前", after: "过滤后",
      chosen: (t, id, e) => `选中 ${t}（id ${id}），熵 ${e} 奈特`,
      h_attn: "注意力",
      n_attn: "行是查询位置，列是它能看到的键位置（因果掩码：只能看到之前的位置）。两条坐标轴上都标有词元。每一行之和为 1。鼠标悬停可查看精确权重。",
      layer: "层", head: "头", overview: "本层所有注意力头（点击切换）",
      scale_attn: "权重：白色为 0，蓝色为 1；深浅按权重的平方根变化，小权重也看得见",
      range: (a, b, n) => `（只显示位置 ${a} 到 ${b}：为控制页面大小，只保留最后 ${n} 个位置）`,
      tip: (l, h, q, tq, k, tk, w) => `第 ${l} 层第 ${h} 个头：查询 ${q} ${tq} -> 键 ${k} ${tk}：${w}`,
      h_heads: "注意力头打分",
      n_heads: "每一行是一层，每一列是一个头，数值是在这段文本上的平均：放在前一个词元上的权重、放在第一个词元上的权重，以及当前词元此前出现过时，放在它上次出现之后那个词元上的权重（归纳头）。点击一格，上方的注意力图就显示那个头。",
      scale_heads: "分数：白色为 0，蓝色为 1",
      score_previous: "前一个词元", score_first: "第一个词元", score_induction: "归纳",
      no_repeat: "这段文本中没有出现两次的词元，所以没有归纳分数",
      one_token: "文本只有一个词元：前面没有别的词元可以打分",
      head_tip: (kind, l, h, v) => `${kind}：第 ${l} 层第 ${h} 个头：${v}`,
      h_lens: "logit 透镜（logit lens）",
      n_lens: "假如某一层就是最后一层，它会预测哪个词元：对该层的残差流施加 ln_f 和输出层之后，概率最高的词元及其概率。前几层只能作粗略参考；最后一行就是模型自己的预测。悬停可查看前 3 名。",
      scale_lens: "单元格颜色：首选词元的概率，从透明（0）到蓝色（1）",
      lens_layer: "层", embed: "嵌入", block: "块",
      h_wpe: "位置嵌入",
      n_wpe: "可学习的位置嵌入 wpe 在前若干个位置上两两之间的余弦相似度：第 i 行第 j 列比较位置 i 与位置 j。",
      scale_wpe: "余弦相似度：黑色为 0 及以下，白色为 1",
      settings: (S, M, n, p, g) => `${modelName(M, "zh")}：共 ${n} 个词元（提示词 ${p} 个，生成 ${g} 个）。` +
        (S.top_k === null && S.top_p === null ? "贪心解码" :
         `采样：温度 ${S.temperature}，top_k ${S.top_k ?? "未设置"}，top_p ${S.top_p ?? "未设置"}，随机种子 ${S.seed ?? "未设置"}`) +
        `，重复惩罚 ${S.repetition_penalty}。`,
      released: size => `GPT-2 ${size}`,
      trained: (name, M) => `“${name}”，picogpt 训练的 ${M.n_layer} 层模型（不是 GPT-2）`,
      hf: name => `Hugging Face 模型 ${name}（GPT-2 架构）`,
      random: M => `随机权重的 ${M.n_layer} 层模型（不是 GPT-2）`,
    },
  };
  const api = {
    lang: (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en",
    TEXT,
  };
  function t(key) { return TEXT[api.lang][key]; }
  function modelName(M, lang) {
    const words = TEXT[lang];
    return M.kind === "released" ? words.released(M.name) : M.kind === "hf" ? words.hf(M.name) :
           M.kind === "random" ? words.random(M) : words.trained(M.name, M);
  }
  function floats(b64) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }
  function el(tag, attrs = {}, text = "") {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text) node.textContent = text;
    return node;
  }
  function shown(tok) { return tok.bytes ? tok.bytes : tok.text; }
  // A piece's label: a piece that holds part of a character shows the character, then its bytes
  function labelled(toks, characters = []) {
    return toks.map((tok, i) => {
      const run = tok.bytes && characters.find(r => r.start <= i && i <= r.end);
      return run ? `${run.text} ${tok.bytes}` : shown(tok);
    });
  }
  function quoted(tok) { return tok.bytes ? "<" + tok.bytes + ">" : "'" + tok.text + "'"; }

  // Every [data-t] node's text in the current language; texts that are functions are skipped
  function words(root = document) {
    document.documentElement.lang = api.lang === "zh" ? "zh-CN" : "en";
    root.querySelectorAll("[data-t]").forEach(node => {
      const text = t(node.dataset.t);
      if (typeof text === "string") node.textContent = text;
    });
    root.querySelectorAll("#lang button").forEach(b => b.classList.toggle("on", b.dataset.lang === api.lang));
  }

  // The token strip; a run of pieces that each hold part of a character sits in a dashed box
  // with the character they form under it. onClick(i) is called for generated pieces.
  function tokens(strip, toks, characters, nPrompt, onClick) {
    strip.replaceChildren();
    const runAt = new Map(characters.map(run => [run.start, run]));
    let box = null, run = null;
    toks.forEach((tok, i) => {
      const gen = i >= nPrompt;
      const span = el("span", {class: "tok" + (gen ? " gen" : ""), "data-i": i});
      span.append(el("span", {class: tok.bytes ? "text bytes" : "text"}, shown(tok) || " "),
                  el("span", {class: "id"}, String(tok.id)));
      if (gen && onClick) span.addEventListener("click", () => onClick(i));
      if (runAt.has(i)) {
        run = runAt.get(i);
        box = el("span", {class: "group"});
        box.append(el("span", {class: "pieces"}), el("span", {class: "char"}, run.text));
        strip.append(box);
      }
      if (run) {
        box.firstChild.append(span);
        if (i === run.end) run = null;
      } else {
        strip.append(span);
      }
    });
  }

  // One step's candidates: name, before bar and value, after bar and value. onPick(id), when
  // given, makes each candidate's name a button that picks it.
  function candidates(grid, step, onPick) {
    const most = {before: Math.max(...step.candidates.map(c => c.before)),
                  after: Math.max(...step.candidates.map(c => c.after))};
    grid.replaceChildren(el("b", {}, t("candidate")),
                         el("b", {}, `${t("before")} (max ${most.before.toPrecision(3)})`), el("span"),
                         el("b", {}, `${t("after")} (max ${most.after.toPrecision(3)})`), el("span"));
    for (const c of step.candidates) {
      const chosen = step.token && c.id === step.token.id;
      const name = el(onPick ? "button" : "span", {class: chosen ? "name chosen" : "name", "data-id": c.id},
                      (chosen ? "▶ " : "") + quoted(c));
      if (onPick) name.addEventListener("click", () => onPick(c.id));
      grid.append(name);
      for (const [kind, p] of [["before", c.before], ["after", c.after]]) {
        const bar = el("div", {class: "bar " + kind});
        bar.style.width = (most[kind] > 0 ? 100 * p / most[kind] : 0).toFixed(1) + "%";
        const cell = el("div");
        cell.append(bar);
        grid.append(cell, el("span", {class: "p " + kind, "data-id": c.id}, p.toFixed(4)));
      }
    }
  }

  // The attention heatmap of one head, the tokens on both axes, the layer's heads as small
  // pictures, and a hover that names the exact weight. A = {first, n, data (base64 float32
  // [n_layer, n_head, n, n])}; ids name the page's elements (attn, attn-x, attn-y, ...).
  function attention(A, toks, nLayer, nHead, characters = []) {
    const weights = floats(A.data), n = A.n;
    const layerSelect = document.getElementById("layer"), headSelect = document.getElementById("head");
    layerSelect.replaceChildren(); headSelect.replaceChildren();
    for (let l = 0; l < nLayer; l++) layerSelect.append(el("option", {value: l}, String(l)));
    for (let h = 0; h < nHead; h++) headSelect.append(el("option", {value: h}, String(h)));
    const weight = (l, h, q, k) => weights[((l * nHead + h) * n + q) * n + k];
    function paint(canvas, l, h, scale) {
      canvas.width = canvas.height = n * scale;
      const ctx = canvas.getContext("2d"), img = ctx.createImageData(n, n);
      for (let q = 0; q < n; q++) for (let k = 0; k < n; k++) {
        const v = Math.round(255 * (1 - Math.sqrt(weight(l, h, q, k)))), o = 4 * (q * n + k);
        img.data[o] = v; img.data[o + 1] = v; img.data[o + 2] = 255; img.data[o + 3] = 255;
      }
      const tmp = el("canvas"); tmp.width = tmp.height = n; tmp.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, 0, 0, n * scale, n * scale);
    }
    // the picture fits the page's width beside the query labels, at most 480 px
    const room = document.getElementById("attn-wrap").clientWidth - 120;
    const big = document.getElementById("attn"), scale = Math.max(1, Math.floor(Math.min(480, room) / n));
    // a label per row (queries) and per column (keys): its line as tall as its row (as wide as
    // its column), the font a sixth smaller, so that a glyph's box (a Chinese character's, a
    // byte pair's turned on its side) stays inside it and never touches the next label's
    const size = Math.max(1, Math.min(12, Math.floor(scale * 5 / 6))) + "px";
    const names = labelled(toks, characters);
    for (const [axis, long] of [["attn-x", "width"], ["attn-y", "height"]]) {
      const labels = document.getElementById(axis);
      labels.replaceChildren();
      for (let i = 0; i < n; i++) {
        const label = el("span", {class: "label", title: `${A.first + i}`}, names[A.first + i]);
        label.style[long] = label.style.lineHeight = scale + "px";
        label.style.fontSize = size;
        labels.append(label);
      }
    }
    function show() {
      const l = Number(layerSelect.value), h = Number(headSelect.value);
      paint(big, l, h, scale);
      const overview = document.getElementById("overview");
      overview.replaceChildren();
      for (let hh = 0; hh < nHead; hh++) {
        const c = el("canvas", {title: `${t("head")} ${hh}`, "data-head": hh});
        paint(c, l, hh, Math.max(1, Math.floor(64 / n)));
        c.style.width = c.style.height = "64px";
        if (hh === h) c.classList.add("sel");
        c.addEventListener("click", () => { headSelect.value = hh; show(); });
        overview.append(c);
      }
      document.getElementById("attn-range").textContent =
        A.first > 0 ? t("range")(A.first, A.first + n - 1, n) : "";
      document.getElementById("attn-tip").textContent = "";
      markHead(l, h);
    }
    big.onmousemove = e => {
      // cells from the canvas's content box: its border is not part of the picture, and on a
      // long page a cell is one pixel wide
      const r = big.getBoundingClientRect();
      const x = e.clientX - r.left - big.clientLeft, y = e.clientY - r.top - big.clientTop;
      const k = Math.floor(x / big.clientWidth * n), q = Math.floor(y / big.clientHeight * n);
      if (q < 0 || k < 0 || q >= n || k >= n) return;
      const l = Number(layerSelect.value), h = Number(headSelect.value);
      document.getElementById("attn-tip").textContent = t("tip")(
        l, h, A.first + q, quoted(toks[A.first + q]), A.first + k, quoted(toks[A.first + k]),
        weight(l, h, q, k).toPrecision(7));
    };
    layerSelect.onchange = show;
    headSelect.onchange = show;
    function select(l, h) { layerSelect.value = l; headSelect.value = h; show(); }
    return {show, select};
  }

  // The head scores as small layer-by-head grids, one per score; clicking a cell calls
  // onPick(layer, head). S = {previous, first, induction}: [n_layer][n_head] arrays (induction
  // may be null: no token of the text repeats).
  function headScores(container, S, onPick) {
    container.replaceChildren();
    for (const kind of ["previous", "first", "induction"]) {
      const box = el("div", {class: "scores", "data-kind": kind});
      box.append(el("div", {class: "note"}, t("score_" + kind)));
      if (!S[kind]) {
        box.append(el("div", {class: "note"}, t(kind === "induction" && S.previous ? "no_repeat" : "one_token")));
        container.append(box);
        continue;
      }
      const table = el("table"), top = el("tr");
      top.append(el("th", {}, ""));
      S[kind][0].forEach((_, h) => top.append(el("th", {}, `${t("head")} ${h}`)));
      table.append(top);
      S[kind].forEach((row, l) => {
        const tr = el("tr");
        tr.append(el("th", {}, `${t("layer")} ${l}`));
        row.forEach((v, h) => {
          const td = el("td", {"data-layer": l, "data-head": h,
                               title: t("head_tip")(t("score_" + kind), l, h, v.toFixed(4))}, v.toFixed(2));
          td.style.background = `rgba(53, 116, 212, ${Math.max(0, Math.min(1, v)).toFixed(3)})`;
          if (v > 0.5) td.style.color = "white";
          td.tabIndex = 0;  // a cell is a button: Tab reaches it, Enter or Space picks it
          td.setAttribute("role", "button");
          td.addEventListener("click", () => onPick(l, h));
          td.addEventListener("keydown", e => {
            if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onPick(l, h); }
          });
          tr.append(td);
        });
        table.append(tr);
      });
      box.append(table);
      container.append(box);
    }
  }

  // The chosen head's cell in each head-score grid is marked (aria-pressed)
  function markHead(l, h) {
    document.querySelectorAll("#heads td[data-layer]").forEach(td => td.setAttribute(
      "aria-pressed", String(td.dataset.layer === String(l) && td.dataset.head === String(h))));
  }

  // The logit lens: one row per residual stream, one column per token from L.first on
  function lens(container, L, toks) {
    const table = el("table"), head = el("tr"), first = L.first || 0;
    head.append(el("th", {}, t("lens_layer")));
    toks.slice(first).forEach(tok => head.append(el("th", {}, quoted(tok))));
    table.append(head);
    L.text.forEach((row, l) => {
      const tr = el("tr");
      tr.append(el("th", {}, l === 0 ? t("embed") : `${t("block")} ${l - 1}`));
      row.forEach((text, i) => {
        const p = L.probs[l][i];
        const td = el("td", {title: L.top[l][i]}, `'${text}'\n${p.toFixed(3)}`);
        td.style.background = `rgba(53, 116, 212, ${Math.min(1, p).toFixed(3)})`;
        if (p > 0.5) td.style.color = "white";
        tr.append(td);
      });
      table.append(tr);
    });
    container.replaceChildren(table);
    if (first > 0) container.prepend(el("div", {class: "note"}, t("range")(first, toks.length - 1, toks.length - first)));
  }

  // The cosine similarity of wpe's first rows, black (0 or below) to white (1)
  function wpe(canvas, W) {
    const sim = floats(W.data);
    canvas.width = canvas.height = W.n;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(W.n, W.n);
    for (let i = 0; i < W.n * W.n; i++) {
      const v = Math.round(255 * Math.max(0, Math.min(1, sim[i])));
      img.data.set([v, v, v, 255], 4 * i);
    }
    ctx.putImageData(img, 0, 0);
    canvas.style.width = 3 * W.n + "px";  // the height follows: the picture is square
  }

  return Object.assign(api, {t, modelName, el, floats, shown, quoted, words, tokens, candidates,
                             attention, headScores, lens, wpe});
})();
