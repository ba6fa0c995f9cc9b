// The riff's parts (guitars, bass, drums): one row per track with its name, instrument, tuning and notes, whether
// it is drawn (alphaTab's renderTracks), mute and solo (changeTrackMute, changeTrackSolo), and the part a Regenerate
// fills. A riff of one part shows no list: the page looks as it does for a single guitar.
// The parts come from the API (`riff.parts`, studio/parts.py), in the Guitar Pro file's track order, so part k is
// alphaTab's track k. Drawn, mute and solo are kept across candidates and Regenerates while the number of parts stays.
"use strict";

const tracks = {
  parts: [], shown: new Set(), mute: new Set(), solo: new Set(),
};
window.tracks = tracks;

// The track indexes alphaTab draws for this riff (every part, unless some were hidden for a riff of as many parts)
function tracksToDraw(parts) {
  if (parts.length !== tracks.parts.length) {
    tracks.shown = new Set(parts.map((p) => p.index));
    tracks.mute.clear();
    tracks.solo.clear();
  }
  tracks.parts = parts;
  return parts.map((p) => p.index).filter((i) => tracks.shown.has(i));
}

// After alphaTab loaded a riff: its synthesizer's mute and solo as the list says (the channel states outlast a load)
function applyMix() {
  const api = studio.api;
  if (!api || !api.score) return;
  if (api.player) api.player.resetChannelStates();
  for (const t of api.score.tracks) {
    t.playbackInfo.isMute = tracks.mute.has(t.index);
    t.playbackInfo.isSolo = tracks.solo.has(t.index);
    if (t.playbackInfo.isMute) api.changeTrackMute([t], true);
    if (t.playbackInfo.isSolo) api.changeTrackSolo([t], true);
  }
}

function setMix(kind, index, on) {
  const api = studio.api, track = api.score && api.score.tracks[index];
  (on ? tracks[kind].add(index) : tracks[kind].delete(index));
  if (!track) return;
  if (kind === "mute") {
    track.playbackInfo.isMute = on;
    api.changeTrackMute([track], on);
  } else {
    track.playbackInfo.isSolo = on;
    api.changeTrackSolo([track], on);
  }
  showTracks();
}

function setShown(index, on) {
  if (!on && tracks.shown.size <= 1) return;  // one track at least stays drawn
  (on ? tracks.shown.add(index) : tracks.shown.delete(index));
  const api = studio.api;
  studio.scrollPending = false;
  if (api.score) api.renderTracks(api.score.tracks.filter((t) => tracks.shown.has(t.index)));
  showTracks();
}

function toggle(label, title, pressed, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.title = title;
  b.className = "toggle";
  b.setAttribute("aria-pressed", String(pressed));
  b.addEventListener("click", onClick);
  return b;
}

// The list of tracks and the Regenerate fieldset's part choice, for the riff on the page
function showTracks() {
  const box = $("tracks"), parts = tracks.parts, several = parts.length > 1;
  box.hidden = !several;
  $("part-row").hidden = !several;
  box.textContent = "";
  if (!several) return;
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const h of ["Drawn", "Track", "Instrument", "Tuning", "Notes", ""]) head.append(Object.assign(document.createElement("th"), { textContent: h }));
  const body = table.createTBody();
  for (const p of parts) {
    const row = body.insertRow();
    row.dataset.track = p.index;
    row.className = p.kind + (p.edited ? " edited" : "");
    const show = Object.assign(document.createElement("input"), { type: "checkbox", checked: tracks.shown.has(p.index) });
    show.className = "show";
    show.title = "draw this track";
    show.disabled = show.checked && tracks.shown.size <= 1;
    show.addEventListener("change", () => setShown(p.index, show.checked));
    row.insertCell().append(show);
    row.insertCell().textContent = p.name + (p.edited ? " ✱" : "");
    if (p.edited) row.cells[1].title = "the part the model wrote";
    row.insertCell().textContent = `${p.instrument} (${p.kind})`;
    row.insertCell().textContent = p.tuning;
    row.insertCell().textContent = p.notes;
    const mix = row.insertCell();
    mix.className = "mix";
    mix.append(toggle("M", "mute this track", tracks.mute.has(p.index), () => setMix("mute", p.index, !tracks.mute.has(p.index))),
      toggle("S", "solo: hear only the soloed tracks", tracks.solo.has(p.index), () => setMix("solo", p.index, !tracks.solo.has(p.index))));
  }
  box.append(table);
  choosePart();
}

// The Regenerate fieldset's parts: every stringed one (drums have no strings to regenerate); the model's by default
function choosePart(index) {
  const select = $("infill-part"), parts = tracks.parts;
  const keep = index != null ? index : select.options.length === parts.length && select.value !== "" ? Number(select.value)
    : (parts.find((p) => p.edited) || parts[0] || { index: 0 }).index;
  select.textContent = "";
  for (const p of parts) {
    const o = new Option(`${p.index + 1}. ${p.name}`, p.index);
    if (p.kind === "drums") { o.disabled = true; o.textContent += " (drums: no strings)"; }
    select.append(o);
  }
  if (parts[keep] && parts[keep].kind !== "drums") select.value = keep;
}

// The part a Regenerate sends (null for a riff of one part) and its name for the status line
function partToFill() {
  if (tracks.parts.length <= 1) return null;
  const index = Number($("infill-part").value);
  return { index, name: tracks.parts[index].name };
}
