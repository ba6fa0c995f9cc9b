"""The studio's band: Generate with parts asked writes every part together (a run that learned the band), and an
upload with parts asked is accompanied; a one-part run says it cannot."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from guitarformer.app import load_run
from guitarformer.studio import create_app
from helpers.studio_runs import band_midi, studio_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
LOCAL = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    run = studio_run(tmp_path_factory.mktemp("band") / "run", parts="guitar,bass,drums")
    with TestClient(create_app(load_run(run), root=tmp_path_factory.mktemp("served")), base_url=LOCAL) as c:
        yield c


def test_the_run_offers_its_parts(client):
    parts = client.get("/api/run").json()["options"]["parts"]
    assert parts["available"] and parts["values"] == ["guitar", "bass", "drums"]


def test_generate_writes_the_band_and_says_every_part(client):
    res = client.post("/api/sample", json={"parts": "guitar,bass,drums", "bars": 2, "num_samples": 1, "seed": 4})
    assert res.status_code == 200, res.text
    riff = res.json()["riffs"][0]
    assert [p["kind"] for p in riff["parts"]] == ["guitar", "bass", "drums"]
    assert riff["parts"][riff["edited"]]["kind"] == "guitar"


def test_an_upload_with_parts_is_accompanied(client):
    res = client.post("/api/continue", files={"file": ("riff.mid", band_midi(2, parts=("guitar",)))},
                      data={"options": json.dumps({"parts": "bass,drums", "bars": 2, "num_samples": 1, "seed": 1})})
    assert res.status_code == 200, res.text
    kinds = sorted(p["kind"] for p in res.json()["riffs"][0]["parts"])
    assert kinds == ["bass", "drums", "guitar"]


def test_a_one_part_run_refuses_parts(tmp_path):
    run = studio_run(tmp_path / "run")
    with TestClient(create_app(load_run(run)), base_url=LOCAL) as c:
        res = c.post("/api/sample", json={"parts": "guitar,bass", "bars": 1, "num_samples": 1})
    assert res.status_code == 400 and "one part" in res.json()["error"]
