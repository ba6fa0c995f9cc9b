"""Generation: the decoding loop (decode/) and the constraint it samples under (constraint/). The features that turn
decoded ids into riffs and fills are compose/; the tab model's fingering, which reads with the same loop pieces and
constraint, is fingering/."""
