"""Nats per note per style on a split: how well a run models each source of a corpus with styles (the built-in
one: rock, classical and the fiddle tunes' types), where the plain val number mixes them by their token counts."""

from __future__ import annotations

import torch

from guitarformer.data.dataset import TokenSplit, note_ids

STYLE_PREFIX = "CtrlStyle_"
HEAD = 8  # a piece's style token sits among its first tokens (BOS, then the piece controls)


@torch.no_grad()
def nats_per_note_by_style(model, tokenizer, split: TokenSplit, block_size: int, device) -> dict[str, tuple[float, int]]:
    """{style: (nats per note, notes)} over the split's pieces, each read alone in consecutive windows of
    `block_size`: every token scored but the control tokens (which a run reads and is not asked to write), summed
    over the notes among the targets (a decoder's forward). A piece without a style counts under "(none)". Empty
    for a vocabulary whose notes cannot be counted (BPE)."""
    notes = note_ids(tokenizer)
    if notes is None or len(split) < 2:
        return {}
    vocab = tokenizer.vocab
    ctrl = torch.tensor(sorted(i for t, i in vocab.items() if t.startswith("Ctrl")), dtype=torch.long)
    styles = {i: t[len(STYLE_PREFIX):] for t, i in vocab.items() if t.startswith(STYLE_PREFIX)}
    note_t = torch.from_numpy(notes)
    was_training = model.training
    model.eval()
    total: dict[str, list[float]] = {}
    for k in range(split.num_sequences):
        seq = torch.from_numpy(split.sequence(k))
        style = next((styles[int(i)] for i in seq[:HEAD] if int(i) in styles), "(none)")
        acc = total.setdefault(style, [0.0, 0])
        for a in range(0, len(seq) - 1, block_size):
            y = seq[a + 1: a + block_size + 1]
            x = seq[a: a + len(y)].unsqueeze(0).to(device)
            logits = model(x)[0].float()[0]
            loss = torch.nn.functional.cross_entropy(logits, y.to(logits.device), reduction="none").cpu()
            acc[0] += float(loss[~torch.isin(y, ctrl)].sum())
            acc[1] += int(torch.isin(y, note_t).sum())
    model.train(was_training)
    return {s: (v[0] / v[1], int(v[1])) for s, v in sorted(total.items()) if v[1]}
