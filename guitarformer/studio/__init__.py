"""The studio: a local web page over the application layer where a guitarist generates riffs, sees their tab
and notation (alphaTab), hears them, regenerates bars and downloads the files. `guitarformer studio` starts it."""

from guitarformer.studio.api import create_app
from guitarformer.studio.server import BackgroundServer, serve

__all__ = ["BackgroundServer", "create_app", "serve"]
