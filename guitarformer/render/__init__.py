"""Rendering a GuitarScore for people: MIDI, ASCII tab, Guitar Pro 5, audio and piano roll."""
