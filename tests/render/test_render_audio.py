"""render/audio.py: the preview TensorBoard shows reads (a piano roll with axes at a readable size) and sounds
at normal loudness without trailing silence; render/sf2.py and render/soundfont.py: the SoundFont renderer plays
notes at their pitch (bent where the MIDI bends them), kits on channel 10, loops while a key is down, and a bad
soundfont is one clear error."""

from __future__ import annotations

import struct
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import symusic

from guitarformer.errors import GuitarformerError
from guitarformer.music.score import GuitarScore
from guitarformer.render import soundfont
from guitarformer.render.audio import finish_wav, normalize_loudness, trim_silence, write_wav
from guitarformer.render.media import piano_roll_image, render_media

RATE = 16000


def two_bar_riff() -> GuitarScore:
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 120))
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=29)
    for i in range(8):
        tr.notes.append(symusic.Note(i * 480, 400, 40 + 3 * i, 100))
    s.tracks.append(tr)
    return GuitarScore(score=s)


def dbfs(x: np.ndarray) -> float:
    return 20 * np.log10(np.sqrt(np.mean(np.square(x))))


def test_preview_is_at_normal_loudness_and_ends_with_the_music():
    media = render_media(two_bar_riff())
    audio = media["audio"]
    assert audio.shape[0] == 1 and audio.dtype == np.float32
    assert abs(dbfs(audio) - (-16.0)) < 0.5 and np.abs(audio).max() <= 10 ** (-1 / 20) + 1e-6
    # 8 beats at 120 bpm = 4 s of notes; no more than the 0.5 s tail after them (pretty_midi adds ~1 s)
    assert 3.9 < audio.shape[1] / RATE <= 4.0 + 0.5 + 0.05


def test_trim_keeps_the_sound_and_drops_the_silence():
    tone = 0.3 * np.sin(np.linspace(0, 2 * np.pi * 440, RATE)).astype(np.float32)
    x = np.concatenate([tone, np.zeros(7 * RATE, np.float32)])
    out = trim_silence(x, RATE)
    assert abs(len(out) - (RATE + RATE // 2)) <= 2  # the tone ends within a sample of its last zero crossing
    assert np.array_equal(out[: RATE // 2], x[: RATE // 2]) and out[-1] == 0.0
    assert trim_silence(np.zeros(100, np.float32), RATE).size == 0  # nothing but silence: nothing left
    assert np.array_equal(normalize_loudness(np.zeros(10, np.float32)), np.zeros(10, np.float32))


def test_piano_roll_is_a_readable_picture():
    img = piano_roll_image(two_bar_riff())
    assert img.dtype == np.uint8 and img.ndim == 2
    h, w = img.shape
    assert h >= 240 and w >= 480  # was 72 x 189 with no axes
    assert (img < 60).mean() > 0.005  # notes, axes and labels drawn in dark ink on white
    assert np.median(img) > 240


def test_finish_wav_rewrites_a_quiet_file_with_a_long_tail(tmp_path: Path):
    t = np.arange(RATE) / RATE
    quiet = np.stack([0.05 * np.sin(2 * np.pi * 220 * t)] * 2)
    x = np.concatenate([quiet, np.zeros((2, 5 * RATE))], axis=1)
    wav = tmp_path / "a.wav"
    write_wav(wav, x, RATE)
    finish_wav(wav)
    with wave.open(str(wav)) as w:
        assert w.getnchannels() == 2 and w.getframerate() == RATE
        n = w.getnframes()
        y = np.frombuffer(w.readframes(n), "<i2").astype(np.float32) / 32768
    assert abs(n - (RATE + RATE // 2)) <= 2
    assert abs(dbfs(y) - (-16.0)) < 0.2 and dbfs(y) - dbfs(x) > 10  # was -29 dBFS RMS over its 6 s


def one_note(program: int, pitch: int, drum: bool = False) -> symusic.Score:
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 120))
    tr = symusic.Track(program=program, is_drum=drum)
    tr.notes.append(symusic.Note(0, 480, pitch, 100))
    s.tracks.append(tr)
    return s


def test_every_program_and_every_kit_piece_sounds_from_the_bundled_soundfont():
    """In process, with the soundfont the package ships: all 128 GM programs and the GM kit (channel 10)."""
    assert soundfont.available() and soundfont.BUNDLED_SOUNDFONT.is_file()
    quiet = [p for p in range(128) if np.abs(soundfont.render(one_note(p, 60), RATE)).max() < 0.01]
    assert quiet == []
    quiet = [k for k in range(35, 82) if np.abs(soundfont.render(one_note(0, k, drum=True), RATE)).max() < 0.01]
    assert quiet == []
    assert soundfont.channels([one_note(0, 36, drum=True).tracks[0], one_note(30, 40).tracks[0]]) == [9, 0]


def test_wav_in_process_has_the_riffs_length(tmp_path: Path, monkeypatch):
    from guitarformer.render.audio import find_synth, render_wav

    monkeypatch.setenv("PATH", str(tmp_path))  # no fluidsynth: the in-process synthesizer needs none
    monkeypatch.setitem(sys.modules, "tinysoundfont", None)  # nor TinySoundFont (importing it now fails)
    synth = find_synth()
    assert synth.program is None
    midi, wav = tmp_path / "a.mid", tmp_path / "a.wav"
    two_bar_riff().score.dump_midi(str(midi))
    render_wav(midi, wav, synth)
    with wave.open(str(wav)) as w:
        n, rate = w.getnframes(), w.getframerate()
        y = np.frombuffer(w.readframes(n), "<i2").astype(np.float32) / 32768
    assert 3.8 < n / rate <= 4.0 + 2.0 + 0.5  # 8 beats at 120 bpm; at most the release and the tail after them
    assert abs(dbfs(y) - (-16.0)) < 0.5


def peak_hz(audio: np.ndarray, rate: int, start: float = 0.05, end: float = 0.45) -> float:
    """The strongest frequency of a stretch of (2, N) audio (Hann window, zero-padded to a fine bin)."""
    x = audio.mean(axis=0)[int(start * rate):int(end * rate)]
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size), 16 * x.size))
    return float(np.fft.rfftfreq(16 * x.size, 1 / rate)[spectrum.argmax()])


def test_a_note_sounds_at_its_pitch():
    """A3 on the nylon guitar (program 24) of the bundled SF3: its strongest partial within a few Hz of 220."""
    assert abs(peak_hz(soundfont.render(one_note(24, 57), 44100), 44100) - 220.0) < 3.0
    assert abs(peak_hz(soundfont.render(one_note(24, 64), 22050), 22050) - 329.63) < 4.0  # E4, at 22.05 kHz


def test_pitch_bend_moves_the_note_by_the_range_rpn_sets():
    """+4096 of 8192 with the bend range at 4 semitones (RPN 0, as render/midi.py writes it): two semitones up."""
    s = one_note(24, 57)
    tr = s.tracks[0]
    for number, value in ((101, 0), (100, 0), (6, 4), (38, 0), (101, 127), (100, 127)):
        tr.controls.append(symusic.ControlChange(0, number, value))
    tr.pitch_bends.append(symusic.PitchBend(0, 4096))
    assert abs(peak_hz(soundfont.render(s, 44100), 44100) - 246.94) < 4.0  # B3


def test_a_drum_track_plays_the_kit_on_channel_10():
    kick = soundfont.render(one_note(0, 36, drum=True), RATE)
    piano = soundfont.render(one_note(0, 36), RATE)
    assert np.abs(kick).max() > 0.05
    n = min(kick.shape[1], piano.shape[1])
    assert np.corrcoef(kick[0, :n], piano[0, :n])[0, 1] < 0.5  # the kit's bass drum, not the piano's C2


def test_a_closed_hi_hat_chokes_the_open_one_still_ringing():
    """GM kit pieces 42 and 46 share an exclusive class: once the closed hat sounds, the open one stops."""
    def kit(*hits):
        s = symusic.Score(480)
        s.tempos.append(symusic.Tempo(0, 120))
        tr = symusic.Track(is_drum=True)
        tr.notes.extend(symusic.Note(t, 60, key, 100) for t, key in hits)
        s.tracks.append(tr)
        return s

    open_hat = soundfont.render(kit((0, 46)), RATE)
    both = soundfont.render(kit((0, 46), (240, 42)), RATE)  # the closed hat a quarter of a second in
    closed = soundfont.render(kit((240, 42)), RATE)
    later = slice(int(0.3 * RATE), None)
    assert np.abs(open_hat[:, later]).max() > 0.01  # left alone, the open hat rings on
    assert np.abs(both[:, later] - closed[:, later]).max() < 1e-4


def tiny_sf2(path: Path, pgens: tuple = (), igens: tuple = (), mode: int = 1, pitch: int = 57) -> Path:
    """A one-preset SF2 written from the format: a 16-bit sine of 220.5 Hz at 22050 Hz (100 frames a period),
    looped over whole periods, recorded at `pitch`; `pgens`/`igens`: extra (generator, amount) pairs."""
    rate, n = 22050, 22050
    pcm = (0.5 * np.sin(2 * np.pi * np.arange(n) / 100) * 32767).astype("<i2").tobytes() + bytes(92)

    def chunk(cid: bytes, body: bytes) -> bytes:
        return cid + struct.pack("<I", len(body)) + body + b"\0" * (len(body) & 1)

    def gens(pairs, link_oper: int) -> bytes:
        return b"".join(struct.pack("<Hh", g, v) for g, v in pairs) + struct.pack("<HH", link_oper, 0)

    igen = gens((*igens, (54, mode)), 53) + bytes(4)
    pgen = gens(pgens, 41) + bytes(4)
    ni, np_ = len(igens) + 2, len(pgens) + 1
    shdr = (struct.pack("<20sIIIIIBbHH", b"sine", 0, n, 1000, 6000, rate, pitch, 0, 0, 1)
            + struct.pack("<20sIIIIIBbHH", b"EOS", 0, 0, 0, 0, 0, 0, 0, 0, 0))
    pdta = b"".join([
        chunk(b"phdr", struct.pack("<20sHHHIII", b"sine", 0, 0, 0, 0, 0, 0)
              + struct.pack("<20sHHHIII", b"EOP", 0, 0, 1, 0, 0, 0)),
        chunk(b"pbag", struct.pack("<HHHH", 0, 0, np_, 0)), chunk(b"pmod", bytes(10)), chunk(b"pgen", pgen),
        chunk(b"inst", struct.pack("<20sH20sH", b"sine", 0, b"EOI", 1)),
        chunk(b"ibag", struct.pack("<HHHH", 0, 0, ni, 0)), chunk(b"imod", bytes(10)), chunk(b"igen", igen),
        chunk(b"shdr", shdr)])
    body = (b"sfbk" + chunk(b"LIST", b"INFO" + chunk(b"ifil", struct.pack("<HH", 2, 4)))
            + chunk(b"LIST", b"sdta" + chunk(b"smpl", pcm)) + chunk(b"LIST", b"pdta" + pdta))
    path.write_bytes(chunk(b"RIFF", body))
    return path


def test_an_sf2_of_16_bit_samples_plays_its_zones_generators(tmp_path: Path):
    """SF2 (PCM) as well as SF3: the root key, a preset's coarse tune added to the instrument's, pan, and a loop
    that holds the note while the key is down (the sample itself lasts a second)."""
    plain = tiny_sf2(tmp_path / "a.sf2")
    assert abs(peak_hz(soundfont.render(one_note(0, 69), 44100, plain), 44100) - 441.0) < 3.0  # an octave up
    tuned = tiny_sf2(tmp_path / "b.sf2", pgens=((51, 7),), igens=((51, 5),))  # +7 on the preset, +5 below it
    assert abs(peak_hz(soundfont.render(one_note(0, 57), 44100, tuned), 44100) - 441.0) < 3.0
    left = soundfont.render(one_note(0, 57), RATE, tiny_sf2(tmp_path / "c.sf2", igens=((17, -500),)))
    assert np.abs(left[0]).max() > 0.1 and np.abs(left[1]).max() < 1e-3
    long = one_note(0, 57)
    long.tracks[0].notes[0].duration = 480 * 6  # three seconds held: the loop carries it past the sample's end
    held = soundfont.render(long, RATE, plain)
    assert np.abs(held[:, int(2.8 * RATE):int(2.9 * RATE)]).max() > 0.1
    once = soundfont.render(long, RATE, tiny_sf2(tmp_path / "d.sf2", mode=0))  # no loop: silent once it ends
    assert np.abs(once[:, int(1.1 * RATE):]).max() == 0.0


@pytest.mark.parametrize("damage", ["missing", "not riff", "cut short", "no hydra", "bad sample"])
def test_a_missing_or_garbled_soundfont_is_one_clear_error(tmp_path: Path, damage):
    good = soundfont.BUNDLED_SOUNDFONT.read_bytes()
    path = tmp_path / "font.sf3"
    if damage == "not riff":
        path.write_bytes(b"this is not a soundfont at all" * 10)
    elif damage == "cut short":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "no hydra":
        path.write_bytes(good.replace(b"shdr", b"xxxx"))
    elif damage == "bad sample":  # every Ogg stream's first page garbled
        path.write_bytes(good.replace(b"OggS", b"Ogg?"))
    with pytest.raises(GuitarformerError) as e:
        soundfont.render(one_note(24, 57), RATE, path)
    assert str(path) in e.value.problem and "GUITARFORMER_SOUNDFONT" in e.value.fix
