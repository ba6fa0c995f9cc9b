"""The miditok adapter: the private attributes it wraps still mean what it assumes (a miditok upgrade that
changes them fails here, by name, instead of silently breaking sampling or BPE)."""

from __future__ import annotations

import pytest

from guitarformer.config import DataConfig
from guitarformer.vocab.tokenization import (
    bpe_encode_pretokenized,
    build_tokenizer,
    duration_ticks,
    ids_to_bpe_text,
    ticks_per_beat,
)


@pytest.mark.parametrize("name", ["REMI", "TSD", "MIDILike", "Structured"])
def test_tick_tables(name):
    tok = build_tokenizer(DataConfig(tokenizer=name))
    assert hasattr(tok, "_tpb_per_ts") and hasattr(tok, "_tpb_tokens_to_ticks"), "miditok renamed its tick tables"
    tpb = ticks_per_beat(tok)
    assert all(isinstance(k, int) and isinstance(v, int) and v >= 0 for k, v in tpb.items())
    assert tpb[4] > 0 and tpb[2] == 2 * tpb[4]  # a half-note beat has twice the ticks of a quarter-note beat
    table = duration_ticks(tok, tpb[4])
    # a quarter note is "1.0.<res>" at tpb[4] ticks: the "beats.subdivision.resolution" value format
    quarter = [v for k, v in table.items() if k.startswith("1.0.")]
    assert quarter == [tpb[4]]
    dur_values = [t.split("_", 1)[1] for t in tok.vocab if t.startswith(("Duration_", "TimeShift_"))]
    # every non-zero value has its ticks (Structured's TimeShift_0.0.1, "no time passes", is not in the table)
    assert dur_values and all(v in table for v in dur_values if v != "0.0.1")


def test_bpe_internals_round_trip():
    tok = build_tokenizer(DataConfig())
    assert hasattr(tok, "_ids_to_bytes"), "miditok renamed _ids_to_bytes"
    bar = tok["Bar_None"]
    pos = [i for t, i in tok.vocab.items() if t.startswith("Position_")][:4]
    pitch = [i for t, i in tok.vocab.items() if t.startswith("Pitch_")][:6]
    seqs = [[bar, pos[k % 4], pitch[k % 6], pitch[(k + 1) % 6]] * 3 for k in range(40)]
    text = ids_to_bpe_text(tok, seqs[0])
    assert isinstance(text, str) and len(text) == len(seqs[0])  # one character per base token
    tok.train(vocab_size=len(tok) + 8, model="BPE", iterator=[[ids_to_bpe_text(tok, s)] for s in seqs])
    assert hasattr(tok, "_model") and tok._model is not None, "miditok moved its BPE model"
    (ids,) = bpe_encode_pretokenized(tok, [[ids_to_bpe_text(tok, seqs[0])]])
    assert 0 < len(ids) < len(seqs[0])  # merged
    assert all(0 <= i < len(tok) for i in ids)
