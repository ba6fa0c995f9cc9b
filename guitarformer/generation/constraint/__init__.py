"""The generation constraint: what a guitar and the token grammar allow next, as a mask over the vocabulary.

`GuitarConstraint(tokenizer, tuning, capo, ...)` (guitar.py) is the interface: `start(prompt_ids)` then, each step,
`mask(last_ids)` (True: allowed) and `advance`; `constraint_device` says where its state lives for a batch. Its
rules, each a module the constraint composes: grammar.py (token order, `Grammar`, `NO_PITCH`), timing.py (the bar's
clock), strings.py (what each string can still play), guards.py (asked controls held while sampling: `GuardSpec`,
`meter_quarters`, `implied_meter`), repeats.py (a planned form's repeated bars). The decoding loop
(generation/decode/) calls it; the tab model's fingering (fingering/tab_model.py) masks its string choices with it.
"""

from guitarformer.generation.constraint.grammar import NO_PITCH, Grammar
from guitarformer.generation.constraint.guards import GuardSpec, implied_meter, meter_quarters
from guitarformer.generation.constraint.guitar import Asked, GuitarConstraint, constraint_device

__all__ = ["Asked", "GuardSpec", "Grammar", "GuitarConstraint", "NO_PITCH", "constraint_device", "implied_meter",
           "meter_quarters"]
