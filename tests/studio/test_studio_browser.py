"""The studio as a guitarist uses it, in headless Chromium: open the page, Generate, see the tab alphaTab draws
(every fret of the file, bar by bar), play it and watch the cursor move, drag across two bars and Regenerate
them (the other bars stay), upload a broken file and read the message; continue a band's file and see, hear,
mute, solo, hide and regenerate its parts.

Needs Playwright for Python and a Chromium on the machine (Debian: `apt-get install chromium`; Playwright's own
browser downloads are not used). Skips, saying which is missing, elsewhere. Set STUDIO_SCREENSHOTS=docs to keep
the screenshots it takes (docs/studio.md shows them).
"""

from __future__ import annotations

import os
from array import array
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import symusic
from PIL import Image

from guitarformer.app import load_run
from guitarformer.studio import BackgroundServer, create_app
from helpers.studio_runs import band_midi, free_port, studio_run

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs Playwright for Python "
                               "(pip install playwright; its browsers are not needed)")
guitarpro = pytest.importorskip("guitarpro")

CHROMIUM = next((p for p in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]
BROKEN = Path(__file__).parents[1] / "fixtures" / "io" / "corrupt.gp5"
# A fret as alphaTab draws it on a tab line: 5; (5) ghost or tied; x dead; <12> or <16.7> a harmonic's mark.
FRET = re.compile(r"^([(<]?)(\d+(?:\.\d+)?|x)[)>]?$")

# Every fret number drawn on the tab staff, by bar: a text element whose centre lies inside the tab staff's bounds
# of a bar (alphaTab's boundsLookup: per bar, the score staff's bounds and then the tab staff's).
DRAWN_TAB = """() => {
  const lookup = studio.api.boundsLookup, origin = document.getElementById('score').getBoundingClientRect();
  const texts = Array.from(document.querySelectorAll('#score svg text')).map(t => {
    const r = t.getBoundingClientRect();
    return [t.textContent.trim(), r.x + r.width / 2 - origin.x, r.y + r.height / 2 - origin.y];
  });
  const bars = [];
  for (const system of lookup.staffSystems) for (const master of system.bars) {
    const b = master.bars[master.bars.length - 1].realBounds;
    bars[master.index] = texts.filter(([s, x, y]) => x >= b.x && x < b.x + b.w && y >= b.y - 8 && y <= b.y + b.h + 8)
      .map(([s]) => s);
  }
  return bars;
}"""
BAR_POINT = """(i) => {
  const origin = document.getElementById('score').getBoundingClientRect();
  for (const system of studio.api.boundsLookup.staffSystems) for (const master of system.bars) {
    if (master.index !== i) continue;
    const beat = master.bars[master.bars.length - 1].beats[0].visualBounds;
    return [origin.x + beat.x + beat.w / 2, origin.y + beat.y + beat.h / 2];
  }
  return null;
}"""
# The boxes the page lays over the bars it just wrote (a Continue's or a Regenerate's), in viewport coordinates
MARKED = """() => Array.from(document.querySelectorAll('#new-bars .new-bar')).map(e => {
  const r = e.getBoundingClientRect();
  return {bar: Number(e.dataset.bar), left: r.left, top: r.top, right: r.right, bottom: r.bottom};
})"""
# What the page asks of alphaTab's synthesizer (it runs in a worker): each mute, solo and reset message, in order
SYNTH_CALLS = """(() => {
  const post = Worker.prototype.postMessage;
  window.synthCalls = [];
  Worker.prototype.postMessage = function (message, ...rest) {
    if (message && /^alphaSynth[.](setChannelMute|setChannelSolo|resetChannelStates)$/.test(message.cmd)) {
      window.synthCalls.push(message);
    }
    return post.call(this, message, ...rest);
  };
})()"""
# Notes per track as alphaTab read the Guitar Pro file (a note tied over a bar line counted once).
NOTES_PER_TRACK = """() => studio.api.score.tracks.map(t => { let n = 0;
  for (const st of t.staves) for (const b of st.bars) for (const v of b.voices) for (const beat of v.beats)
    for (const note of beat.notes) if (!note.isTieDestination) n++;
  return n; })"""
# Per drawn staff system, the track of each staff line alphaTab drew in it, top to bottom (a stringed track draws
# notation and tab: two lines; a drum track one line of percussion)
DRAWN_TRACKS = """() => studio.api.boundsLookup.staffSystems.map(s =>
  s.bars[0].bars.map(b => (b.bar || b.beats[0].beat.voice.bar).staff.track.index))"""
CURSOR_X = "() => { const c = document.querySelector('.at-cursor-beat'); return c ? c.getBoundingClientRect().x : null; }"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = os.environ.get("STUDIO_SCREENSHOTS")
    return Path(out) if out else tmp_path_factory.mktemp("shots")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    run = studio_run(tmp_path_factory.mktemp("browser") / "run")
    with BackgroundServer(create_app(load_run(run)), free_port()) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.requests = []
        page.add_init_script(SYNTH_CALLS)
        page.on("request", lambda r: page.requests.append(r.url))
        page.goto(server + "/")
        page.wait_for_function("window.studio && window.studio.api")
        yield page
        browser.close()


def long_seed(server: str, bars: int = 4) -> int:
    """A seed whose riff has at least `bars` bars (the untrained tiny model often stops after one)."""
    for seed in range(0, 32, 8):
        res = httpx.post(f"{server}/api/sample", json={"bars": 8, "num_samples": 8, "seed": seed}, timeout=120)
        for riff in res.json()["riffs"]:
            if riff["bars"] >= bars:
                return riff["seed"]
    raise AssertionError(f"no seed in 0..31 gave {bars} bars")


@dataclass
class FileBar:
    """A bar of the Guitar Pro file as a tab shows it."""

    frets: Counter  # plain notes' frets ('x' dead); each must be drawn in the bar
    tied: Counter  # tied notes' frets: alphaTab draws them only where a line starts, in brackets
    harmonics: int  # harmonics: drawn with one or two labels alphaTab chooses (<12> for fret 23, 2 <16.7> tapped)


def file_bars(server: str, url: str, tmp: Path) -> list[FileBar]:
    path = tmp / "riff.gp5"
    path.write_bytes(httpx.get(server + url).content)
    out = []
    for m in guitarpro.parse(str(path)).tracks[0].measures:
        notes = [n for v in m.voices for b in v.beats for n in b.notes]
        label = lambda n: "x" if n.type.name == "dead" else str(n.value)  # noqa: E731
        plain = [n for n in notes if n.effect.harmonic is None]
        out.append(FileBar(Counter(label(n) for n in plain if n.type.name != "tie"),
                           Counter(label(n) for n in plain if n.type.name == "tie"), len(notes) - len(plain)))
    return out


def shoot(page, path: Path) -> None:
    """A screenshot kept small: 64 colours (the page is mostly black on white)."""
    page.screenshot(path=str(path))
    Image.open(path).convert("RGB").quantize(64).save(path, optimize=True)


def drawn_frets(page) -> list[Counter]:
    """Per bar, every fret label drawn on the tab staff."""
    return [Counter(m.group(2) for m in map(FRET.match, bar) if m) for bar in page.evaluate(DRAWN_TAB)]


def check_drawn(drawn: list[Counter], bars: list[FileBar], when: str) -> None:
    """Every plain note of the file is drawn in its bar; what is drawn beyond them is a tied note's fret or the
    one or two labels of each harmonic."""
    assert len(drawn) == len(bars), f"{when}: {len(drawn)} bars drawn, {len(bars)} in the file"
    for k, (have, bar) in enumerate(zip(drawn, bars)):
        assert not bar.frets - have, f"{when}, bar {k + 1}: frets {dict(bar.frets - have)} of the file are not drawn"
        extra = sum((have - bar.frets - bar.tied).values())
        assert bar.harmonics <= extra <= 2 * bar.harmonics, \
            f"{when}, bar {k + 1}: {dict(have - bar.frets)} drawn beyond the file's frets ({bar.harmonics} harmonics)"


def wait_render(page, before: int) -> None:
    page.wait_for_function(f"window.studio.rendered > {before} && window.studio.job === null", timeout=120_000)
    page.wait_for_function("studio.marked === studio.riffs[studio.index].id", timeout=30_000)


def marked(page) -> list[dict]:
    """The bars the page marks as just written, each box checked to lie over its drawn bar."""
    boxes = page.evaluate(MARKED)
    for box in boxes:
        x, y = page.evaluate(BAR_POINT, box["bar"] - 1)
        assert box["left"] <= x <= box["right"] and box["top"] <= y <= box["bottom"], f"mark off bar {box['bar']}"
    return boxes


def long_midi(bars: int) -> bytes:
    """A MIDI file of `bars` bars of eighth notes: a score taller than the page."""
    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    track = symusic.Track(program=29)
    track.notes.extend(symusic.Note(bar * 1920 + i * 240, 240, p + bar % 3, 100) for bar in range(bars)
                       for i, p in enumerate((40, 43, 45, 47, 50, 52, 55, 57)))
    s.tracks.append(track)
    return bytes(s.dumps_midi())


def test_generate_see_hear_regenerate_and_a_broken_upload(server, page, shots, tmp_path):
    meters = page.eval_on_selector_all("#opt-time_signature option", "os => os.map(o => o.value)")
    assert meters[:3] == ["", "auto", "none"] and len(meters) > 3  # the run's choice, drawn, its own, then meters
    seed = long_seed(server)
    page.fill("#opt-seed", str(seed))
    page.fill("#candidates", "2")
    page.click("#generate")
    wait_render(page, 0)
    riff = page.evaluate("studio.riffs[0]")
    assert page.inner_text("#which").startswith("candidate 1 of 2") and riff["seed"] == seed
    assert riff["new_bars"] is None and marked(page) == []  # a riff from nothing: every bar new, none marked

    # the drawn tab holds the file's notes, bar by bar
    bars = file_bars(server, riff["files"]["gp"], tmp_path)
    drawn = drawn_frets(page)
    check_drawn(drawn, bars, "Generate")
    assert len(drawn) >= riff["bars"] and sum(sum(b.frets.values()) for b in bars) > 0
    shoot(page, shots / "studio-generate.png")

    # flip to the second candidate and back
    page.click("#next")
    wait_render(page, page.evaluate("studio.rendered") - 1)
    assert page.inner_text("#which").startswith("candidate 2 of 2")
    before = page.evaluate("studio.rendered")
    page.click("#prev")
    wait_render(page, before)

    # play: the synthesizer reads the bundled SoundFont and the beat cursor moves
    page.wait_for_function("window.studio.playerReady", timeout=60_000)
    x0 = page.evaluate(CURSOR_X)
    page.click("#play")
    page.wait_for_function("(window.studio.position || 0) > 800", timeout=30_000)
    x1 = page.evaluate(CURSOR_X)
    page.click("#stop")
    assert x0 is not None and x1 is not None and x1 > x0, f"the cursor stayed at {x0} -> {x1}"

    # WAV where the server cannot synthesize: the page renders it with alphaTab and the bundled SoundFont
    if not httpx.get(server + "/api/run").json()["server_wav"]:
        with page.expect_download(timeout=120_000) as dl:
            page.click("#download-wav")
        wav = Path(dl.value.path()).read_bytes()
        samples = array("h", wav[44:])
        assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(samples) > 44100  # stereo, over half a second
        assert max(map(abs, samples)) > 1000, "the WAV is silent"

    # drag across bars 2-3 of the tab, Regenerate: the other bars stay as drawn
    start, end = page.evaluate(BAR_POINT, 1), page.evaluate(BAR_POINT, 2)
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(*end, steps=5)
    page.mouse.up()
    assert page.input_value("#bar-first") == "2" and page.input_value("#bar-last") == "3"
    shoot(page, shots / "studio-select.png")
    before_ids, before_rendered = riff["id"], page.evaluate("studio.rendered")
    page.click("#regenerate")
    wait_render(page, before_rendered)
    assert page.is_hidden("#message"), page.inner_text("#message")
    new = page.evaluate("studio.riffs[0]")
    assert new["id"] != before_ids
    after = drawn_frets(page)
    for k in range(len(drawn)):
        if k not in (1, 2) and k < len(after):
            assert after[k] == drawn[k], f"bar {k + 1} changed though only bars 2-3 were regenerated"
    check_drawn(after, file_bars(server, new["files"]["gp"], tmp_path), "Regenerate")
    assert [m["bar"] for m in marked(page)] == [2, 3]  # the regenerated bars are marked over the drawn ones
    shoot(page, shots / "studio-regenerate.png")

    # a broken upload: one message on the page, and the studio goes on
    page.set_input_files("#upload", files=[{"name": "broken.gp5", "mimeType": "application/octet-stream",
                                            "buffer": BROKEN.read_bytes()}])
    page.click("#continue")
    page.wait_for_selector("#message:not([hidden])", timeout=60_000)
    message = page.inner_text("#message")
    assert "broken.gp5" in message and "not a readable Guitar Pro file" in message and "/tmp" not in message, message
    shoot(page, shots / "studio-error.png")
    assert httpx.get(server + "/api/run").status_code == 200

    # nothing came from anywhere but this server
    assert all(u.startswith((server, "data:", "blob:")) for u in page.requests), \
        [u for u in page.requests if not u.startswith((server, "data:", "blob:"))]


def test_a_continuation_opens_at_its_new_bars(page, shots):
    """Continue a 40-bar file: the new bars (41 on) are marked and the first is scrolled into view; bars 2-3
    regenerated from the song's end are marked and shown; a fresh riff after it marks nothing and opens at bar 1."""
    page.fill("#opt-bars", "2")
    page.fill("#candidates", "1")
    page.evaluate("window.scrollTo(0, 0)")
    page.set_input_files("#upload", files=[{"name": "long.mid", "mimeType": "audio/midi", "buffer": long_midi(40)}])
    before = page.evaluate("studio.rendered")
    page.click("#continue")
    wait_render(page, before)
    riff = page.evaluate("studio.riffs[0]")
    first, last = riff["new_bars"]
    assert first == 41 and last == riff["bars"] and page.is_hidden("#message")
    boxes = marked(page)
    assert [m["bar"] for m in boxes] == list(range(first, last + 1))
    height = page.evaluate("window.innerHeight")
    assert 0 <= boxes[0]["top"] and boxes[0]["bottom"] <= height, f"bar {first} at {boxes[0]} is off the page"
    assert page.evaluate("window.scrollY") > 0, "the page did not scroll to the new bars"
    shoot(page, shots / "studio-continue.png")

    # from the song's end, regenerate bars 2-3: the page goes up to them
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.fill("#bar-first", "2")
    page.fill("#bar-last", "3")
    before = page.evaluate("studio.rendered")
    page.click("#regenerate")
    wait_render(page, before)
    boxes = marked(page)
    assert [m["bar"] for m in boxes] == [2, 3] and 0 <= boxes[0]["top"] and boxes[0]["bottom"] <= height

    before = page.evaluate("studio.rendered")
    page.click("#generate")
    wait_render(page, before)
    assert marked(page) == []
    _, y = page.evaluate(BAR_POINT, 0)
    assert 0 <= y <= height, f"bar 1 at y={y}, off the page"


def mix(page, kind: str, track: int) -> dict:
    """Press a track's mute ("M") or solo ("S") toggle; alphaTab's record of it and what its synthesizer was sent."""
    before = page.evaluate("window.synthCalls.length")
    page.click(f"#tracks tr[data-track='{track}'] button:text-is('{kind}')")
    field = {"M": "isMute", "S": "isSolo"}[kind]
    page.wait_for_function(f"window.synthCalls.length > {before}", timeout=10_000)
    return {"pressed": page.get_attribute(f"#tracks tr[data-track='{track}'] button:text-is('{kind}')", "aria-pressed"),
            "alphatab": page.evaluate(f"studio.api.score.tracks.map(t => t.playbackInfo.{field})"),
            "channel": page.evaluate(f"studio.api.score.tracks[{track}].playbackInfo.primaryChannel"),
            "sent": page.evaluate(f"window.synthCalls.slice({before})")}


def test_a_band_file_shows_and_plays_every_part(page, shots, tmp_path):
    """Continue a guitar + bass + drums MIDI: the track list names the three parts, alphaTab draws and plays them
    all (tab and notation for the strings, percussion for the drums), mute and solo reach alphaTab's synthesizer,
    a track can be hidden and shown again, and Regenerate fills the part chosen, the others and the mix kept."""
    page.fill("#opt-bars", "2")
    page.fill("#candidates", "1")
    page.evaluate("window.scrollTo(0, 0)")
    page.set_input_files("#upload", files=[{"name": "band.mid", "mimeType": "audio/midi", "buffer": band_midi(4)}])
    before = page.evaluate("studio.rendered")
    page.click("#continue")
    wait_render(page, before)
    assert page.is_hidden("#message"), page.inner_text("#message")
    rows = page.eval_on_selector_all("#tracks tbody tr", "rs => rs.map(r => Array.from(r.cells).slice(1, 5)"
                                     ".map(c => c.textContent))")
    assert [r[0] for r in rows] == ["Lead guitar ✱", "Bass", "Drums"]
    assert [r[2] for r in rows] == ["standard: E2 A2 D3 G3 B3 E4", "standard bass: E1 A1 D2 G2",
                                    "drum kit (no strings)"]
    assert "(bass)" in rows[1][1] and "(drums)" in rows[2][1] and [r[3] for r in rows[1:]] == ["16", "32"]
    assert page.is_visible("#tracks") and page.is_visible("#part-row")

    # alphaTab holds and draws the three tracks, the drums as percussion, in every staff system
    assert page.evaluate("studio.api.score.tracks.map(t => t.name)") == ["Lead guitar", "Bass", "Drums"]
    assert page.evaluate("studio.api.score.tracks.map(t => t.isPercussion)") == [False, False, True]
    assert page.evaluate("studio.api.tracks.map(t => t.index)") == [0, 1, 2]
    # alphaTab, an independent reader of our GP5, finds every part's notes: as many as the MIDI's part has
    assert page.evaluate(NOTES_PER_TRACK) == page.evaluate("studio.riffs[0].parts.map(p => p.notes)")
    systems = page.evaluate(DRAWN_TRACKS)
    assert systems and all(s == [0, 0, 1, 1, 2] for s in systems), systems
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, shots / "studio-tracks.png")

    # mute the bass, solo the drums and take the solo back: alphaTab's tracks and its synthesizer's channels follow
    bass = mix(page, "M", 1)
    assert bass["pressed"] == "true" and bass["alphatab"] == [False, True, False]
    assert {"cmd": "alphaSynth.setChannelMute", "channel": bass["channel"], "mute": True} in bass["sent"]
    drums = mix(page, "S", 2)
    assert drums["pressed"] == "true" and drums["alphatab"] == [False, False, True]
    assert {"cmd": "alphaSynth.setChannelSolo", "channel": drums["channel"], "solo": True} in drums["sent"]
    shoot(page, shots / "studio-tracks-mix.png")
    drums = mix(page, "S", 2)
    assert drums["pressed"] == "false" and drums["alphatab"] == [False, False, False]
    assert {"cmd": "alphaSynth.setChannelSolo", "channel": drums["channel"], "solo": False} in drums["sent"]

    # it plays: the cursor moves through the three-part score
    page.wait_for_function("window.studio.playerReady", timeout=60_000)
    page.click("#play")
    page.wait_for_function("(window.studio.position || 0) > 800", timeout=30_000)
    page.click("#stop")

    # hide the bass: alphaTab draws the guitar and drums; show it again
    before = page.evaluate("studio.rendered")
    page.uncheck("#tracks tr[data-track='1'] input.show")
    page.wait_for_function(f"studio.rendered > {before}", timeout=30_000)
    assert page.evaluate("studio.api.tracks.map(t => t.index)") == [0, 2]
    assert all(s == [0, 0, 2] for s in page.evaluate(DRAWN_TRACKS))
    before = page.evaluate("studio.rendered")
    page.check("#tracks tr[data-track='1'] input.show")
    page.wait_for_function(f"studio.rendered > {before}", timeout=30_000)
    assert page.evaluate("studio.api.tracks.map(t => t.index)") == [0, 1, 2]

    # Regenerate bars 2-3 of the bass: the answer's edited part is the bass, three tracks drawn, the bass still muted
    drum_choice = page.eval_on_selector("#infill-part option[value='2']", "o => o.disabled")
    assert drum_choice, "drums offered to Regenerate"
    page.select_option("#infill-part", "1")
    page.fill("#bar-first", "2")
    page.fill("#bar-last", "3")
    before = page.evaluate("studio.rendered")
    page.click("#regenerate")
    wait_render(page, before)
    assert page.is_hidden("#message"), page.inner_text("#message")
    riff = page.evaluate("studio.riffs[0]")
    assert riff["edited"] == 1 and riff["regenerated"] == [2, 3] and len(riff["parts"]) == 3
    assert page.evaluate("studio.api.tracks.map(t => t.index)") == [0, 1, 2]
    assert page.evaluate("studio.api.score.tracks.map(t => t.playbackInfo.isMute)") == [False, True, False]
    assert page.inner_text("#tracks tr[data-track='1'] td:nth-child(2)") == "Bass ✱"
    shoot(page, shots / "studio-tracks-regenerate.png")
