"""Riffs and fills as songs: riffs.py (sample rows, decode them, finger them), infill.py (regenerate chosen bars),
conditioning.py (the controls a request asks for, as prompt tokens and guards) and form.py (form plans and the
counts they are drawn from). Above generation/ (the decoding loop and the constraint) and fingering/."""
