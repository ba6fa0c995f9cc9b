"""Built-in corpus, tokenization, prepare (manifest, splits, cache, duplicates) and training windows."""

import json

import numpy as np
import pytest
import symusic
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.config import DataConfig
from guitarformer.data.dataset import DecoderWindows, PairLayout, PitchShifter, Seq2SeqPairs, TokenSplit
from guitarformer.data.prepare import VAL_MIN_PIECES, PrepareOptions, assign_splits, load_meta, prepare, split_of
from guitarformer.vocab.tokenization import bar_ids, build_tokenizer, decode, encode, load_tokenizer
from guitarformer.errors import GuitarformerError


def _riff(path, pitches=(52, 55, 57, 59, 62, 64), program=25):
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 100))
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=program)
    for bar in range(4):
        for i, p in enumerate(pitches):
            tr.notes.append(symusic.Note(bar * 1920 + i * 240, 240, p + bar, 90))
    s.tracks.append(tr)
    s.dump_midi(str(path))
    return path


def test_builtin_corpus_is_guitar_midi(tiny_dataset, cache_root):
    meta = load_meta(tiny_dataset)
    assert meta["status"]["ok"] >= 6
    assert meta["vocab_size"] > 100
    corpus = json.loads(next((cache_root / "corpus").glob("*/corpus.json")).read_text())
    assert corpus["tunes"] >= 8
    midis = sorted((cache_root / "corpus").glob("*/midi/*.mid"))
    s = symusic.Score(str(midis[0]))
    assert len(s.tracks) == 1 and s.tracks[0].program == 25
    pitches = [n.pitch for n in s.tracks[0].notes]
    assert min(pitches) >= 40 and max(pitches) <= 86  # E2 .. D6


def test_corpus_tunes_sound_an_octave_below_written_in_open_position():
    """A fiddle tune becomes a guitar part the way a guitarist reads it: the written notes, sounding an octave
    lower (guitar notation is written 8va), so the tab sits in open position rather than at frets 7-19."""
    from music21 import converter

    from guitarformer.data.corpus import tune_to_score
    from guitarformer.fingering import fret

    abc = "X:1\nT:Reel\nM:4/4\nL:1/8\nK:D\nDEFG ABcd|efga b2a2|g2fe dcBA|G2E2 D4|\n"
    tune = converter.parse(abc, format="abc")
    written = [p.midi for n in tune.flatten().notes for p in n.pitches]
    score, reason = tune_to_score(tune)
    assert reason is None
    sounding = [n.pitch for n in score.tracks[0].notes]
    assert sounding == [p - 12 for p in written]  # D4..B5 written -> D3..B4 sounding
    frets = sorted(f for _, f in fret(score.tracks[0].notes))
    assert frets[-1] <= 7 and frets[len(frets) // 2] <= 3  # first position: what a flatpicker plays
    # a written line too low for that octave keeps its written pitch instead of leaving the neck
    low = converter.parse("X:1\nT:Low\nM:4/4\nL:1/4\nK:C\nE,G,CE|\n", format="abc")
    assert [n.pitch for n in tune_to_score(low)[0].tracks[0].notes] == [40, 43, 48, 52]


def test_encode_decode_roundtrip(tmp_path):
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))  # a bare symusic Score: pitch-only tokens
    s = symusic.Score(str(_riff(tmp_path / "r.mid")))
    ids = encode(tok, s)
    assert ids[0] == tok["BOS_None"] and ids[-1] == tok["EOS_None"]
    back = decode(tok, ids)
    assert [n.pitch for n in back.tracks[0].notes] == [n.pitch for n in s.tracks[0].notes]
    assert back.tracks[0].program == 25
    # garbage ids decode leniently instead of crashing
    junk = decode(tok, [5, 5, 5, 9999, -3, ids[3]])
    assert isinstance(junk, symusic.Score)


@pytest.mark.parametrize("name", ["TSD", "MIDILike", "Structured"])
def test_other_tokenizers(tmp_path, name):
    tok = build_tokenizer(DataConfig(tokenizer=name))
    s = symusic.Score(str(_riff(tmp_path / "r.mid")))
    back = decode(tok, encode(tok, s))
    assert len(back.tracks[0].notes) == len(s.tracks[0].notes)
    tok.save(tmp_path / "t.json")
    assert type(load_tokenizer(tmp_path / "t.json")) is type(tok)


def test_prepare_manifest_splits_duplicates_and_cache(tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for i in range(12):
        _riff(src / f"r{i}.mid", pitches=(50 + i, 53 + i, 57, 60))
    (src / "sub" / "copy.mid").write_bytes((src / "r0.mid").read_bytes())
    (src / "broken.mid").write_bytes(b"MThd\x00\x00\x00\x06garbage")
    (src / "notes.pdf").write_bytes(b"%PDF")
    out = tmp_path / "ds"
    meta = prepare([src], out, options=PrepareOptions(workers=2, progress=False))
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(lines) == 15  # every file accounted for
    by = {lines_["path"].split("/")[-1]: lines_ for lines_ in lines}
    assert by["copy.mid"]["status"] == "skipped" and "duplicate" in by["copy.mid"]["reason"]
    assert by["broken.mid"]["status"] == "failed" and by["broken.mid"]["reason"]
    assert by["notes.pdf"]["status"] == "skipped" and "unsupported" in by["notes.pdf"]["reason"]
    ok = [d for d in lines if d["status"] == "ok"]
    splits = assign_splits(d["piece"] for d in ok)
    assert len(ok) == 12 and all(d["split"] == splits[d["piece"]] for d in ok)  # by the music, not the bytes
    assert sum(d["split"] == "val" for d in ok) >= 2  # 12 pieces: val holds one in five at least
    assert sum(d["n_tokens"] for d in ok) == sum(meta["tokens"].values())
    for k in ("path", "sha256", "format", "status", "reason", "tracks", "n_tokens", "split", "piece"):
        assert k in lines[0]
    # arrays: sequences are BOS ... EOS
    tok = load_tokenizer(out / "tokenizer.json")
    tr = TokenSplit(out, "train")
    seq = tr.sequence(0)
    assert seq[0] == tok["BOS_None"] and seq[-1] == tok["EOS_None"]
    # a re-run reuses cached work and gives identical arrays
    before = (out / "train.bin").read_bytes()
    meta2 = prepare([src], out, options=PrepareOptions(workers=1, progress=False))
    assert (out / "train.bin").read_bytes() == before and meta2["tokens"] == meta["tokens"]


def test_cache_is_not_reused_by_other_reader_code(tmp_path, monkeypatch):
    """The per-file cache is keyed by the reader code too: different reader code (an upgrade) reads every file
    again instead of reusing tokens made by the old one."""
    from guitarformer.data import prepare as prep

    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        _riff(src / f"r{i}.mid", pitches=(50 + i, 53 + i, 57, 60))
    out = tmp_path / "ds"
    prepare([src], out, options=PrepareOptions(workers=1, progress=False))
    first = set((out / "cache").glob("*.json"))
    prepare([src], out, options=PrepareOptions(workers=1, progress=False))
    assert set((out / "cache").glob("*.json")) == first  # same code: every file from the cache
    monkeypatch.setattr(prep, "reader_hash", lambda: "other reader code")
    prepare([src], out, options=PrepareOptions(workers=1, progress=False))
    assert len(set((out / "cache").glob("*.json")) - first) == 3  # each file read again under a new key


def test_split_is_stable_when_files_are_added():
    import hashlib

    shas = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)]
    assert [split_of(s) for s in shas] == [split_of(s) for s in shas]
    val = sum(split_of(s) == "val" for s in shas) / len(shas)
    assert 0.03 < val < 0.07


def test_a_small_datasets_val_split_holds_enough_pieces():
    """The hash gives 18 pieces about one val piece, too few to judge a run: train pieces move to val until it has
    VAL_MIN_PIECES, the same ones every time; 8 pieces, and a large set, keep the hash's split."""
    import hashlib

    shas = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)]
    few = [s for s in shas if split_of(s) != "val"][:18]
    splits = assign_splits(few)
    assert sum(v == "val" for v in splits.values()) == VAL_MIN_PIECES
    assert sum(v == "train" for v in splits.values()) == sum(split_of(s) == "train" for s in few) - VAL_MIN_PIECES
    assert all(splits[s] == split_of(s) for s in few if split_of(s) == "test")
    assert assign_splits(reversed(few)) == splits
    assert assign_splits(few[:8]) == {s: split_of(s) for s in few[:8]}
    assert assign_splits(shas) == {s: split_of(s) for s in shas}


def test_incomplete_dataset_is_refused(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(GuitarformerError, match="incomplete"):
        load_meta(tmp_path / "half")
    with pytest.raises(GuitarformerError, match="does not exist"):
        load_meta(tmp_path / "nothing")
    with pytest.raises(GuitarformerError, match="does not exist"):
        prepare([tmp_path / "missing"], tmp_path / "o", options=PrepareOptions(progress=False))


def test_decoder_windows(tiny_dataset):
    split = TokenSplit(tiny_dataset, "train")
    w = DecoderWindows(split, 32)
    g = torch.Generator().manual_seed(0)
    x, y = w.batch(5, g)
    assert x.shape == y.shape == (5, 32)
    assert torch.equal(x[:, 1:], y[:, :-1])
    batches = list(w.eval_batches(4))
    n_targets = sum((yb != IGNORE_INDEX).sum().item() for _, yb in batches)
    assert n_targets == len(split) - 1  # eval covers every next-token prediction once


def test_transposition_stays_on_the_neck(tiny_dataset):
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    sh = PitchShifter(tok, 12)
    split = TokenSplit(tiny_dataset, "train")
    g = torch.Generator().manual_seed(1)
    w = np.asarray(split.tokens[:400], dtype=np.int64)
    moved = 0
    for _ in range(20):
        out = sh(w, g)
        p = sh.pitch_of[out]
        p = p[p >= 0]
        assert p.min() >= 40 and p.max() <= 88
        rest = lambda t: t[(sh.pitch_of[t] < 0) & (sh.string_of[t] == 0)]  # noqa: E731
        assert np.array_equal(rest(out), rest(w))  # only pitches move (and tab layout 3's Strings with them)
        moved += int(not np.array_equal(out, w))
    assert moved > 0


def test_seq2seq_pairs_split_at_bars(tiny_dataset):
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    split = TokenSplit(tiny_dataset, "train")
    bars = bar_ids(tok)
    pairs = Seq2SeqPairs(split, PairLayout(24, 40, bars, tok["BOS_None"], tok.pad_token_id))
    src, mask, tgt, y = pairs.batch(6, torch.Generator().manual_seed(0))
    assert src.shape == mask.shape == (6, 24) and tgt.shape == y.shape == (6, 40)
    assert all(int(y[i, 0]) in bars for i in range(6))  # the target starts at a bar line
    assert (tgt[:, 0] == tok["BOS_None"]).all()
    valid = y[:, :-1] != IGNORE_INDEX
    assert torch.equal(tgt[:, 1:][valid], y[:, :-1][valid])  # teacher forcing: shifted by one
    assert mask.any(1).all()


def test_seq2seq_training_pairs_include_each_pieces_start_from_an_empty_source(tiny_dataset):
    """Sampling an encoder-decoder without a prompt gives it a BOS-only source: training must show it that case
    (each piece's first bars), while eval keeps to bar-to-bar pairs so its numbers stay comparable."""
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    split = TokenSplit(tiny_dataset, "train")
    bars, bos = bar_ids(tok), tok["BOS_None"]
    pairs = Seq2SeqPairs(split, PairLayout(24, 40, bars, bos, tok.pad_token_id))
    assert len(pairs.first_bars) == split.num_sequences
    n = len(pairs.cut_points)
    src, mask, tgt, y = pairs._stack([pairs._pair(n + i, None) for i in range(len(pairs.first_bars))])
    assert (mask.sum(1) == 1).all() and (src[:, 0] == bos).all()  # the source is the BOS alone
    assert all(int(y[i, 0]) in bars for i in range(len(y)))  # the target is the piece from its first bar
    first = split.sequence(0).tolist()
    assert y[0][y[0] != IGNORE_INDEX].tolist() == first[1: 1 + 40]
    gen = torch.Generator().manual_seed(0)
    drawn = sum(int(m.sum(1).eq(1).sum()) for m in (pairs.batch(64, gen)[1] for _ in range(20)))
    assert drawn > 0  # training batches draw them ...
    for _, m, _, _ in pairs.eval_batches(8):  # ... eval batches never do (every source there is a whole bar or more)
        assert (m.sum(1) > 1).all()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["BPE", "Unigram"])
def test_bpe_training_compresses_and_decodes(tmp_path, tiny_dataset, model):
    """data.bpe_vocab_size with either of miditok's subword models (data.bpe_model): fewer tokens, the same notes."""
    from guitarformer.vocab.tokenization import decode

    midi = sorted(tiny_dataset.parent.parent.glob("corpus/*/midi"))[0]
    base = prepare([midi], tmp_path / "base", DataConfig(), options=PrepareOptions(workers=1, progress=False))
    bpe = prepare([midi], tmp_path / "bpe", DataConfig(bpe_vocab_size=500, bpe_model=model),
                  options=PrepareOptions(workers=1, progress=False))
    assert bpe["vocab_size"] == 500
    assert sum(bpe["tokens"].values()) < 0.7 * sum(base["tokens"].values())
    tok = load_tokenizer(tmp_path / "bpe" / "tokenizer.json")
    assert tok.is_trained
    a, b = TokenSplit(tmp_path / "base", "train"), TokenSplit(tmp_path / "bpe", "train")
    base_tok = load_tokenizer(tmp_path / "base" / "tokenizer.json")
    notes_a = [(n.time, n.pitch) for n in decode(base_tok, a.sequence(0).tolist()).tracks[0].notes]
    notes_b = [(n.time, n.pitch) for n in decode(tok, b.sequence(0).tolist()).tracks[0].notes]
    assert notes_a == notes_b and notes_a


def test_builtin_dataset_is_prepared_again_by_other_reader_code(monkeypatch):
    from guitarformer.config import DataConfig
    from guitarformer.data import corpus
    from guitarformer.data.corpus import builtin_dataset_name

    cfg = DataConfig()
    name = builtin_dataset_name(cfg)
    assert name == builtin_dataset_name(cfg) and name.startswith("builtin-tabremi-")  # the default tokens
    monkeypatch.setattr(corpus, "reader_hash", lambda: "other reader code")
    assert builtin_dataset_name(cfg) != name


def test_prepare_reasons_say_what_each_file_is(tmp_path):
    """Empty files are empty (not duplicates of one another), binaries named .txt are binaries (not chord sheets),
    unsupported types list the types we read, and no reason carries an exception's class name."""
    from guitarformer.readers import FORMATS

    src = tmp_path / "in"
    src.mkdir()
    _riff(src / "ok.mid")
    for name in ("empty.mid", "empty.gp5", "empty.txt"):
        (src / name).write_bytes(b"")
    (src / "prog.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    (src / "nul.abc").write_bytes(b"X:1\nT:x\0\0\0\nK:G\n")
    (src / "accents.txt").write_bytes("Tárrega: Lágrima\nno tab here, just words\n".encode("latin-1"))
    (src / "notes.foo").write_text("hi")
    (tmp_path / "single.jams").write_text("{}")
    prepare([src, tmp_path / "single.jams"], tmp_path / "ds", options=PrepareOptions(workers=1, progress=False))
    by = {}
    for line in (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines():
        d = json.loads(line)
        by[d["path"].rsplit("/", 1)[-1]] = d
    for name in ("empty.mid", "empty.gp5", "empty.txt"):
        assert (by[name]["status"], by[name]["reason"]) == ("skipped", "empty file (0 bytes)"), by[name]
    assert by["prog.txt"]["reason"] == "binary file, not text (an ELF executable)"
    assert by["nul.abc"]["reason"] == "binary file, not text"
    assert "binary" not in by["accents.txt"]["reason"]  # 8-bit text is text
    for name in ("notes.foo", "single.jams"):
        reason = by[name]["reason"]
        assert reason.startswith("unsupported file type .") and all(f"{s} " in reason or f"{s})" in reason
                                                                    for s in FORMATS), reason
    assert by["ok.mid"]["status"] == "ok"
    assert not any((d["reason"] or "").startswith(("SkipFile", "GuitarformerError")) for d in by.values())


def test_info_on_a_folder_of_music_suggests_a_dataset_folder_of_its_own(tmp_path):
    from click.testing import CliRunner

    from guitarformer.cli import main

    raw = tmp_path / "my-tabs"
    raw.mkdir()
    _riff(raw / "a.mid")
    r = CliRunner().invoke(main, ["info", str(raw)])
    assert r.exit_code == 2
    assert "not a prepared dataset" in r.stderr and "--out data/prepared/my-tabs" in r.stderr
    assert f"--out {raw}" not in r.stderr  # never into the user's own folder
    with pytest.raises(GuitarformerError, match="data/prepared/a"):
        load_meta(raw / "a.mid")


@pytest.mark.slow
def test_every_type_the_unsupported_message_lists_is_read(shared_guitar):
    """The list comes from the readers' own table: each suffix in it reads real files (Guitar Pro 6-8 too)."""
    from guitarformer.data.prepare import readable_types
    from guitarformer.errors import SkipFile
    from guitarformer.readers import FORMATS, read_guitar

    listed = readable_types()
    assert ".gp " in listed or ".gp)" in listed
    failures = []
    for suffix in FORMATS:
        files = sorted(shared_guitar.rglob(f"*{suffix}"))[:20]
        read = 0
        for f in files:
            try:
                read += bool(read_guitar(f, tracks="all"))
            except SkipFile as e:
                assert "not supported" not in str(e) and "unsupported" not in str(e), (f, e)
            except (ValueError, TimeoutError) as e:  # a damaged file: the suffix is still one we read
                failures.append((f.relative_to(shared_guitar), f"{type(e).__name__}: {e}"))
        assert read or not files, suffix
    for path, reason in failures:  # every failure is reported, and each names its file (the readers' contract)
        print(f"  failed: {path}: {reason[:160]}")
        assert path.name in reason, (path, reason)
    # A damaged file is the exception among real ones: a reader that fails on most of a type fails the test.
    assert len(failures) <= 10, failures


def test_bad_prepare_arguments_leave_an_existing_dataset_alone(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _riff(src / "a.mid")
    out = tmp_path / "ds"
    prepare([src], out, options=PrepareOptions(workers=1, progress=False))
    with pytest.raises(GuitarformerError, match="does not exist"):
        prepare([tmp_path / "typo"], out, options=PrepareOptions(workers=1, progress=False))
    with pytest.raises(GuitarformerError, match="base vocabulary"):
        prepare([src], out, DataConfig(bpe_vocab_size=5), options=PrepareOptions(workers=1, progress=False))
    assert load_meta(out)["status"]["ok"] == 1  # still a complete dataset


def test_prepare_refuses_to_replace_a_dataset_of_other_token_settings(tmp_path):
    """prepare --tokenizer TSD --out EXISTING_REMI_DATASET used to replace it silently (its runs then failed)."""
    from click.testing import CliRunner

    from guitarformer.cli import main

    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        _riff(src / f"r{i}.mid", pitches=(50 + i, 53 + i, 57, 60))
    out = tmp_path / "ds"
    prepare([src], out, DataConfig(), options=PrepareOptions(workers=1, progress=False))
    prepare([src], out, DataConfig(), PrepareOptions(workers=1, progress=False))  # same settings: an update, allowed
    before = (out / "meta.json").read_text()
    r = CliRunner().invoke(main, ["prepare", str(src), "--out", str(out), "--tokenizer", "TSD", "--workers", "1"])
    assert r.exit_code == 2 and "--force" in r.output and "tokenizer TabREMI -> TSD" in r.output, r.output
    assert (out / "meta.json").read_text() == before and load_meta(out)["tokenizer"] == "TabREMI"
    r = CliRunner().invoke(main, ["prepare", str(src), "--out", str(out), "--tokenizer", "TSD", "--workers", "1",
                                  "--force"])
    assert r.exit_code == 0, r.output
    assert load_meta(out)["tokenizer"] == "TSD"
