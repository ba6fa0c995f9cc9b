// The studio page: a form built from /api/run, riffs drawn and played by alphaTab, bars regenerated in place
// (a riff's tracks, their mute and solo and the part a Regenerate fills: tracks.js).
// Plain JS, no build step. `window.studio` exposes the state for the browser test and for curious users.
"use strict";

// The form's fields, in order, come from /api/run (`form`: {name, label, input, help}; the controls' from the
// server's registry of controls), so a control the server knows is a field here without an edit.
const DEFAULTS = { bars: 8, seed: 0 };
const ALPHATAB = new URL("/static/alphatab/", location.href).href;

const $ = (id) => document.getElementById(id);
const studio = {
  info: null, riffs: [], index: -1, job: null, api: null, timings: [], rendered: 0, playerReady: false,
  clickedAt: null, selection: null, scrollPending: false, marked: null,
};
window.studio = studio;

function newJobId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return Array.from({ length: 4 }, () => Math.random().toString(16).slice(2, 10)).join("-");
}

function showMessage(text) {
  const box = $("message");
  box.textContent = text || "";
  box.hidden = !text;
}

function setStatus(text) { $("status").textContent = text || ""; }

async function callApi(url, init) {
  const res = await fetch(url, init);
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const problem = body && body.error ? body.error : `${res.status} ${res.statusText}`;
    const err = new Error(body && body.fix ? `${problem} — ${body.fix}` : problem);
    err.status = res.status;
    throw err;
  }
  return body;
}

// ---- the form, from what the run honours ----
function buildForm(info) {
  const box = $("option-fields");
  for (const { name, label, input: kind, help } of info.form) {
    const opt = info.options[name] || { available: false, reason: "this run does not know this option" };
    const row = document.createElement("label");
    row.className = "row" + (opt.available ? "" : " off");
    row.textContent = label + " ";
    if (help) row.title = help;
    let input;
    if (opt.values && opt.values.length) {
      input = document.createElement("select");
      input.append(new Option("(run's choice)", ""));
      if (name === "time_signature") {  // `sample --time-signature auto | none`
        input.append(new Option("drawn from its tunes' meters", "auto"));
        input.append(new Option("the model's own", "none"));
      }
      for (const v of opt.values) input.append(new Option(v, v));
    } else {
      input = document.createElement("input");
      input.type = kind === "text" ? "text" : "number";
      if (kind === "float") input.step = "any";
      if (name in DEFAULTS) input.value = DEFAULTS[name];
    }
    input.name = name;
    input.id = "opt-" + name;
    input.disabled = !opt.available;
    if (!opt.available) input.title = opt.reason || "";
    row.append(input);
    box.append(row);
    if (!opt.available) {
      const why = document.createElement("span");
      why.className = "reason";
      why.textContent = opt.reason || "not available for this run";
      box.append(why);
    }
  }
  if (!info.can_infill) {
    $("infill-reason").textContent = "This run was not trained with infilling, so bars cannot be regenerated.";
  }
}

function formOptions() {
  const out = {};
  for (const { name, input: kind } of studio.info.form) {
    const input = $("opt-" + name);
    if (!input || input.disabled || input.value === "") continue;
    out[name] = kind === "text" ? input.value : Number(input.value);
  }
  return out;
}

function describeRun(info) {
  const learned = Object.entries(info.options)
    .filter(([, o]) => o.available && o.values && o.values.length)
    .map(([n, o]) => `${n}: ${o.values.length <= 6 ? o.values.join(", ") : o.values.length + " values"}`);
  const loss = info.val_loss == null ? "" : `, val loss ${info.val_loss.toFixed(3)}`;
  const step = info.step == null ? "" : `, step ${info.step}`;
  // What a guitarist reads (the model, its styles, tunings and textures); the technical line on hover
  $("run").textContent = info.headline || info.describe || info.run_dir;
  $("run").title = `${info.describe || info.run_dir} — ${info.kind} on ${info.tokenizer || "tokens"}${step}` +
    `${loss}; ${info.can_infill ? "regenerates bars" : "no infilling"}` +
    (learned.length ? `; learned ${learned.join("; ")}` : "");
}

// ---- alphaTab ----
function makeApi() {
  const s = new alphaTab.Settings();
  s.core.fontDirectory = ALPHATAB + "font/";
  s.core.scriptFile = ALPHATAB + "alphaTab.min.js";
  s.core.engine = "svg";
  s.core.enableLazyLoading = false;  // riffs are short: draw every bar at once (and the test sees them all)
  s.display.staveProfile = alphaTab.StaveProfile.ScoreTab;
  s.display.scale = 0.9;
  s.player.playerMode = alphaTab.PlayerMode.EnabledSynthesizer;
  s.player.soundFont = ALPHATAB + "soundfont/sonivox.sf3";
  s.player.enableCursor = true;
  s.player.enableUserInteraction = true;
  s.player.scrollElement = $("score-wrap");
  // the riff has no title or artist worth a heading
  for (const el of ["ScoreTitle", "ScoreSubTitle", "ScoreArtist", "ScoreAlbum", "ScoreWords", "ScoreMusic",
    "ScoreWordsAndMusic", "ScoreCopyright"]) s.notation.elements.set(alphaTab.NotationElement[el], false);
  const api = new alphaTab.AlphaTabApi($("score"), s);
  api.renderFinished.on(() => {
    studio.rendered += 1;
    if (studio.clickedAt != null) {
      studio.timings.push(performance.now() - studio.clickedAt);
      studio.clickedAt = null;
    }
    setStatus("");
  });
  api.postRenderFinished.on(markNewBars);  // the bars' bounds are known from here on
  api.error.on((e) => showMessage(`alphaTab: ${e && e.message ? e.message : e}`));
  api.playerReady.on(() => { studio.playerReady = true; applyMix(); updateButtons(); });
  api.playerStateChanged.on((e) => { $("play").textContent = e.state === 1 ? "Pause" : "Play"; });
  api.playerPositionChanged.on((e) => {
    studio.position = e.currentTime;
    $("time").textContent = `${fmt(e.currentTime)} / ${fmt(e.endTime)}`;
  });
  api.beatMouseDown.on((beat) => { studio.dragFrom = beat; });
  api.beatMouseUp.on((beat) => {
    const from = studio.dragFrom;
    studio.dragFrom = null;
    if (!from) return;
    const a = from.voice.bar.index + 1, b = (beat || from).voice.bar.index + 1;
    selectBars(Math.min(a, b), Math.max(a, b));
    const part = tracks.parts[from.voice.bar.staff.track.index];  // dragged on a track: Regenerate fills that part
    if (tracks.parts.length > 1 && part && part.kind !== "drums") choosePart(part.index);
  });
  return api;
}

// ---- the bars just written: a Continue's new bars or a Regenerate's, marked and shown ----
// One box per bar over the drawn score (alphaTab's bounds of each master bar, relative to #score); a riff from
// nothing has no `new_bars` (every bar is new): nothing is marked and the score opens at bar 1. Called after each
// render (a resize draws the bars again); the score scrolls only after a riff is loaded, not on a resize.
function markNewBars() {
  const layer = $("new-bars"), riff = studio.riffs[studio.index], lookup = studio.api.boundsLookup;
  layer.textContent = "";
  const [first, last] = (riff && riff.new_bars) || [0, -1];
  for (let bar = first; bar <= last && lookup; bar++) {
    const master = lookup.findMasterBarByIndex(bar - 1);
    if (!master) continue;
    const b = master.visualBounds, box = document.createElement("div");
    box.className = "new-bar";
    box.dataset.bar = bar;
    box.title = riff.regenerated ? `bar ${bar}: regenerated` : `bar ${bar}: new`;
    Object.assign(box.style, { left: `${b.x}px`, top: `${b.y}px`, width: `${b.w}px`, height: `${b.h}px` });
    layer.append(box);
  }
  studio.marked = riff ? riff.id : null;  // the riff whose bars are marked (the browser test waits for it)
  if (!studio.scrollPending) return;
  studio.scrollPending = false;
  const target = layer.firstElementChild || $("score-wrap");
  const r = target.getBoundingClientRect();
  if (layer.firstElementChild ? r.top < 0 || r.bottom > window.innerHeight : r.top < 0) {
    target.scrollIntoView({ block: layer.firstElementChild ? "center" : "start" });
  }
}

function fmt(ms) {
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function selectBars(first, last) {
  $("bar-first").value = first;
  $("bar-last").value = last;
  studio.selection = [first, last];
  updateButtons();
}

async function showRiff(i) {
  studio.index = i;
  const riff = studio.riffs[i];
  $("which").textContent = `candidate ${i + 1} of ${studio.riffs.length} · ${riff.bars} bars, ${riff.notes} notes` +
    (riff.regenerated ? ` · bars ${riff.regenerated[0]}-${riff.regenerated[1]} regenerated (seed ${riff.seed})`
      : riff.new_bars ? ` · bars ${riff.new_bars[0]}-${riff.new_bars[1]} new (seed ${riff.seed})`
        : riff.seed != null ? ` · seed ${riff.seed}` : "");
  $("ascii").textContent = riff.tab;
  const links = [["gp", "Guitar Pro 5"], ["midi", "MIDI"], ["tab", "ASCII tab"], ["wav", "WAV"]];
  const dl = $("downloads");
  dl.textContent = "";
  for (const [kind, label] of links) {
    const a = document.createElement("a");
    a.textContent = label;
    a.id = "download-" + kind;
    if (riff.files[kind]) {
      a.href = riff.files[kind];
      a.download = `riff-${riff.id}.${{ gp: "gp5", midi: "mid", tab: "txt", wav: "wav" }[kind]}`;
    } else if (kind === "wav") {
      a.href = "#";
      a.title = "rendered in this browser with the bundled SoundFont";
      a.addEventListener("click", (ev) => { ev.preventDefault(); downloadWav(riff); });
    } else continue;
    dl.append(a);
  }
  const first = Math.min(Number($("bar-first").value) || 1, riff.bars);
  $("bar-first").max = $("bar-last").max = riff.bars;
  if (Number($("bar-last").value) > riff.bars) $("bar-last").value = riff.bars;
  $("bar-first").value = first;
  const data = await (await fetch(riff.files.gp)).arrayBuffer();
  $("new-bars").textContent = "";  // the last riff's marks go with it
  studio.scrollPending = true;
  studio.api.load(new Uint8Array(data), tracksToDraw(riff.parts || []));
  applyMix();
  showTracks();
  updateButtons();
}

function updateButtons() {
  const n = studio.riffs.length, busy = studio.job != null;
  $("prev").disabled = studio.index <= 0;
  $("next").disabled = studio.index < 0 || studio.index >= n - 1;
  $("play").disabled = $("stop").disabled = !(studio.playerReady && n);
  $("generate").disabled = $("continue").disabled = busy;
  $("cancel").disabled = !busy;
  $("regenerate").disabled = busy || !n || !(studio.info && studio.info.can_infill);
}

// ---- requests ----
async function runJob(label, send) {
  showMessage("");
  studio.job = newJobId();
  updateButtons();
  setStatus(label + "…");
  try {
    return await send(studio.job);
  } catch (e) {
    showMessage(e.status === 409 ? "Cancelled." : e.message);
    setStatus("");
    return null;
  } finally {
    studio.job = null;
    updateButtons();
  }
}

async function generate(ev) {
  ev.preventDefault();
  studio.clickedAt = performance.now();
  const body = { ...formOptions(), num_samples: Number($("candidates").value) || 1 };
  const out = await runJob("generating", (job) => callApi("/api/sample", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, job }),
  }));
  if (!out) { studio.clickedAt = null; return; }
  studio.riffs = out.riffs;
  await showRiff(0);
}

async function continueFile() {
  const file = $("upload").files[0];
  if (!file) { showMessage("Choose a file to continue first."); return; }
  studio.clickedAt = performance.now();
  const opts = formOptions();
  delete opts.time_signature;  // a continuation keeps the file's meter
  const out = await runJob("continuing " + file.name, (job) => {
    const fd = new FormData();
    fd.append("file", file);
    fd.append("options", JSON.stringify({ ...opts, num_samples: Number($("candidates").value) || 1, job }));
    return callApi("/api/continue", { method: "POST", body: fd });
  });
  if (!out) { studio.clickedAt = null; return; }
  studio.riffs = out.riffs;
  await showRiff(0);
}

async function regenerate() {
  const riff = studio.riffs[studio.index];
  const bars = [Number($("bar-first").value), Number($("bar-last").value)];
  const body = { riff: riff.id, bars, seed: Math.floor(Math.random() * 1e9) }, part = partToFill();
  if (part) body.part = part.index;
  for (const name of ["temperature", "top_p"]) {
    const input = $("opt-" + name);
    if (input && !input.disabled && input.value !== "") body[name] = Number(input.value);
  }
  studio.clickedAt = performance.now();
  const out = await runJob(`regenerating bars ${bars[0]}-${bars[1]}${part ? " of " + part.name : ""}`, (job) => callApi("/api/infill", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, job }),
  }));
  if (!out) { studio.clickedAt = null; return; }
  studio.riffs[studio.index] = out.riffs[0];
  await showRiff(studio.index);
}

async function cancel() {
  if (studio.job) await callApi(`/api/cancel/${studio.job}`, { method: "POST" }).catch(() => null);
}

// ---- WAV without a server-side synthesizer: alphaTab renders the riff with the bundled SoundFont ----
async function downloadWav(riff) {
  setStatus("rendering WAV…");
  try {
    const opts = new alphaTab.synth.AudioExportOptions();
    opts.sampleRate = 44100;
    const exporter = await studio.api.exportAudio(opts);
    const chunks = [];
    let chunk;
    while ((chunk = await exporter.render(500)) !== undefined) chunks.push(chunk.samples);
    exporter.destroy();
    const blob = wavBlob(chunks, opts.sampleRate);
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `riff-${riff.id}.wav`;
    a.click();
    setStatus("");
  } catch (e) {
    showMessage(`could not render the WAV: ${e.message || e}`);
  }
}

function wavBlob(chunks, rate) {
  // alphaTab's samples are interleaved stereo floats in [-1, 1]: 16-bit PCM
  const n = chunks.reduce((s, c) => s + c.length, 0);
  const buf = new ArrayBuffer(44 + n * 2), v = new DataView(buf);
  const str = (o, s) => { for (let i = 0; i < s.length; i++) v.setUint8(o + i, s.charCodeAt(i)); };
  str(0, "RIFF"); v.setUint32(4, 36 + n * 2, true); str(8, "WAVE"); str(12, "fmt ");
  v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 2, true); v.setUint32(24, rate, true);
  v.setUint32(28, rate * 4, true); v.setUint16(32, 4, true); v.setUint16(34, 16, true);
  str(36, "data"); v.setUint32(40, n * 2, true);
  let o = 44;
  for (const c of chunks) for (const x of c) { v.setInt16(o, Math.max(-1, Math.min(1, x)) * 32767, true); o += 2; }
  return new Blob([buf], { type: "audio/wav" });
}

// ---- start ----
async function start() {
  $("options").addEventListener("submit", generate);
  $("cancel").addEventListener("click", cancel);
  $("continue").addEventListener("click", continueFile);
  $("regenerate").addEventListener("click", regenerate);
  $("prev").addEventListener("click", () => showRiff(studio.index - 1));
  $("next").addEventListener("click", () => showRiff(studio.index + 1));
  $("play").addEventListener("click", () => studio.api.playPause());
  $("stop").addEventListener("click", () => studio.api.stop());
  for (const id of ["bar-first", "bar-last"]) {
    $(id).addEventListener("change", () => { studio.selection = [Number($("bar-first").value), Number($("bar-last").value)]; });
  }
  try {
    studio.info = await callApi("/api/run");
  } catch (e) {
    showMessage(`could not read the run: ${e.message}`);
    return;
  }
  describeRun(studio.info);
  buildForm(studio.info);
  studio.api = makeApi();
  updateButtons();
}

start();
