"""The studio's JSON API through FastAPI's TestClient: every endpoint and every refusal, on untrained tiny runs
(their riffs are noise; the API's contracts are not)."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import threading
from pathlib import Path

import guitarpro
import httpx
import pytest
from fastapi.testclient import TestClient

from guitarformer.app import load_run, read_user_parts
from guitarformer.music.bars import bar_starts
from guitarformer.readers import read_guitar
from guitarformer.studio import BackgroundServer, create_app
from guitarformer.studio.forms import bars_of
from guitarformer.studio.server import check_host
from guitarformer.studio.worker import JobCancelled, Worker
from helpers.studio_runs import band_midi, free_port, studio_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FIX = Path(__file__).parents[1] / "fixtures" / "io"
STATIC = Path(__file__).resolve().parents[2] / "guitarformer" / "studio" / "static"
LOCAL = "http://127.0.0.1:8000"  # the studio answers only the host it serves (TestClient's default is testserver)
OPTIONS = {"bars", "tempo", "time_signature", "tuning", "key", "style", "density", "polyphony", "hand_position",
           "palm_mute", "techniques", "temperature", "top_p", "seed", "program"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return studio_run(tmp_path_factory.mktemp("studio") / "run")


@pytest.fixture(scope="module")
def client(run, tmp_path_factory):
    app = create_app(load_run(run), root=tmp_path_factory.mktemp("served"))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def plain_client(tmp_path_factory):
    """A run without control or fill tokens: options it cannot honour, and no Regenerate."""
    run = studio_run(tmp_path_factory.mktemp("plain") / "run", controls=False, infill=0.0)
    with TestClient(create_app(load_run(run)), base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def riffs(client):
    res = client.post("/api/sample", json={"bars": 4, "num_samples": 2, "seed": 7, "key": "E:minor"})
    assert res.status_code == 200, res.text
    return res.json()["riffs"]


def notes_of(path: Path) -> list[tuple[int, int]]:
    return sorted((n.time, n.pitch) for n in read_guitar(path)[0].track.notes)


def fetch(client, url: str, tmp: Path, name: str) -> Path:
    res = client.get(url)
    assert res.status_code == 200, res.text
    out = tmp / name
    out.write_bytes(res.content)
    return out


def error(res, status: int) -> str:
    assert res.status_code == status, res.text
    body = res.json()
    assert body["error"] and "Traceback" not in body["error"]
    return body["error"]


def test_the_page_loads_alphatab_from_this_server_only(client):
    html = client.get("/").text
    assert '<script src="/static/alphatab/alphaTab.min.js">' in html and "/static/studio.js" in html
    js = client.get("/static/studio.js").text
    for text in (html, js):  # no script, font or SoundFont from a CDN
        assert "cdn" not in text.lower() and "unpkg" not in text and "jsdelivr" not in text
    assert '"/static/alphatab/"' in js and "soundfont/sonivox.sf3" in js and 'fontDirectory = ALPHATAB + "font/"' in js
    for path in ("alphaTab.min.js", "font/Bravura.woff2", "soundfont/sonivox.sf3", "LICENSE"):
        assert client.get(f"/static/alphatab/{path}").status_code == 200


def test_shipped_alphatab_files_match_their_record():
    """tools/fetch_alphatab.py wrote VERSION: every file is there, unchanged, and under 2 MB."""
    lines = (STATIC / "alphatab" / "VERSION").read_text().splitlines()
    assert lines[0] == "@coderline/alphatab 1.8.4"
    files = [line.split("  ", 1) for line in lines if "  " in line]
    assert len(files) == 9
    for digest, rel in files:
        data = (STATIC / "alphatab" / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest and len(data) < 2 * 1024 * 1024, rel


def test_run_info_lists_every_option(client, plain_client):
    info = client.get("/api/run").json()
    assert OPTIONS <= set(info["options"]) and info["can_infill"] and info["kind"] == "decoder"
    assert info["options"]["style"]["available"] and set(info["options"]["style"]["values"]) == {"folk", "rock"}
    plain = plain_client.get("/api/run").json()
    assert not plain["can_infill"] and not plain["options"]["key"]["available"] and plain["options"]["key"]["reason"]


def test_the_header_says_what_the_run_plays_without_a_path(client):
    info = client.get("/api/run").json()
    head = info["headline"]
    assert head.startswith("Your run ") and "folk" in head and "rock" in head and "rewrites chosen bars" in head
    assert "/" not in head  # no filesystem path in what the page shows
    assert info["run_dir"] in info["describe"]  # the technical line keeps the path, shown on hover


def test_sample_gives_candidates_with_their_files(client, riffs, tmp_path):
    assert len(riffs) == 2 and riffs[0]["id"] != riffs[1]["id"] and [r["seed"] for r in riffs] == [7, 8]
    for r in riffs:
        assert set(r["files"]) >= {"gp", "midi", "tab"}
        gp = fetch(client, r["files"]["gp"], tmp_path, f"{r['id']}.gp5")
        assert len(read_guitar(gp)[0].track.notes) == r["notes"] and r["bars"] <= 4
        assert fetch(client, r["files"]["midi"], tmp_path, f"{r['id']}.mid").read_bytes()[:4] == b"MThd"
        assert client.get(r["files"]["tab"]).text == r["tab"] and "E" in r["tab"]
    # candidate k is the riff of seed + k: asking for seed 8 alone gives candidate 2 again
    again = client.post("/api/sample", json={"bars": 4, "num_samples": 1, "seed": 8, "key": "E:minor"}).json()
    assert again["riffs"][0]["notes"] == riffs[1]["notes"]
    assert notes_of(fetch(client, again["riffs"][0]["files"]["gp"], tmp_path, "again.gp5")) == \
        notes_of(tmp_path / f"{riffs[1]['id']}.gp5")


def test_meters_drawn_or_the_models_own(run, client, tmp_path):
    """The page's time-signature choices `auto` (drawn from the run's tunes) and `none` (the model's own)."""
    from guitarformer.compose.riffs import meters_to_draw

    drawn = meters_to_draw(load_run(run).seen)
    for choice in ("auto", "none"):
        res = client.post("/api/sample", json={"bars": 2, "num_samples": 2, "seed": 3, "time_signature": choice})
        assert res.status_code == 200, res.text
        for r in res.json()["riffs"]:
            ts = read_guitar(fetch(client, r["files"]["gp"], tmp_path, f"{choice}-{r['id']}.gp5"))[0] \
                .score.time_signatures[0]
            assert choice == "none" or f"{ts.numerator}/{ts.denominator}" in drawn


@pytest.mark.parametrize("body, says", [
    ({"bars": "eight"}, "bars must be a whole number"),
    ({"bars": 0}, "bars must be 1..64"),
    ({"bars": 500}, "bars must be 1..64"),
    ({"num_samples": 40}, "num_samples must be 1..8"),
    ({"tempo": "fast"}, "tempo must be a number"),
    ({"key": 5}, "key must be text"),
    ({"color": "red"}, "unknown option 'color'"),
    ([1, 2], "JSON object"),
])
def test_bad_options_get_one_message(client, body, says):
    assert says in error(client.post("/api/sample", json=body), 400)


def test_option_the_run_cannot_honour(plain_client):
    msg = error(plain_client.post("/api/sample", json={"key": "E:minor"}), 400)
    assert msg.startswith("this run cannot honour key:") and "control tokens" in msg
    assert "not trained with infilling" in error(plain_client.post("/api/infill", json={"riff": "0" * 16,
                                                                                       "bars": [1, 1]}), 400)


def test_body_that_is_not_json(client):
    res = client.post("/api/sample", content=b"bars=8", headers={"Content-Type": "application/json"})
    assert "not JSON" in error(res, 400)


def long_riff(client, bars: int = 4) -> dict:
    """A riff of at least `bars` bars (the untrained model often ends after one: look through the seeds)."""
    for seed in range(0, 32, 8):
        for riff in client.post("/api/sample", json={"bars": 8, "num_samples": 8, "seed": seed}).json()["riffs"]:
            if riff["bars"] >= bars:
                return riff
    raise AssertionError(f"no seed of 0..31 gave {bars} bars")


@pytest.mark.slow
def test_infill_keeps_the_bars_outside(client, tmp_path):
    riff = long_riff(client)
    before = read_guitar(fetch(client, riff["files"]["gp"], tmp_path, "before.gp5"))[0]
    res = client.post("/api/infill", json={"riff": riff["id"], "bars": [2, 3], "seed": 1})
    assert res.status_code == 200, res.text
    new = res.json()["riffs"][0]
    assert new["id"] != riff["id"] and set(new["files"]) >= {"gp", "midi", "tab"} and new["regenerated"] == [2, 3]
    assert new["new_bars"] == [2, 3] and riff["new_bars"] is None  # a riff from nothing: every bar new, none marked
    after = read_guitar(fetch(client, new["files"]["gp"], tmp_path, "after.gp5"))[0]
    end = max(n.time + n.duration for n in before.track.notes)
    starts = bar_starts(before.score.time_signatures, before.score.ticks_per_quarter, end)
    lo, hi = starts[1], starts[3]
    outside = lambda gs: sorted((n.time, n.pitch) for n in gs.track.notes if not lo <= n.time < hi)  # noqa: E731
    assert outside(after) == outside(before)


def test_infill_refusals(client, riffs):
    rid = riffs[0]["id"]
    n = riffs[0]["bars"]
    assert f"not within the riff's bars 1-{n}" in error(client.post("/api/infill", json={"riff": rid,
                                                                                      "bars": [n, n + 5]}), 400)
    assert "not within" in error(client.post("/api/infill", json={"riff": rid, "bars": [2, 1]}), 400)
    assert "bars must be [first, last]" in error(client.post("/api/infill", json={"riff": rid, "bars": 3}), 400)
    assert "no riff" in error(client.post("/api/infill", json={"riff": "feedfacefeedface", "bars": [1, 1]}), 404)
    assert "names the riff" in error(client.post("/api/infill", json={"bars": [1, 1]}), 400)


def test_continue_an_uploaded_file(client, tmp_path):
    song = FIX / "drop_d_capo.gp5"
    res = client.post("/api/continue", files={"file": ("song.gp5", song.read_bytes())},
                      data={"options": json.dumps({"bars": 2, "num_samples": 1, "seed": 2})})
    assert res.status_code == 200, res.text
    riff = res.json()["riffs"][0]
    out = read_guitar(fetch(client, riff["files"]["gp"], tmp_path, "cont.gp5"))[0]
    src = read_guitar(song)[0]
    assert bars_of(out) >= bars_of(src) and len(out.track.notes) >= len(src.track.notes)
    assert [n.pitch for n in out.track.notes[:5]] == [n.pitch for n in src.track.notes[:5]]
    # the answer names the bars the model wrote: from the bar after the file's last to the riff's last
    first, last = riff["new_bars"]
    assert first == bars_of(src) + 1 and last == riff["bars"] and riff["regenerated"] is None
    end = max(n.time for n in out.track.notes) + 1
    starts = bar_starts(out.score.time_signatures, out.score.ticks_per_quarter, end)
    new = [n for n in out.track.notes if n.time >= starts[first - 1]]
    assert len(new) == len(out.track.notes) - len(src.track.notes) > 0
    assert any(n.time >= starts[last - 1] for n in new)  # the last bar named holds new notes


def test_a_riff_says_its_parts(riffs):
    part = riffs[0]["parts"]
    assert riffs[0]["edited"] == 0 and len(part) == 1
    assert part[0] | {"name": None} == {"index": 0, "name": None, "kind": "guitar", "instrument": part[0]["instrument"],
                                        "tuning": "standard: E2 A2 D3 G3 B3 E4", "strings": 6, "capo": 0,
                                        "notes": riffs[0]["notes"], "edited": True}


def test_a_band_file_keeps_and_says_every_part_and_regenerates_the_one_chosen(client, tmp_path):
    """Continue a guitar + bass + drums MIDI: the answer lists the three parts as the Guitar Pro file holds them;
    Regenerate fills the part it names (the bass here) and keeps the others note for note; drums are refused."""
    res = client.post("/api/continue", files={"file": ("band.mid", band_midi(4))},
                      data={"options": json.dumps({"bars": 2, "num_samples": 1, "seed": 3})})
    assert res.status_code == 200, res.text
    riff = res.json()["riffs"][0]
    parts = riff["parts"]
    assert [(p["name"], p["kind"], p["strings"]) for p in parts] == [
        ("Lead guitar", "guitar", 6), ("Bass", "bass", 4), ("Drums", "drums", 0)]
    assert [p["tuning"] for p in parts] == ["standard: E2 A2 D3 G3 B3 E4", "standard bass: E1 A1 D2 G2",
                                            "drum kit (no strings)"]
    assert [p["notes"] for p in parts[1:]] == [16, 32] and parts[0]["notes"] == riff["notes"] >= 32
    assert riff["edited"] == 0 and [p["edited"] for p in parts] == [True, False, False]
    song = guitarpro.parse(str(fetch(client, riff["files"]["gp"], tmp_path, "band.gp5")))
    assert [t.name for t in song.tracks] == [p["name"] for p in parts] and song.tracks[2].isPercussionTrack

    before = read_user_parts(fetch(client, riff["files"]["midi"], tmp_path, "before.mid"), "all")
    res = client.post("/api/infill", json={"riff": riff["id"], "bars": [2, 3], "part": 1, "seed": 1})
    assert res.status_code == 200, res.text
    new = res.json()["riffs"][0]
    assert new["edited"] == 1 and [p["edited"] for p in new["parts"]] == [False, True, False]
    assert [p["name"] for p in new["parts"]] == [p["name"] for p in parts] and new["regenerated"] == [2, 3]
    assert "the 2 other parts as they were" in res.json()["lines"][-1]
    after = read_user_parts(fetch(client, new["files"]["midi"], tmp_path, "after.mid"), "all")
    notes = lambda gs: [(n.time, n.duration, n.pitch) for n in gs.track.notes]  # noqa: E731
    assert notes(after[0]) == notes(before[0]) and notes(after[2]) == notes(before[2])  # guitar and drums kept
    starts = bar_starts(before[1].score.time_signatures, before[1].score.ticks_per_quarter, 4 * 1920)
    outside = lambda gs: [x for x in notes(gs) if not starts[1] <= x[0] < starts[3]]  # noqa: E731
    assert outside(after[1]) == outside(before[1])  # the bass outside bars 2-3 kept

    drums = error(client.post("/api/infill", json={"riff": riff["id"], "bars": [1, 1], "part": 2}), 400)
    assert "part 2 (Drums) is a drum part" in drums
    assert "the riff has parts 0-2" in error(client.post("/api/infill", json={"riff": riff["id"], "bars": [1, 1],
                                                                            "part": 3}), 400)
    assert "not within Bass's bars 1-4" in error(client.post("/api/infill", json={"riff": riff["id"], "bars": [4, 6],
                                                                                "part": 1}), 400)


@pytest.mark.slow
def test_candidates_of_an_uploaded_file_read_it_once_and_are_the_cli_riffs(client, run, tmp_path, monkeypatch):
    import guitarformer.app.prompt as prompt_module
    from guitarformer.app import Outputs, SampleRequest, sample

    reads = []
    real = prompt_module.read_user_song
    monkeypatch.setattr(prompt_module, "read_user_song", lambda *a, **k: reads.append(a) or real(*a, **k))
    song = FIX / "drop_d_capo.gp5"
    res = client.post("/api/continue", files={"file": ("song.gp5", song.read_bytes())},
                      data={"options": json.dumps({"bars": 2, "num_samples": 3, "seed": 4})})
    assert res.status_code == 200, res.text
    assert len(reads) == 1  # one read for the three candidates
    for k, riff in enumerate(res.json()["riffs"]):
        got = notes_of(fetch(client, riff["files"]["midi"], tmp_path, f"c{k}.mid"))
        alone = sample(SampleRequest(prompt=song, bars=2, seed=4 + k, outputs=Outputs(midi=tmp_path / f"a{k}.mid")),
                       load_run(run))
        assert got == notes_of(alone.riffs[0].files["midi"]), k
    assert len(reads) == 4


def test_upload_refusals(client):
    def up(name, data, options="{}"):
        return client.post("/api/continue", files={"file": (name, data)}, data={"options": options})

    msg = error(up("broken.gp5", (FIX / "corrupt.gp5").read_bytes()), 400)
    assert "broken.gp5" in msg and "not a readable Guitar Pro file" in msg and "guitarformer-studio" not in msg
    assert "larger than 4 MB" in error(up("big.mid", b"MThd" + bytes(5 * 1024 * 1024)), 413)
    assert "empty" in error(up("empty.gp5", b""), 400)
    assert "no file suffix" in error(up("song", b"MThd...."), 400)
    assert "options field is not JSON" in error(up("s.gp5", b"x", options="{bars"), 400)
    assert "own time signature" in error(up("s.gp5", b"x", options='{"time_signature": "3/4"}'), 400)
    assert client.get("/api/run").status_code == 200  # still serving


def test_downloads_serve_only_what_the_server_made(client, riffs):
    rid = riffs[0]["id"]
    assert "no file kind" in error(client.get(f"/api/files/{rid}/py"), 404)
    for url in ("/api/files/..%2F..%2Fetc%2Fpasswd/gp", "/api/files/../../pyproject.toml/gp",
                f"/api/files/{rid}/..%2F..%2F..%2Fpyproject.toml"):
        assert "root:" not in client.get(url).text and error(client.get(url), 404)
    assert "no riff" in error(client.get(f"/api/files/{rid[::-1]}/gp"), 404)
    if not client.get("/api/run").json()["server_wav"]:
        assert "no wav file" in error(client.get(f"/api/files/{rid}/wav"), 404)
    else:  # the bundled soundfont in process: WAV wherever soundfile loads
        wav = client.get(f"/api/files/{rid}/wav").content
        assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(wav) > 44100


def test_cancel_a_queued_request(client):
    worker: Worker = client.app.state.studio.worker
    release = threading.Event()
    blocker = worker.submit(lambda stop: release.wait(30))  # the one generation thread is busy
    answers = {}
    t = threading.Thread(target=lambda: answers.update(r=client.post("/api/sample", json={"job": "j-1", "bars": 1})))
    t.start()
    for _ in range(200):
        if worker.pending() == 2:
            break
        threading.Event().wait(0.01)
    assert client.post("/api/cancel/j-1").json() == {"job": "j-1", "cancelled": True}
    release.set()
    t.join(30)
    assert blocker.future.result() is True
    assert error(answers["r"], 409) == "cancelled"
    assert client.post("/api/cancel/j-1").json()["cancelled"] is False  # gone
    assert client.get("/api/run").status_code == 200


def test_a_running_job_stops_at_the_next_riff():
    worker = Worker()
    started, done = threading.Event(), []

    def riffs(stop):
        for k in range(1000):
            started.set()
            if stop():
                raise JobCancelled("j")
            done.append(k)
            threading.Event().wait(0.01)

    job = worker.submit(riffs, "j")
    started.wait(5)
    assert worker.cancel("j")
    with pytest.raises(JobCancelled):
        job.future.result(10)
    assert len(done) < 1000
    assert worker.run(lambda stop: 42) == 42  # the thread goes on serving
    worker.close()


def test_a_full_queue_says_busy(run):
    app = create_app(load_run(run), max_queued=1)
    with TestClient(app, base_url=LOCAL) as c:
        release = threading.Event()
        c.app.state.studio.worker.submit(lambda stop: release.wait(30))
        assert "busy" in error(c.post("/api/sample", json={"bars": 1}), 503)
        release.set()


def test_two_clients_at_once_are_both_answered(run):
    app = create_app(load_run(run))
    with BackgroundServer(app, port=free_port()) as url:
        out: dict[int, httpx.Response] = {}

        def ask(i):
            out[i] = httpx.post(f"{url}/api/sample", json={"bars": 2, "num_samples": 1, "seed": i}, timeout=120)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert sorted(out) == [0, 1] and all(r.status_code == 200 for r in out.values())
    assert out[0].json()["riffs"][0]["id"] != out[1].json()["riffs"][0]["id"]


def test_host_other_than_this_machine_warns():
    assert check_host("127.0.0.1") is None and check_host("localhost") is None
    assert "anyone who can reach" in check_host("0.0.0.0")


def test_a_taken_port_is_one_clear_message():
    from guitarformer.errors import GuitarformerError
    from guitarformer.studio.server import check_port_free

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(GuitarformerError, match=f"cannot serve on 127.0.0.1:{port}"):
            check_port_free("127.0.0.1", port)


@pytest.mark.slow
@pytest.mark.usefixtures("cxx")
def test_a_compiled_studio_writes_the_riffs_of_the_eager_one(run, client, tmp_path, monkeypatch):
    """`guitarformer studio --compile`: the warm-up compiles the one-token step before the page opens, and the page's
    riffs then come through it, the same riffs as an eager studio's."""
    from guitarformer.generation.decode.compiled import CompiledStep
    from guitarformer.app import warm_up

    steps = []
    step = CompiledStep.__call__
    monkeypatch.setattr(CompiledStep, "__call__", lambda self, *a: steps.append(1) or step(self, *a))
    loaded = load_run(run)
    warm_up(loaded)
    assert steps
    ask = {"bars": 4, "num_samples": 1, "seed": 11}
    eager = client.post("/api/sample", json=ask).json()["riffs"][0]
    del steps[:]
    with TestClient(create_app(loaded, root=tmp_path, compile=True), base_url=LOCAL) as compiled_client:
        res = compiled_client.post("/api/sample", json=ask)
    assert res.status_code == 200, res.text
    assert steps and res.json()["riffs"][0]["tab"] == eager["tab"]


def test_the_studio_removes_its_temporary_folder_and_keeps_a_given_one(run, tmp_path):
    """Riffs go to a temporary folder of the studio's own, removed when the server stops (docs/studio.md says so);
    a folder the caller gave is the caller's and stays."""
    loaded = load_run(run)
    app = create_app(loaded)
    with TestClient(app, base_url=LOCAL) as c:
        root = app.state.studio.root
        r = c.post("/api/sample", json={"bars": 2, "seed": 1})
        assert r.status_code == 200, r.text
        assert any((root / "riffs").iterdir())
    assert not root.exists()
    given = tmp_path / "served"
    app = create_app(loaded, root=given)
    with TestClient(app, base_url=LOCAL) as c:
        assert c.post("/api/sample", json={"bars": 2, "seed": 1}).status_code == 200
    assert any((given / "riffs").iterdir())


def test_only_the_served_host_is_answered(run):
    """DNS rebinding: a page on evil.example whose name now points here must get nothing from the studio."""
    app = create_app(load_run(run), host="127.0.0.1", port=8000)
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/api/run").status_code == 200
        for good in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"):
            assert c.get("/api/run", headers={"Host": good}).status_code == 200, good
        for bad in ("evil.example", "evil.example:8000", "127.0.0.1:9000", "127.0.0.1.evil.example:8000", "",
                    "localhost:notaport"):
            assert "does not serve the host" in error(c.get("/api/run", headers={"Host": bad}), 400), bad
        assert c.get("/", headers={"Host": "evil.example:8000"}).status_code == 400  # the page and static files too
        assert c.get("/static/studio.js", headers={"Host": "evil.example:8000"}).status_code == 400
        assert c.get("/static/../../errors.py").status_code == 404  # outside the static files: still not found
    with TestClient(create_app(load_run(run), host="0.0.0.0", port=8000), base_url=LOCAL) as c:
        assert c.get("/api/run", headers={"Host": "192.168.1.20:8000"}).status_code == 200  # the LAN address
        assert c.get("/api/run", headers={"Host": "evil.example:8000"}).status_code == 400  # never a name


def test_a_change_from_another_site_is_refused(run):
    app = create_app(load_run(run), port=8000)
    with TestClient(app, base_url=LOCAL) as c:
        for header in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://127.0.0.1:9000"},
                       {"Referer": "http://evil.example/form.html"}, {"Origin": "https://127.0.0.1:8000"}):
            assert "another site" in error(c.post("/api/sample", json={"bars": 1}, headers=header), 403), header
        upload = c.post("/api/continue", files={"file": ("a.mid", (FIX / "band.mid").read_bytes())},
                        headers={"Origin": "http://evil.example"})
        assert "another site" in error(upload, 403)
        assert c.post("/api/cancel/x", headers={"Origin": "http://evil.example"}).status_code == 403
        same = c.post("/api/sample", json={"bars": 1, "seed": 1}, headers={"Origin": LOCAL})
        assert same.status_code == 200, same.text
        assert c.post("/api/cancel/x", headers={"Referer": LOCAL + "/"}).status_code == 200
        assert c.post("/api/cancel/x").status_code == 200  # no Origin at all: a script or curl, not a web page
        assert c.get("/api/run", headers={"Origin": "http://evil.example"}).status_code == 200  # reads change nothing


def test_an_upload_of_too_many_notes_is_refused_in_one_line(client):
    """Under the 4 MB upload limit, a MIDI still holds 600,000 one-tick notes: refused right after its read."""
    from helpers.hostile_files import midi_many_notes

    res = client.post("/api/continue", files={"file": ("many.mid", midi_many_notes(300_000))},
                      data={"options": "{}"})
    msg = error(res, 400)
    assert "many.mid: a part of 300,000 notes" in msg and "GUITARFORMER_MAX_PART_NOTES=" in res.json()["fix"]
    assert client.get("/api/run").status_code == 200  # still serving
