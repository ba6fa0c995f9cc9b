"""A SoundFont 2 file (SF2, or SF3 whose samples are Ogg Vorbis), read from the SoundFont 2.04 format: its presets
by (bank, program), their zones down to the samples a key and velocity play, and the samples' audio.

The file is a RIFF `sfbk`: LIST INFO (names), LIST sdta (`smpl`: 16-bit PCM, or for SF3 one Ogg Vorbis stream per
sample), LIST pdta (the "hydra": phdr pbag pmod pgen for presets, inst ibag imod igen for instruments, shdr for
sample headers). A preset's zones name instruments, an instrument's zones name samples; each level may open with a
global zone whose generators its other zones start from. Modulators (pmod, imod) are not read: the renderer applies
the default ones it needs (velocity, channel volume, pan) itself.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from guitarformer.errors import GuitarformerError

# Generator numbers (SoundFont 2.04, section 8.1.2) that the renderer reads
START_OFFSET, END_OFFSET, LOOP_START_OFFSET, LOOP_END_OFFSET, START_COARSE = 0, 1, 2, 3, 4
END_COARSE, PAN = 12, 17
DELAY_VOL, ATTACK_VOL, HOLD_VOL, DECAY_VOL, SUSTAIN_VOL, RELEASE_VOL = 33, 34, 35, 36, 37, 38
KEY_TO_HOLD, KEY_TO_DECAY = 39, 40
INSTRUMENT, KEY_RANGE, VEL_RANGE, LOOP_START_COARSE = 41, 43, 44, 45
KEYNUM, VELOCITY, ATTENUATION, LOOP_END_COARSE = 46, 47, 48, 50
COARSE_TUNE, FINE_TUNE, SAMPLE_ID, SAMPLE_MODES, SCALE_TUNING, EXCLUSIVE_CLASS, ROOT_KEY = 51, 52, 53, 54, 56, 57, 58
GENERATORS = 61
RANGES = (KEY_RANGE, VEL_RANGE)
# What a preset zone may not add to an instrument's value (8.5): sample addresses, modes, ranges, links, fixed keys
NOT_ADDITIVE = {START_OFFSET, END_OFFSET, LOOP_START_OFFSET, LOOP_END_OFFSET, START_COARSE, END_COARSE,
                LOOP_START_COARSE, LOOP_END_COARSE, INSTRUMENT, KEY_RANGE, VEL_RANGE, KEYNUM, VELOCITY, SAMPLE_ID,
                SAMPLE_MODES, EXCLUSIVE_CLASS, ROOT_KEY}
TIMECENT_GENERATORS = (21, 23, 25, 26, 27, 28, 30, DELAY_VOL, ATTACK_VOL, HOLD_VOL, DECAY_VOL, RELEASE_VOL)
OGG_VORBIS = 0x10  # sfSampleType bit of an SF3 sample: an Ogg Vorbis stream between start and end (bytes of smpl)
ROM_SAMPLE = 0x8000
PERCUSSION_BANK = 128
FIX = "point GUITARFORMER_SOUNDFONT at a General MIDI .sf2/.sf3 file (or unset it for the bundled one)"
HYDRA = {"phdr": 38, "pbag": 4, "pgen": 4, "inst": 22, "ibag": 4, "igen": 4, "shdr": 46}  # bytes per record


def default_generators() -> list:
    """Every generator's value before any zone sets it (8.1.3): timecents at -12000 (instant), full ranges."""
    gens: list = [0] * GENERATORS
    for g in TIMECENT_GENERATORS:
        gens[g] = -12000
    gens[8] = 13500  # initialFilterFc
    gens[KEY_RANGE] = gens[VEL_RANGE] = (0, 127)
    gens[KEYNUM] = gens[VELOCITY] = gens[ROOT_KEY] = -1
    gens[SCALE_TUNING] = 100
    return gens


@dataclass(frozen=True)
class SampleHeader:
    """One shdr record: where the sample lies in smpl (frames of 16-bit PCM, or bytes of an Ogg Vorbis stream), its
    loop in frames from the sample's own start (SF2 stores it absolute, SF3 relative: made relative here), its rate
    and the key it sounds at."""
    name: str
    start: int
    end: int
    loop_start: int
    loop_end: int
    rate: int
    pitch: int  # MIDI key the sample was recorded at (255: unknown, taken as 60)
    correction: int  # cents to add when playing
    kind: int


@dataclass(frozen=True)
class Region:
    """What one note plays from one instrument zone: its sample and the generators summed over both levels."""
    sample: int
    header: SampleHeader
    gens: tuple


@dataclass(frozen=True)
class Zone:
    """One zone's generators (number -> value; ranges as (lo, hi)) and what it links to (instrument or sample)."""
    gens: dict
    link: int | None


class SoundFont:
    """A parsed SoundFont: `regions(bank, program, key, velocity)` and `sample(index)` (float32 audio, cached)."""

    def __init__(self, path: Path, data: bytes):
        self.path = path
        chunks = riff_chunks(path, data)
        smpl = chunks.get("smpl")
        if smpl is None or any(name not in chunks for name in HYDRA):
            missing = ", ".join(n for n in ("smpl", *HYDRA) if n not in chunks)
            raise GuitarformerError(f"{path} is not a usable SoundFont: no {missing} chunk", FIX)
        self.smpl = smpl
        self.samples = sample_headers(path, chunks["shdr"])
        self.instruments = zone_lists(path, chunks["inst"], chunks["ibag"], chunks["igen"], 20, SAMPLE_ID)
        presets = zone_lists(path, chunks["phdr"], chunks["pbag"], chunks["pgen"], 24, INSTRUMENT)
        self.presets: dict[tuple[int, int], list[Zone]] = {}
        for i, zones in enumerate(presets):
            program, bank = struct.unpack_from("<HH", chunks["phdr"], 38 * i + 20)
            self.presets.setdefault((bank, program), zones)
        self._decoded: dict[int, np.ndarray] = {}

    def preset(self, bank: int, program: int) -> tuple[int, int]:
        """The (bank, program) to play for a GM request: that preset, else the same program in bank 0 (or the
        kit 0 for percussion), else the font's first."""
        for key in ((bank, program), (bank, 0) if bank == PERCUSSION_BANK else (0, program), (0, 0)):
            if key in self.presets:
                return key
        if not self.presets:
            raise GuitarformerError(f"{self.path} has no presets", FIX)
        return min(self.presets)

    def regions(self, bank: int, program: int, key: int, velocity: int) -> list[Region]:
        """The samples (one region each: a stereo pair is two) that `key` at `velocity` sounds on this preset."""
        out = []
        zones = self.presets[self.preset(bank, program)]
        pglobal = zones[0].gens if zones and zones[0].link is None else {}
        for pz in zones:
            pgens = {**pglobal, **pz.gens}
            if pz.link is None or pz.link >= len(self.instruments) or not matches(pgens, key, velocity):
                continue
            izones = self.instruments[pz.link]
            iglobal = izones[0].gens if izones and izones[0].link is None else {}
            for iz in izones:
                igens = {**iglobal, **iz.gens}
                if iz.link is None or iz.link >= len(self.samples) or not matches(igens, key, velocity):
                    continue
                if self.samples[iz.link].kind & ROM_SAMPLE:
                    continue
                gens = default_generators()
                for g, v in igens.items():
                    gens[g] = v
                for g, v in pgens.items():
                    if g not in NOT_ADDITIVE:
                        gens[g] += v
                out.append(Region(iz.link, self.samples[iz.link], tuple(gens)))
        return out

    def sample(self, index: int) -> np.ndarray:
        """Sample `index` as float32 mono in [-1, 1] from its start to its end, decoded once per font."""
        if index not in self._decoded:
            self._decoded[index] = self._read_sample(self.samples[index])
        return self._decoded[index]

    def _read_sample(self, h: SampleHeader) -> np.ndarray:
        if h.kind & OGG_VORBIS:
            if not 0 <= h.start < h.end <= len(self.smpl):
                raise GuitarformerError(f"{self.path}: sample {h.name!r} lies outside the sample data", FIX)
            return decode_vorbis(self.path, h, self.smpl[h.start:h.end])
        if not 0 <= h.start <= h.end <= len(self.smpl) // 2:
            raise GuitarformerError(f"{self.path}: sample {h.name!r} lies outside the sample data", FIX)
        pcm = np.frombuffer(self.smpl, dtype="<i2", count=h.end - h.start, offset=2 * h.start)
        return pcm.astype(np.float32) / 32768.0


def decode_vorbis(path: Path, h: SampleHeader, data: bytes) -> np.ndarray:
    """One SF3 sample's Ogg Vorbis stream -> float32 mono (soundfile's libsndfile decodes it from memory)."""
    import soundfile  # noqa: PLC0415 (its libsndfile loads only where a font is compressed)

    try:
        audio, _ = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as e:  # libsndfile raises its own error types for a stream it cannot read
        raise GuitarformerError(f"{path}: sample {h.name!r} is not a readable Ogg Vorbis stream ({e})", FIX) from None
    return np.ascontiguousarray(audio[:, 0])


def matches(gens: dict, key: int, velocity: int) -> bool:
    """Whether a zone's key and velocity ranges hold this note."""
    klo, khi = gens.get(KEY_RANGE, (0, 127))
    vlo, vhi = gens.get(VEL_RANGE, (0, 127))
    return klo <= key <= khi and vlo <= velocity <= vhi


def riff_chunks(path: Path, data: bytes) -> dict[str, bytes]:
    """The leaf chunks of a RIFF sfbk by id (INFO, sdta and pdta lists opened); a bad header is one error."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"sfbk":
        raise GuitarformerError(f"{path} is not a SoundFont (no RIFF sfbk header)", FIX)
    out: dict[str, bytes] = {}
    stack = [(12, min(len(data), 8 + struct.unpack_from("<I", data, 4)[0]))]
    while stack:
        pos, end = stack.pop()
        while pos + 8 <= end:
            cid, size = struct.unpack_from("<4sI", data, pos)
            body_end = pos + 8 + size
            if body_end > len(data):
                raise GuitarformerError(f"{path} is cut short: chunk {cid!r} runs past the end of the file", FIX)
            if cid == b"LIST":
                stack.append((pos + 12, body_end))
            else:
                out.setdefault(cid.decode("latin-1"), data[pos + 8:body_end])
            pos = body_end + (size & 1)  # chunks are padded to an even length
    return out


def records(path: Path, chunk: bytes, name: str) -> int:
    """How many records a hydra chunk holds (its terminal record included); a chunk of the wrong size is an error."""
    size = HYDRA[name]
    if len(chunk) % size or len(chunk) < size:
        raise GuitarformerError(f"{path}: the {name} chunk is {len(chunk)} bytes, not whole {size}-byte records", FIX)
    return len(chunk) // size


def zone_lists(path: Path, headers: bytes, bags: bytes, gens: bytes, bag_at: int, link_gen: int) -> list[list[Zone]]:
    """Each preset's (phdr) or instrument's (inst) zones: headers point at bags, bags at generators; a zone not
    ending in `link_gen` (instrument or sampleID) is global, and counts only as the first zone."""
    hname, bname, gname = ("phdr", "pbag", "pgen") if link_gen == INSTRUMENT else ("inst", "ibag", "igen")
    n_items, n_bags, n_gens = records(path, headers, hname), records(path, bags, bname), records(path, gens, gname)
    hsize = HYDRA[hname]
    bag_index = [struct.unpack_from("<H", headers, hsize * i + bag_at)[0] for i in range(n_items)]
    gen_index = [struct.unpack_from("<H", bags, 4 * i)[0] for i in range(n_bags)]
    out = []
    for i in range(n_items - 1):  # the last record only closes the list
        zones = []
        for b in range(bag_index[i], min(bag_index[i + 1], n_bags - 1)):
            lo, hi = gen_index[b], min(gen_index[b + 1], n_gens)
            zone = read_zone(gens, lo, hi, link_gen)
            if zone.link is not None or not zones:
                zones.append(zone)
        out.append(zones)
    return out


def read_zone(gens: bytes, lo: int, hi: int, link_gen: int) -> Zone:
    """Generators lo..hi-1 of a pgen/igen chunk as one zone (ranges unpacked, amounts signed where they are)."""
    values: dict = {}
    link = None
    for k in range(lo, hi):
        oper, = struct.unpack_from("<H", gens, 4 * k)
        if oper in RANGES:
            values[oper] = (gens[4 * k + 2], gens[4 * k + 3])
        elif oper == link_gen:
            link = struct.unpack_from("<H", gens, 4 * k + 2)[0]
            break  # the link ends a zone (8.1.2): generators after it are ignored
        elif oper < GENERATORS:
            values[oper] = struct.unpack_from("<h", gens, 4 * k + 2)[0]
    return Zone(values, link)


def sample_headers(path: Path, shdr: bytes) -> list[SampleHeader]:
    """Every sample header but the terminal EOS record, loops counted from the sample's start."""
    out = []
    for i in range(records(path, shdr, "shdr") - 1):
        name, start, end, ls, le, rate, pitch, corr, _, kind = struct.unpack_from("<20sIIIIIBbHH", shdr, 46 * i)
        if not kind & OGG_VORBIS:
            ls, le = ls - start, le - start
        out.append(SampleHeader(name.split(b"\0")[0].decode("latin-1"), start, end, ls, le, rate, pitch, corr, kind))
    return out


def load(path: str | Path) -> SoundFont:
    """The SoundFont at `path`, parsed once per process (and again if the file changes)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise GuitarformerError(f"cannot read the soundfont {p}: {e.strerror}", FIX) from None
    return _load_cached(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=2)
def _load_cached(path: str, mtime_ns: int, size: int) -> SoundFont:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise GuitarformerError(f"cannot read the soundfont {path}: {e.strerror}", FIX) from None
    try:
        return SoundFont(Path(path), data)
    except (struct.error, IndexError) as e:  # a record pointing past its chunk: a damaged file
        raise GuitarformerError(f"{path} is a damaged SoundFont ({e})", FIX) from None
