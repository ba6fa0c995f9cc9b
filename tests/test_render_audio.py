"""render/audio.py: the preview TensorBoard shows reads (a piano roll with axes at a readable size) and sounds
at normal loudness without trailing silence."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import symusic

from guitarformer.music.score import GuitarScore
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
    from guitarformer.render import soundfont

    assert soundfont.available() and soundfont.BUNDLED_SOUNDFONT.is_file()
    quiet = [p for p in range(128) if np.abs(soundfont.render(one_note(p, 60), RATE)).max() < 0.01]
    assert quiet == []
    quiet = [k for k in range(35, 82) if np.abs(soundfont.render(one_note(0, k, drum=True), RATE)).max() < 0.01]
    assert quiet == []
    assert soundfont.channels([one_note(0, 36, drum=True).tracks[0], one_note(30, 40).tracks[0]]) == [9, 0]


def test_wav_in_process_has_the_riffs_length(tmp_path: Path, monkeypatch):
    from guitarformer.render.audio import find_synth, render_wav

    monkeypatch.setenv("PATH", str(tmp_path))  # no fluidsynth: the in-process synthesizer needs none
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
