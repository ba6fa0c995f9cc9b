"""Refresh the alphaTab files the studio serves (guitarformer/studio/static/alphatab/) from npm.

The studio draws and plays riffs with alphaTab (npm `@coderline/alphatab`, MPL-2.0). Its built files ship
inside the package so users need no Node; this script is how they got there, and how a new version gets in:

    python tools/fetch_alphatab.py                 # the pinned version, with `npm pack` (or the registry URL)
    python tools/fetch_alphatab.py --version 1.8.4 --tarball ~/alphatab-1.8.4.tgz   # an already fetched tarball

Only what a page needs is copied: the UMD bundle `alphaTab.min.js` (the page, its render worker and its audio
worklet all load this one file: alphaTab starts workers with importScripts(core.scriptFile) and the worklet with
addModule(core.scriptFile), so the ES-module worker/worklet files are not needed), the Bravura music font (woff2,
with its OFL licence, FAQ and FONTLOG) and the Sonivox SoundFont (.sf3, 0.98 MB, with its licence), plus
alphaTab's LICENSE and a VERSION file recording the version, the tarball's sha1/sha512 and each file's sha256.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

PACKAGE = "@coderline/alphatab"
VERSION = "1.8.4"
DEST = Path(__file__).resolve().parents[1] / "guitarformer" / "studio" / "static" / "alphatab"
MAX_FILE_BYTES = 2 * 1024 * 1024  # each tracked file stays under 2 MB (the repository's rule)
# tarball path -> path under DEST
FILES = {
    "package/LICENSE": "LICENSE",
    "package/dist/alphaTab.min.js": "alphaTab.min.js",
    "package/dist/font/Bravura.woff2": "font/Bravura.woff2",
    "package/dist/font/Bravura-OFL.txt": "font/Bravura-OFL.txt",
    "package/dist/font/Bravura-OFL-FAQ.txt": "font/Bravura-OFL-FAQ.txt",
    "package/dist/font/Bravura-FONTLOG.txt": "font/Bravura-FONTLOG.txt",
    "package/dist/soundfont/sonivox.sf3": "soundfont/sonivox.sf3",
    "package/dist/soundfont/LICENSE": "soundfont/LICENSE",
    "package/dist/soundfont/README.md": "soundfont/README.md",
}


def npm_view(spec: str) -> dict:
    """The registry's record of one version (tarball URL and integrity), through npm."""
    out = subprocess.run(["npm", "view", spec, "dist", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def fetch_tarball(version: str, workdir: Path) -> tuple[Path, dict]:
    """Download the pinned tarball: `npm pack` when npm is there, else the registry URL with urllib."""
    spec = f"{PACKAGE}@{version}"
    if shutil.which("npm"):
        dist = npm_view(spec)
        subprocess.run(["npm", "pack", spec, "--silent"], cwd=workdir, check=True, capture_output=True)
        return next(workdir.glob("*.tgz")), dist
    url = f"https://registry.npmjs.org/{PACKAGE}/-/alphatab-{version}.tgz"
    target = workdir / f"alphatab-{version}.tgz"
    with urllib.request.urlopen(url, timeout=120) as r:  # noqa: S310 (a fixed https URL)
        target.write_bytes(r.read())
    return target, {"tarball": url}


def check_integrity(tgz: Path, dist: dict) -> dict[str, str]:
    """The tarball's sha1 and sha512; a mismatch with what the registry published stops the refresh."""
    data = tgz.read_bytes()
    sums = {"sha1": hashlib.sha1(data).hexdigest(),
            "sha512": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
    if dist.get("shasum") and dist["shasum"] != sums["sha1"]:
        sys.exit(f"{tgz.name}: sha1 {sums['sha1']} is not the registry's {dist['shasum']}")
    if dist.get("integrity") and dist["integrity"] != sums["sha512"]:
        sys.exit(f"{tgz.name}: integrity {sums['sha512']} is not the registry's {dist['integrity']}")
    return sums


def install(tgz: Path, version: str, sums: dict[str, str], dest: Path = DEST) -> list[str]:
    """Copy FILES out of the tarball into `dest` (replacing what was there) and write dest/VERSION."""
    if dest.exists():
        shutil.rmtree(dest)
    lines = [f"{PACKAGE} {version}", f"tarball sha1 {sums['sha1']}", f"tarball integrity {sums['sha512']}", ""]
    with tarfile.open(tgz, "r:gz") as tar:
        for src, rel in FILES.items():
            member = tar.extractfile(src)
            if member is None:
                sys.exit(f"{tgz.name} has no {src}: the package layout changed, update FILES in this script")
            data = member.read()
            if len(data) >= MAX_FILE_BYTES:
                sys.exit(f"{src} is {len(data)} bytes, over the {MAX_FILE_BYTES}-byte limit for a tracked file")
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {rel}")
    (dest / "VERSION").write_text("\n".join(lines) + "\n")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default=VERSION)
    ap.add_argument("--tarball", type=Path, help="use this downloaded tarball instead of fetching one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.tarball:
            tgz, dist = args.tarball, {}
        else:
            tgz, dist = fetch_tarball(args.version, Path(tmp))
        sums = check_integrity(tgz, dist)
        for line in install(tgz, args.version, sums):
            print(line)
    print(f"-> {DEST}")


if __name__ == "__main__":
    main()
