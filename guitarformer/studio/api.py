"""The studio's web app: the page, alphaTab's files, and the JSON API over the application layer.

    GET  /                          the page
    GET  /api/run                   the run and the options it honours (run_info)
    POST /api/sample                {options} -> {"riffs": [...], "lines": [...]}: candidates to flip through
    POST /api/infill                {"riff": id, "bars": [first, last], "part"?, ...} -> {"riffs": [the riff, bars new]}
    POST /api/continue              multipart: file (any format the readers take) + options (JSON) -> {"riffs"}
    POST /api/cancel/{job}          stop a queued or running request
    GET  /api/files/{riff}/{kind}   gp | midi | tab | wav of a riff this server made

A riff says its parts ("parts": guitars, bass, drums, in its files' track order; studio/parts.py), and a Regenerate
names the part it fills ("part": an index in that list; default: the part the model wrote).

Errors come back as {"error": problem, "fix": fix} with status 400 (bad input or a Host this server does not
serve), 403 (a change asked from another site's page), 404 (unknown riff or file),
409 (cancelled), 413 (upload too large) or 503 (queue full); the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from contextlib import asynccontextmanager
from dataclasses import asdict
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from guitarformer.app import (
    InfillRequest,
    Run,
    Outputs,
    SampleRequest,
    check_sample_request,
    infill,
    plain_words,
    read_sample_prompt,
    read_user_file,
    run_info,
    sample,
)
from guitarformer.app.prompt import Prompt
from guitarformer.errors import GuitarformerError
from guitarformer.music.score import GuitarScore
from guitarformer.music.song import Song
from guitarformer.render.audio import find_synth
from guitarformer.studio.forms import (
    InfillForm,
    SampleForm,
    bars_of,
    check_bar_range,
    form_fields,
    infill_form,
    sample_form,
)
from guitarformer.studio.guard import HostGuard
from guitarformer.studio.parts import fill_part, part_name, parts_json, track_of
from guitarformer.studio.store import KINDS, MEDIA_TYPES, RiffStore, StoredRiff, UnknownRiff
from guitarformer.studio.worker import Busy, JobCancelled, StopCheck, Worker

STATIC = Path(str(files("guitarformer.studio") / "static"))
MAX_UPLOAD_BYTES = 4 * 1024 * 1024  # a Guitar Pro or MIDI file of a whole song is well under 1 MB
UPLOAD_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def _has_synth() -> bool:
    try:
        find_synth()
        return True
    except GuitarformerError:
        return False


class Studio:
    """One loaded run, its generation worker and the riffs it made: what every request shares."""

    def __init__(self, loaded: Run, root: Path | None = None, max_queued: int = 32, compile: bool = False):
        self.loaded = loaded
        self.compile = compile  # riffs through the compiled one-token step (generation/decode/compiled.py)
        self.info = run_info(loaded)
        self.own_root = root is None  # a temporary folder of its own, removed by `close`
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="guitarformer-studio-"))
        self.store = RiffStore(self.root / "riffs")
        self.uploads = self.root / "uploads"
        self.uploads.mkdir(parents=True, exist_ok=True)
        self.worker = Worker(max_queued)
        self.wav = _has_synth()  # the server writes WAV when it can synthesize; else the page renders it

    def close(self) -> None:
        """Stop the worker; remove the riffs' temporary folder when the studio made it (a `root` given is kept)."""
        self.worker.close()
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def outputs(self, riff: StoredRiff, wav: bool = True) -> Outputs:
        """The riff's files; WAV where the server synthesizes and the command writes it (infill writes none: the
        page renders that riff's WAV itself)."""
        kinds = {k: riff.folder / name for k, name in KINDS.items() if k != "wav" or (self.wav and wav)}
        return Outputs(**kinds)

    def riff_json(self, riff: StoredRiff, seed: int | None, lines: list[str],
                  regenerated: tuple[int, int] | None = None, new_bars: tuple[int, int] | None = None
                  ) -> dict[str, Any]:
        """A riff as the page receives it; `new_bars` (first, last; 1-based): the bars the model just wrote into a
        song that has others (the page marks them and shows the first), None for a riff that is all new."""
        gs = riff.score
        tab = riff.files.get("tab")
        bars = max(bars_of(p) for p in riff.parts or [gs])
        if new_bars:  # counted as `bars` counts them: a last note ringing into a further bar adds none
            new_bars = (new_bars[0], min(new_bars[1], bars)) if new_bars[0] <= bars else None
        return {"id": riff.id, "seed": seed, "bars": bars, "notes": len(gs.track.notes),
                "parts": parts_json(riff.parts or [gs], riff.edited), "edited": riff.edited,
                "regenerated": list(regenerated) if regenerated else None,
                "new_bars": list(new_bars) if new_bars else None,
                "files": {k: f"/api/files/{riff.id}/{k}" for k in riff.files},
                "tab": tab.read_text() if tab else "", "lines": lines}

    @staticmethod
    def _keep(riff: StoredRiff, score: GuitarScore, files: dict[str, Path], parts: list[GuitarScore] | None = None,
              edited: int = 0) -> None:
        riff.score = score
        riff.files = {k: Path(p) for k, p in files.items()}
        riff.parts, riff.edited = (parts or [score]), edited

    def sample_job(self, form: SampleForm, prompt: Path | None = None) -> Callable[[StopCheck], dict]:
        """Candidates one at a time, so a cancel is seen between riffs; candidate k is seed + k (the CLI's
        `sample --seed S+k` gives the same riff). A `prompt` file is read once for them all."""
        base_seed = form.options.pop("seed", 0)

        def run(stop: StopCheck) -> dict:
            out, lines, file = [], [], None
            for k in range(form.candidates):
                if stop():
                    raise JobCancelled(form.job or "")
                riff = self.store.new()
                try:
                    # an upload with parts asked is accompanied (the band writes those parts for it), else continued
                    given = {"accompany": prompt} if prompt is not None and form.options.get("parts") else \
                        {"prompt": prompt}
                    req = SampleRequest.of(outputs=self.outputs(riff), num_samples=1, seed=base_seed + k,
                                           compile=self.compile, **given, **form.options)
                    if file is None and req.prompt is not None:
                        check_sample_request(req)  # the request's own errors before the file's
                        file = read_sample_prompt(req, self.loaded)
                    result = sample(req, self.loaded, file)
                except BaseException:
                    self.store.discard(riff)
                    raise
                gs = result.riffs[0].gs
                parts, edited = (file.parts(gs), file.edited) if file is not None else ([gs], 0)
                if result.riffs[0].parts:  # a band riff: every part, the first the model wrote being edited
                    parts = result.riffs[0].parts
                    edited = next(k for k, p in enumerate(parts) if p is gs)
                self._keep(riff, gs, result.riffs[0].files, parts, edited)
                lines = lines or result.lines[:1]
                out.append(self.riff_json(riff, base_seed + k, result.lines[1:],
                                          new_bars=continued_bars(file, result.riffs[0].new_bars)))
            return {"riffs": out, "lines": lines}

        return run

    def infill_job(self, form: InfillForm) -> Callable[[StopCheck], dict]:
        """Bars of one part written again (the part the riff's model wrote, or `form.part`); the other parts kept."""
        source = self.store.get(form.riff)
        parts = source.parts or [source.score]
        part = source.edited if form.part is None else form.part
        gs = fill_part(parts, part)
        several = len(parts) > 1
        check_bar_range(form.bars, gs, f"{part_name(gs)}'s" if several else "the riff's")
        # one part: the part itself (as ever); several: the song, the part chosen as `infill --track N --tracks all`
        song = dict(song=Song(parts), track=track_of(parts, part), tracks="all") if several else dict(song=gs)

        def run(stop: StopCheck) -> dict:
            riff = self.store.new()
            try:
                req = InfillRequest.of(bars=form.bars, outputs=self.outputs(riff, wav=False), **song, **form.options)
                result = infill(req, self.loaded)
            except BaseException:
                self.store.discard(riff)
                raise
            self._keep(riff, result.score, result.files, result.parts, part)
            return {"riffs": [self.riff_json(riff, form.options.get("seed", 0), list(result.lines), form.bars,
                                               new_bars=form.bars)],
                    "lines": list(result.lines)}

        return run

    async def wait(self, fn: Callable[[StopCheck], dict], job: str | None) -> dict:
        """Queue the job and wait for it without holding a server thread (asyncio wraps the future)."""
        return await asyncio.wrap_future(self.worker.submit(fn, job).future)

    def save_upload(self, upload: UploadFile) -> Path:
        """The uploaded file in a folder of its own, refused past MAX_UPLOAD_BYTES; read to check it is a part."""
        data = upload.file.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            raise UploadTooLarge(f"{upload.filename}: larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB",
                                 "upload one song (a Guitar Pro, MIDI, MusicXML or tab file)")
        if not data:
            raise GuitarformerError(f"{upload.filename or 'the upload'} is empty", "choose a file with music in it")
        name = SAFE_NAME.sub("_", Path(upload.filename or "").name)[-80:]  # messages name the user's file
        if not UPLOAD_SUFFIX.match(Path(name).suffix):
            raise GuitarformerError(f"{upload.filename!r} has no file suffix to tell its format by",
                                    "upload a .gp5/.gp/.gpx/.mid/.musicxml/.txt file")
        folder = Path(tempfile.mkdtemp(dir=self.uploads))
        path = folder / name
        path.write_bytes(data)
        try:
            read_user_file(path)
        except GuitarformerError as e:  # the reader names the path: show the user's file name, not the server's
            shutil.rmtree(folder, ignore_errors=True)
            raise GuitarformerError(e.problem.replace(str(path), name).replace(str(folder), ""), e.fix) from None
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return path


def continued_bars(file: Prompt | None, new: int) -> tuple[int, int] | None:
    """The bars a continuation of `file` added after its own (first, last; 1-based, as the page and `infill --bars`
    number them); None for a riff from nothing (every bar is new) or a continuation that added no bar."""
    if file is None or new < 1:
        return None
    return file.prompt_bars + 1, file.prompt_bars + new


class UploadTooLarge(GuitarformerError):
    """An upload over the size limit (answered with 413)."""


def _error(status: int, problem: str, fix: str | None = None) -> JSONResponse:
    return JSONResponse({"error": problem, "fix": fix}, status_code=status)


def _run_info_json(studio: Studio) -> dict[str, Any]:
    info = studio.info
    return {"run_dir": str(info.run_dir), "kind": info.kind, "step": info.step, "val_loss": info.val_loss,
            "can_infill": info.can_infill, "tokenizer": getattr(info, "tokenizer", None), "init": info.init,
            "describe": studio.loaded.describe(), "headline": plain_words(studio.loaded, info),
            "server_wav": studio.wav,
            "options": {name: asdict(opt) for name, opt in info.options.items()}, "form": form_fields()}


async def _json_body(request: Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise GuitarformerError("the request body is not JSON", "send Content-Type: application/json and a JSON "
                                "object, e.g. {\"bars\": 8}") from None


ERROR_STATUS = ((UploadTooLarge, 413), (UnknownRiff, 404), (Busy, 503), (GuitarformerError, 400))


def _install_error_handlers(app: FastAPI) -> None:
    """Every refusal as {"error", "fix"} JSON with its status; a bug is a 500 of the same shape, and the server
    keeps serving."""
    def refusal(status: int):
        async def handler(_request, e: GuitarformerError):
            return _error(status, e.problem, e.fix)
        return handler

    for cls, status in ERROR_STATUS:  # the most specific class wins (Starlette looks up the exception's MRO)
        app.add_exception_handler(cls, refusal(status))

    async def cancelled(_request, _e):
        return _error(409, "cancelled", "ask again when you are ready")

    async def http_error(_request, e: StarletteHTTPException):  # unknown routes, wrong methods: the same shape
        return _error(e.status_code, str(e.detail), "see docs/studio.md for the API's routes")

    async def failed(_request, e: Exception):
        return _error(500, f"the server failed: {type(e).__name__}: {e}", "report it with the request you sent")

    app.add_exception_handler(JobCancelled, cancelled)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, failed)


def _install_routes(app: FastAPI, studio: Studio) -> None:
    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/run")
    def api_run():
        return _run_info_json(studio)

    @app.post("/api/sample")
    async def api_sample(request: Request):
        form = sample_form(await _json_body(request), studio.info)
        return await studio.wait(studio.sample_job(form), form.job)

    @app.post("/api/infill")
    async def api_infill(request: Request):
        form = infill_form(await _json_body(request), studio.info)
        return await studio.wait(studio.infill_job(form), form.job)

    @app.post("/api/continue")
    async def api_continue(file: UploadFile = File(...), options: str = Form("{}")):
        try:
            body = json.loads(options)
        except json.JSONDecodeError:
            raise GuitarformerError("the options field is not JSON", "send options as a JSON object") from None
        form = sample_form(body, studio.info)
        if "time_signature" in form.options:
            raise GuitarformerError("a continuation goes on in the file's own time signature",
                                    "leave time signature empty when continuing a file")
        prompt = await run_in_threadpool(studio.save_upload, file)  # reading a file may take a while: off the loop
        try:
            return await studio.wait(studio.sample_job(form, prompt), form.job)
        finally:
            shutil.rmtree(prompt.parent, ignore_errors=True)

    @app.post("/api/cancel/{job}")
    def api_cancel(job: str):
        return {"job": job, "cancelled": studio.worker.cancel(job)}

    @app.get("/api/files/{riff_id}/{kind}")
    def api_file(riff_id: str, kind: str):
        path = studio.store.file(riff_id, kind)
        return FileResponse(path, media_type=MEDIA_TYPES[kind], filename=f"riff-{riff_id}{path.suffix}")


def create_app(loaded: Run, root: Path | None = None, max_queued: int = 32, compile: bool = False,
               host: str = "127.0.0.1", port: int | None = None) -> FastAPI:
    """The FastAPI app serving one loaded run (see the module docstring for its routes); `root`: where the riffs'
    files go (default: a new temporary folder); `max_queued`: requests waiting before the server says busy;
    `compile`: riffs through the compiled one-token step; `host`, `port`: where it is served, the only Host it
    answers besides loopback names (studio/guard.py; port None: any)."""
    studio = Studio(loaded, root, max_queued, compile)

    @asynccontextmanager
    async def lifespan(_app):
        yield
        studio.close()

    app = FastAPI(title="guitarformer studio", lifespan=lifespan, docs_url="/api/docs", redoc_url=None,
                  openapi_url="/api/openapi.json")
    app.state.studio = studio
    _install_error_handlers(app)
    _install_routes(app, studio)
    app.add_middleware(HostGuard, host=host, port=port)
    return app
