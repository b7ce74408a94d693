// The --explore page's script: every number comes from the server (picogpt's own functions on
// the loaded model); this script only asks, and draws what comes back with the shared views.
// The server's session holds the one text: the page shows it, sends the version it last saw
// with every call, and shows the session's text again (and says so) when another tab changed it.
"use strict";
const t = Views.t, $ = id => document.getElementById(id);
const TOKEN = new URLSearchParams(location.search).get("token");
const PAGE = Math.random().toString(36).slice(2);  // this tab's name: each tab counts its own
const seq = {};  // the newest request number of each kind: the server drops stale ones
const said = {};  // a message per kind of action, shown until the next action of that kind
const ACTION = {state: "load", text: "text", next: "settings", append: "step", draw: "step",
                back: "step", generate: "generate", stop: "generate", inside: "inside"};
let state = null, next = null, inside = null, attention = null, version = null;
let generating = false;
window.pending = 0;  // requests on their way (a generation until its stream ends): tests wait

function say(kind, text) {
  said[kind] = text;
  $("status").textContent = Object.values(said).filter(Boolean).join("\n");
}
// A new action: what earlier actions said is over, except a refusal of the box's text (true for
// as long as the box holds it) and a lost server (until the server answers)
function act() {
  for (const kind of Object.keys(said)) if (kind !== "text" && kind !== "server") said[kind] = "";
  say("notice", "");
}
function unheld() {  // the bytes of the text that the box cannot hold
  return state ? [state.pending, state.stray].filter(Boolean).join(" ") : "";
}
async function api(kind, body = {}) {
  const counter = kind === "stop" ? "generate" : kind;  // a stop supersedes the generation
  const mine = seq[counter] = (seq[counter] || 0) + 1;
  window.pending++;
  try {
    let response;
    try {
      response = await fetch("/api/" + kind, {method: "POST", headers: {
        "Content-Type": "application/json", "X-Picogpt-Token": TOKEN,
        "Accept-Language": Views.lang === "zh" ? "zh-CN,zh;q=0.9" : "en"},
        body: JSON.stringify({...body, seq: mine, page: PAGE, version})});
    } catch (error) {  // no answer at all: the server is gone
      say("server", t("lost"));
      return null;
    }
    say("server", "");
    if (response.status === 204) return null;  // superseded: a newer request of this kind
    const type = response.headers.get("Content-Type") || "";
    if (response.ok && type.startsWith("application/x-ndjson")) return response;
    const value = await response.json().catch(() => ({error: String(response.status)}));
    if (value.superseded) return null;  // (as the server said it before answering 204)
    if (value.changed) { await changedElsewhere(); return null; }
    if (mine !== seq[counter]) return null;  // a newer one of this kind was sent meanwhile
    if (!response.ok) { say(ACTION[kind], value.error || String(response.status)); return null; }
    say(ACTION[kind], value.refused || "");  // a text the form refuses: it stands, said why
    if (value.version !== undefined) version = value.version;
    return value;
  } finally {
    window.pending--;
  }
}
async function changedElsewhere() {  // show the session's text as it is now, and say why
  say("notice", t("changed"));
  after(await api("state", settings()));
}
function settings() {
  const k = Number($("top_k").value), p = Number($("top_p").value), sample = sampling();
  const form = MODEL && MODEL.form ? {line: $("line").value ? Number($("line").value) : null,
                                      acrostic: $("acrostic").value.trim() || null,
                                      rhyme: $("rhyme").checked} : {};
  return {temperature: Number($("temperature").value), top_k: sample && k > 0 ? k : null,
          top_p: sample ? p : null, repetition_penalty: Number($("penalty").value), ...form};
}
function sampling() { return $("mode-sample").checked; }
function showKnobs() {
  const k = Number($("top_k").value), p = Number($("top_p").value);
  $("temperature-value").textContent = Number($("temperature").value).toFixed(2);
  $("top_k-value").textContent = k > 0 ? String(k) : t("off");
  $("top_p-value").textContent = p < 1 ? p.toFixed(2) : t("all");
  $("penalty-value").textContent = Number($("penalty").value).toFixed(2);
  $("mode-note").textContent = t(sampling() ? "note_sample" : "note_greedy");
  document.body.classList.toggle("greedy", !sampling());
  enable();
}
function enable() {  // during a generation nothing may change the text or its settings
  for (const id of ["generate", "back", "greedy", "penalty", "n_generate", "mode-sample",
                    "mode-greedy", "line", "acrostic", "rhyme"]) $(id).disabled = generating;
  for (const id of ["temperature", "top_k", "top_p", "seed", "draw"]) {
    $(id).disabled = generating || !sampling();
  }
  $("prompt").readOnly = generating;
  $("stop").disabled = !generating;
  document.querySelectorAll("#cands button.name").forEach(b => { b.disabled = generating; });
}
function showState(value) {
  if (!value) return;
  if (value.tokens) {
    const ids = s => s ? s.tokens.map(tok => tok.id).join(",") : null;
    const same = ids(state) === ids(value);
    state = value;
    Views.tokens($("tokens"), state.tokens, state.characters, state.tokens.length, null);
    $("count").textContent = t(state.n_tokens === 1 ? "count_one" : "count", {n: state.n_tokens, ctx: state.n_ctx});
    showPending();
    if (!same) refreshInside();
  }
  if (value.next) { next = value.next; showNext(); }
}
function showPending() {
  $("pending").textContent = [state.pending ? t("pending", {bytes: state.pending}) : "",
                              state.stray ? t("stray", {bytes: state.stray}) : ""].filter(Boolean).join("\n");

}
function showNext() {
  if (!next) return;
  const token = sampling() ? null : {id: next.greedy};  // greedy: the token it takes, marked
  Views.candidates($("cands"), {candidates: next.candidates, token}, append);
  $("entropy").textContent = t("entropy", {e: next.entropy.toFixed(3)});
  enable();
}
let insideTimer = null, insideWanted = 0;
function refreshInside() {  // the inside views trace the whole text: ask once typing pauses
  clearTimeout(insideTimer);
  const wanted = ++insideWanted;
  busy(true);  // the views on the page are of an older text from now on
  insideTimer = setTimeout(async () => {
    const value = await api("inside");
    if (wanted !== insideWanted) return;  // a newer text asks for its own
    if (value) { inside = value; showInside(); }
    busy(false);
  }, 250);
}
function busy(on) {
  $("inside-busy").hidden = !on;
  document.body.classList.toggle("inside-busy", on);
}
function showInside() {
  if (!inside) return;
  const layer = $("layer").value, head = $("head").value;
  attention = Views.attention(inside.attention, inside.tokens, inside.n_layer, inside.n_head,
                              inside.characters, inside.kv_heads);
  Views.headScores($("heads"), inside.heads, (l, h) => {
    attention.select(l, h);
    $("attn").scrollIntoView({block: "center"});
  }, undefined, inside.kv_heads);
  attention.select(layer || 0, head || 0);
  Views.lens($("lens"), inside.lens, inside.tokens);
  Views.wpe($("wpe"), inside.wpe);
}
async function setText() {
  act();
  const dropped = unheld();
  const value = await api("text", {prompt: $("prompt").value, ...settings()});
  if (value) {
    say("notice", [dropped ? t("dropped", {bytes: dropped}) : "",
                   value.retokenized ? t(value.retokenized === 1 ? "retokenized_one" : "retokenized", {n: value.retokenized}) : ""].filter(Boolean).join(" "));
  }
  showState(value);
}
function after(value) {  // a step changed the text: the box shows its whole characters
  if (!value || value.text === undefined) return;
  showState(value);
  if (said.text && $("prompt").value !== value.text) {  // never silently: the box held a refusal
    say("text", "");
    say("notice", t("replaced"));
  }
  $("prompt").value = value.text;
}
async function step(kind, body = {}) {
  if (generating) return;
  act();
  after(await api(kind, {...body, ...settings()}));
}
function append(id) { return step("append", {token: id}); }
async function generate() {
  if (generating) return;  // a second click while the first starts: still n tokens
  generating = true;
  enable();
  act();
  window.pending++;
  try {
    const response = await api("generate", {n_tokens: Number($("n_generate").value),
                                            seed: Number($("seed").value), ...settings()});
    if (response) await stream(response);
  } finally {
    generating = false;
    window.pending--;
    enable();
  }
}
async function stream(response) {
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let held = "", tokens = state ? state.tokens : [];
  for (;;) {
    let read;
    try {
      read = await reader.read();
    } catch (error) {
      say("server", t("lost"));
      return;
    }
    if (read.done) break;
    held += decoder.decode(read.value, {stream: true});
    const lines = held.split("\n");
    held = lines.pop();
    for (const line of lines.filter(Boolean)) {
      const item = JSON.parse(line);
      if (item.token) {  // streaming: the piece joins the strip as it comes
        tokens = [...tokens, item.token];
        Views.tokens($("tokens"), tokens, [], tokens.length, null);
      } else {  // an error the generation met (the stream goes on to its end), or the end
        if (item.error) say("generate", item.error);
        if (item.version !== undefined) version = item.version;
        after(item);
      }
    }
  }
}
async function look() {  // back in this tab: has another one changed the text meanwhile?
  if (generating || document.hidden) return;
  const seen = version, value = await api("state", settings());
  if (value && seen !== null && value.version !== seen) {
    say("notice", t("changed"));
    after(value);
  }
}

let typing = null;
function typed(event) {
  if (event.isComposing) return;  // an input method still composing: wait for its character
  clearTimeout(typing);
  typing = setTimeout(setText, 120);
}
$("prompt").addEventListener("input", typed);
$("prompt").addEventListener("compositionend", typed);
$("verse").hidden = !(MODEL && MODEL.form);  // a form needs a token for each character
// a trained model's sampler, the one its task recommends (sampler.json), is where the knobs start
for (const [key, value] of Object.entries((MODEL && MODEL.sampler) || {})) {
  if ($(key)) $(key).value = value;
}
async function knobMoved(event) {
  if (event.isComposing) return;  // an input method still composing: wait for its character
  act();
  showKnobs();
  showState(await api("next", settings()));
}
for (const id of ["temperature", "top_k", "top_p", "penalty", "mode-sample", "mode-greedy",
                  "line", "acrostic", "rhyme"]) {
  $(id).addEventListener("input", knobMoved);
}
$("acrostic").addEventListener("compositionend", knobMoved);
$("greedy").addEventListener("click", () => next && append(next.greedy));
$("draw").addEventListener("click", () => step("draw", {seed: Number($("seed").value)}));
$("back").addEventListener("click", () => step("back"));
$("generate").addEventListener("click", generate);
$("stop").addEventListener("click", () => api("stop"));
document.addEventListener("visibilitychange", look);
window.addEventListener("focus", look);

function showLanguage(which) {
  Views.lang = which;
  Views.words();
  document.title = "picogpt: " + Views.title($("title"), model => t("explore_title", {model}), MODEL);
  showKnobs();
  if (state) {
    $("count").textContent = t(state.n_tokens === 1 ? "count_one" : "count", {n: state.n_tokens, ctx: state.n_ctx});
    showPending();
  }
  showNext();
  showInside();
}
document.querySelectorAll("#lang button").forEach(b => b.addEventListener("click", () => showLanguage(b.dataset.lang)));
showLanguage(Views.lang);
api("state", settings()).then(after);  // the session's text, whatever tab set it
