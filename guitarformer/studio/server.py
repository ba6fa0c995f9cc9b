"""`guitarformer studio`: load the run once and serve the page with uvicorn."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import uvicorn

from guitarformer.app import load_run, warm_up
from guitarformer.errors import GuitarformerError
from guitarformer.runtime import set_threads, step_work
from guitarformer.studio.api import create_app

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def check_host(host: str) -> str | None:
    """A warning for a host other than this machine's loopback (None for a local one)."""
    if host in LOCAL_HOSTS:
        return None
    return (f"warning: serving on {host}: anyone who can reach this machine on that address can use the model "
            "and download the riffs it made; the studio has no login")


def serve(run: str | Path | None = None, checkpoint: str | Path | None = None, host: str = "127.0.0.1",
          port: int = 8000, device: str = "cpu", threads: int = 0, compile: bool = False) -> None:
    """Load the run (default: the newest under ./runs) and serve the studio until interrupted. `threads`: CPU
    threads for generation (0: chosen per step); `compile`: riffs through the compiled one-token step, compiled
    here before the page opens (app.warm_up)."""
    if not 0 < port < 65536:
        raise GuitarformerError(f"--port must be 1..65535, not {port}", "e.g. --port 8000")
    check_port_free(host, port)
    warning = check_host(host)
    if warning:
        print(warning, file=sys.stderr)
    loaded = load_run(run, checkpoint, device)
    set_threads(threads, step_work(loaded.model, 1))
    if compile:
        print("guitarformer studio: compiling the decoding step (seconds, once)", flush=True)
        warm_up(loaded)
    app = create_app(loaded, compile=compile, host=host, port=port)
    shown = f"[{host}]" if ":" in host else host
    print(f"guitarformer studio: {loaded.describe()}")
    print(f"open http://{shown}:{port}/ in a browser (Ctrl+C stops the server)")
    uvicorn.run(app, host=host, port=port, log_level="warning")


def check_port_free(host: str, port: int) -> None:
    """Fail with a clear message before the run is loaded when the port is taken (uvicorn would only log it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a port in TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError as e:
            raise GuitarformerError(f"cannot serve on {host}:{port}: {e.strerror or e}",
                                    f"choose another port (--port {port + 1}) or stop what uses it") from None


class BackgroundServer:
    """The app served by uvicorn in a thread of this process (tests, benchmarks): `with BackgroundServer(app,
    port) as url: ...`."""

    def __init__(self, app, port: int, host: str = "127.0.0.1"):
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://{host}:{port}"

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the studio did not start on {self.url}")
            time.sleep(0.05)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
