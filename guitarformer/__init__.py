"""guitarformer: guitar music generation with Transformers (tabs and MIDI in, riffs out)."""

__version__ = "0.1.0"

IGNORE_INDEX = -100
