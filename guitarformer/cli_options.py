"""Click parts the CLI builds from the project's registries: a command whose options are the registered controls."""

from __future__ import annotations

import click


class ControlOptions(click.Command):
    """A command that takes one option per registered control (vocab/controls.py: its option name and --help text),
    read from the registry whenever the command's parameters are read, so a new control is an option here too; the
    callback gets them as keyword arguments."""

    _made: dict[str, click.Option] = {}

    @property
    def params(self) -> list[click.Parameter]:
        from guitarformer.vocab.controls import option_controls

        want, own = option_controls(), self._own  # kept in step with the registry, in place (click appends to it)
        own[:] = [p for p in own if p.name in want or all(p is not made for made in self._made.values())]
        for name, c in want.items():
            if all(p.name != name for p in own):
                made = self._made.setdefault(name, click.Option(["--" + name.replace("_", "-"), name], default=None,
                                                                help=c.help))
                own.insert(next((k for k, p in enumerate(own) if p.name == "guard"), len(own)), made)
        return own

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._own = value
