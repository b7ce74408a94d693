// The drawing code of picogpt's pages: the --explain page and the --explore page both inline
// this file. Every number it draws comes from the data the page is given (computed by trace,
// logit_lens, the head scores and the generation API); nothing here computes the model.
// Every word exists in English and Chinese; `Views.lang` is the current language.
"use strict";
const Views = (() => {
  // Every text in both languages, from picogpt's message catalog (picogpt/web/words.py):
  // page.fill puts them here. A {field} in a text is filled in by t(key, fields).
  const TEXT = /*WORDS*/null;
  const api = {
    lang: (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en",
    TEXT,
  };
  function t(key, fields = null) {
    const text = TEXT[api.lang][key];
    return fields ? text.replace(/\{(\w+)\}/g, (_, name) => String(fields[name])) : text;
  }
  function modelName(M, mark = "") {  // mark: put around the name, to find it in the text
    const name = mark + M.name + mark, layers = {n_layer: M.n_layer, n_dec_layer: M.n_dec_layer};
    if (M.seq2seq) {  // a couplet model: the 2017 encoder-decoder, never a GPT-2
      return M.kind === "random" ? t("couplet_random", layers) : t("couplet_trained", {name, ...layers});
    }
    return M.kind === "released" ? t("released", {size: name}) :
           M.kind === "hf" ? t(M.architecture === "llama" ? "hf_llama" : "hf", {name}) :
           M.kind === "random" ? t("random", {n_layer: M.n_layer}) :
           t("trained", {name, n_layer: M.n_layer});
  }
  // A page's title, said(the model's name), into node: the model's name (a --hf path can be
  // 200 characters) in a span that may break between any two characters, so that the title fits
  // its box whatever the width and whichever fonts the machine has. Returns the plain text.
  function title(node, said, M) {
    const mark = "\u0000";
    const parts = said(modelName(M, mark)).split(mark);
    node.replaceChildren(...parts.map((part, i) =>
      i % 2 ? el("span", {class: "name"}, part) : document.createTextNode(part)));
    return parts.join("");
  }
  // the line under the --explain page's title: the model, the counts and the sampler
  function settings(S, M, n, p, g) {
    const how = S.top_k === null && S.top_p === null ? t("mode_greedy") :
      t("sampling_run", {temperature: S.temperature, top_k: S.top_k ?? t("off"),
                         top_p: S.top_p ?? t("off"), seed: S.seed ?? t("unset_seed")});
    return t("settings", {model: modelName(M), n, p, g, how, penalty: S.repetition_penalty});
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
  // A query head's name: its number, and, where query heads share key/value heads (a LLaMA's
  // grouped-query attention), the key/value head it reads: "5 · kv 2". kvHeads: the data's
  // kv_heads, one per query head; a GPT-2's heads are each their own, named by number alone.
  // said(key, fields) is a sentence that names head h: key's, or key + "_kv"'s with the kv head.
  function headNamer(kvHeads) {
    const shared = Boolean(kvHeads) && new Set(kvHeads).size < kvHeads.length;
    const name = h => shared ? t("head_kv", {h, kv: kvHeads[h]}) : String(h);
    name.shared = shared;
    name.said = (key, fields) => shared ? t(key + "_kv", {...fields, kv: kvHeads[fields.h]}) :
      t(key, fields);
    return name;
  }

  // Every [data-t] node's text in the current language
  function words(root = document) {
    document.documentElement.lang = api.lang === "zh" ? "zh-CN" : "en";
    root.querySelectorAll("[data-t]").forEach(node => {
      node.textContent = t(node.dataset.t);
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
                         el("b", {}, t("most", {label: t("before"), value: most.before.toPrecision(3)})), el("span"),
                         el("b", {}, t("most", {label: t("after"), value: most.after.toPrecision(3)})), el("span"));
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
  // [n_layer, n_head, n, n])}; the parts are views.html's, in #attn-panel. kvHeads: each query
  // head's key/value head (the data's kv_heads), said beside its number when heads share them.
  function attention(A, toks, nLayer, nHead, characters = [], kvHeads = null) {
    const names = labelled(toks, characters).slice(A.first, A.first + A.n), at = i => A.first + i;
    const headName = headNamer(kvHeads), note = document.getElementById("attn-gqa");
    note.hidden = !headName.shared;
    note.textContent = headName.shared ? t("n_attn_gqa", {n_head: nHead, n_kv_head: new Set(kvHeads).size,
                                                 group: nHead / new Set(kvHeads).size}) : "";
    return attentionMap(document.getElementById("attn-panel"), {
      weights: floats(A.data), nLayer, nHead, nQ: A.n, nK: A.n, rows: names, cols: names,
      rowAt: at, colAt: at, onShow: markHead, headName,
      range: () => A.first > 0 ? t("range", {a: A.first, b: A.first + A.n - 1, n: A.n}) : "",
      tip: (l, h, q, k, w) => headName.said("tip", {l, h, q: at(q), tq: quoted(toks[at(q)]),
                                                    k: at(k), tk: quoted(toks[at(k)]),
                                                    w: w.toPrecision(7)})});
  }

  // One attention picture: a chosen layer's and head's weights, its queries down (rows) and its
  // keys across (columns), a label on each axis, the layer's heads as small pictures beside it,
  // and a hover that names the exact weight. Self-attention is square; cross-attention, where
  // the decoder's positions look at the encoder's, need not be. root holds the parts, each
  // named by its data-part: layer and head (the selects), map (the canvas), x and y (the axes),
  // wrap, tip, range and overview. M = {weights (Float32Array [nLayer, nHead, nQ, nK]), nLayer,
  // nHead, nQ, nK, rows and cols (the labels), rowAt and colAt (a label's position, its title),
  // tip(l, h, q, k, w) (the hover's text), and optionally range() (a note), badge(l, h) (a
  // line under each small picture), onShow(l, h), font (the labels' largest size, px) and
  // headName(h) (a head's name in the select and the small pictures' titles; its number)}.
  function attentionMap(root, M) {
    const part = name => root.querySelector(`[data-part="${name}"]`);
    const {weights, nQ, nK, nHead} = M, headName = M.headName || String;
    const layerSelect = part("layer"), headSelect = part("head"), big = part("map");
    layerSelect.replaceChildren(); headSelect.replaceChildren();
    for (let l = 0; l < M.nLayer; l++) layerSelect.append(el("option", {value: l}, String(l)));
    for (let h = 0; h < nHead; h++) headSelect.append(el("option", {value: h}, headName(h)));
    const weight = (l, h, q, k) => weights[((l * nHead + h) * nQ + q) * nK + k];
    function paint(canvas, l, h, scale) {
      canvas.width = nK * scale; canvas.height = nQ * scale;
      const ctx = canvas.getContext("2d"), img = ctx.createImageData(nK, nQ);
      for (let q = 0; q < nQ; q++) for (let k = 0; k < nK; k++) {
        const v = Math.round(255 * (1 - Math.sqrt(weight(l, h, q, k)))), o = 4 * (q * nK + k);
        img.data[o] = v; img.data[o + 1] = v; img.data[o + 2] = 255; img.data[o + 3] = 255;
      }
      const tmp = el("canvas"); tmp.width = nK; tmp.height = nQ; tmp.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, 0, 0, nK * scale, nQ * scale);
    }
    // the picture fits the page's width beside the query labels, at most 480 px each way
    const room = part("wrap").clientWidth - 120;
    const scale = Math.max(1, Math.floor(Math.min(480 / Math.max(nQ, nK), room / nK)));
    // a label per row (queries) and per column (keys), or per `every` rows and columns when a
    // row is too thin for a 10 px font (a phone, a long text): a label is as tall as its rows
    // (as wide as its columns), the font a sixth smaller, so that a glyph's box (a Chinese
    // character's, a byte pair's turned on its side) stays inside it and never touches the
    // next label's; its title names its position
    const every = Math.ceil(12 / scale);
    const size = Math.max(1, Math.min(M.font || 12, Math.floor(scale * every * 5 / 6))) + "px";
    for (const [axis, long, names, at] of [["x", "width", M.cols, M.colAt], ["y", "height", M.rows, M.rowAt]]) {
      const labels = part(axis);
      labels.replaceChildren();
      // groups end at the last position, which always has its label; the first group takes
      // what is left (every to 2 * every - 1 positions), so that each has room for the font
      for (let end = names.length, rows; end > 0; end -= rows) {
        rows = end < 2 * every ? end : every;
        const label = el("span", {class: "label", title: `${at(end - 1)}`}, names[end - 1]);
        label.style[long] = label.style.lineHeight = rows * scale + "px";
        label.style.fontSize = size;
        labels.prepend(label);
      }
    }
    function show() {
      const l = Number(layerSelect.value), h = Number(headSelect.value);
      paint(big, l, h, scale);
      const overview = part("overview"), small = Math.max(1, Math.floor(64 / Math.max(nQ, nK)));
      overview.replaceChildren();
      for (let hh = 0; hh < nHead; hh++) {
        const c = el("canvas", {title: `${t("head")} ${headName(hh)}`, "data-head": hh});
        paint(c, l, hh, small);
        c.style.width = nK * 64 / Math.max(nQ, nK) + "px";
        c.style.height = nQ * 64 / Math.max(nQ, nK) + "px";
        if (hh === h) c.classList.add("sel");
        c.addEventListener("click", () => { headSelect.value = hh; show(); });
        if (M.badge) {
          const figure = el("figure", {class: "head", "data-head": hh});
          figure.append(c, el("figcaption", {}, M.badge(l, hh)));
          overview.append(figure);
        } else {
          overview.append(c);
        }
      }
      if (part("range")) part("range").textContent = M.range ? M.range() : "";
      part("tip").textContent = "";
      if (M.onShow) M.onShow(l, h);
    }
    big.onmousemove = e => {
      // cells from the canvas's content box: its border is not part of the picture, and on a
      // long page a cell is one pixel wide
      const r = big.getBoundingClientRect();
      const x = e.clientX - r.left - big.clientLeft, y = e.clientY - r.top - big.clientTop;
      const k = Math.floor(x / big.clientWidth * nK), q = Math.floor(y / big.clientHeight * nQ);
      if (q < 0 || k < 0 || q >= nQ || k >= nK) return;
      const l = Number(layerSelect.value), h = Number(headSelect.value);
      part("tip").textContent = M.tip(l, h, q, k, weight(l, h, q, k));
    };
    layerSelect.onchange = show;
    headSelect.onchange = show;
    function select(l, h) { layerSelect.value = l; headSelect.value = h; show(); }
    return {show, select};
  }

  // The head scores as small layer-by-head grids, one per score; clicking a cell calls
  // onPick(layer, head). S = {previous, first, induction} (or the kinds given): [n_layer][n_head]
  // arrays (induction may be null: no token of the text repeats). kvHeads names each query head
  // with its key/value head, as attention() does.
  function headScores(container, S, onPick, kinds = ["previous", "first", "induction"],
                      kvHeads = null) {
    const headName = headNamer(kvHeads);
    container.replaceChildren();
    for (const kind of kinds) {
      const box = el("div", {class: "scores", "data-kind": kind});
      box.append(el("div", {class: "note"}, t("score_" + kind)));
      if (!S[kind]) {
        box.append(el("div", {class: "note"}, t(kind === "induction" && S.previous ? "no_repeat" : "one_token")));
        container.append(box);
        continue;
      }
      const table = el("table"), top = el("tr");
      top.append(el("th", {}, ""));
      S[kind][0].forEach((_, h) => top.append(el("th", {}, `${t("head")} ${headName(h)}`)));
      table.append(top);
      S[kind].forEach((row, l) => {
        const tr = el("tr");
        tr.append(el("th", {}, `${t("layer")} ${l}`));
        row.forEach((v, h) => {
          const td = el("td", {"data-layer": l, "data-head": h,
                               title: headName.said("head_tip", {kind: t("score_" + kind), l, h,
                                                                 v: v.toFixed(4)})}, v.toFixed(2));
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

  // The chosen head's cell in each head-score grid (of #heads, or of container) is marked
  // (aria-pressed)
  function markHead(l, h, container = document.getElementById("heads")) {
    container.querySelectorAll("td[data-layer]").forEach(td => td.setAttribute(
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
    const scroller = el("div", {class: "scroller"});
    scroller.append(table);
    container.replaceChildren(scroller);
    if (first > 0) container.prepend(el("div", {class: "note"}, t("range", {a: first, b: toks.length - 1, n: toks.length - first})));
    // a table wider than the page scrolls sideways, its layer column staying put; a line above it
    // says so, and the right edge fades while there is more to the right
    const cue = el("div", {class: "cue", id: "lens-cue"}, t("lens_scroll"));
    container.prepend(cue);
    const edge = () => {
      const more = scroller.scrollWidth - scroller.clientWidth;
      cue.hidden = more <= 1;
      container.classList.toggle("more", scroller.scrollLeft < more - 1);
    };
    scroller.addEventListener("scroll", edge);
    new ResizeObserver(edge).observe(scroller);
    edge();
  }

  // The cosine similarity of wpe's first rows, black (0 or below) to white (1); its section is
  // hidden for a model without a position table (W null: a LLaMA's positions are rotations)
  function wpe(canvas, W) {
    document.getElementById("wpe-panel").hidden = !W;
    if (!W) return;
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

  return Object.assign(api, {t, modelName, title, settings, el, floats, shown, quoted, words, tokens, candidates,
                             attention, attentionMap, headScores, markHead, lens, wpe});
})();
