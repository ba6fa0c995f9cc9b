"""The Guitar Pro 6 (.gpx) container: a BCFZ-compressed (or BCFS-stored) sector file system.

BCFZ: "BCFZ", an int32 LE expected output length, then a bit stream read most significant bit first.
Each step starts with a flag bit:
  1  back-reference: w = 4 bits (plain order), then offset = w bits and length = w bits, each stored
     lowest bit first; copy `length` bytes from `offset` bytes before the end of the output (overlapping
     copies repeat the pattern);
  0  literal run: n = 2 bits (lowest bit first), then n bytes of 8 bits each, not byte-aligned.
The stream ends when the output reaches the expected length or the input runs out (real files often end
a few bits short). The output starts with "BCFS".

BCFS: after the 4-byte magic, 4096-byte sectors (sector 0 unused). A sector whose first int32 is 2 is a
file entry: its name (NUL-terminated) at +4, its size (int32) at +0x8C and the numbers of the sectors that
hold its bytes (int32s) from +0x94 up to a 0. A file is its sectors joined and cut to its size.
"""

from __future__ import annotations

import struct

from guitarformer.readers.limits import TooLarge

SECTOR = 0x1000
# Real .gpx files decompress to about 3-5 times their size (zero-padded sectors); a declared length far
# beyond that is a corrupt or hostile header, and honouring it could take unbounded memory.
MAX_RATIO = 64
MAX_OUTPUT = 256 << 20


def _reverse_table(bits: int) -> list[int]:
    """REV[v] = v with its `bits` low bits in reverse order."""
    rev = [0]
    for k in range(bits):  # doubling: the table for k+1 bits from the one for k
        rev = [r << 1 for r in rev] + [(r << 1) | 1 for r in rev]
    return rev


# Offsets and lengths are at most 15 bits; one 15-bit table serves every width w (shift right by 15 - w).
_REV15 = _reverse_table(15)
_LITERALS = (0, 2, 1, 3)  # a literal run's two length bits as read (first bit high) -> the count they store


def decompress(data: bytes, limit: int | None = None) -> bytes:
    """The bytes a BCFZ block (magic included) expands to, cut to its declared length.

    `limit` caps the declared length (default: MAX_RATIO times the input, at most MAX_OUTPUT); a header
    that declares more raises ValueError instead of allocating it.
    """
    stream = _Expansion(data, limit)
    stream.grow(stream.expected)
    return bytes(stream.out)


class _Expansion:
    """A BCFZ block expanded on demand: grow(n) decompresses until the output holds n bytes (or the stream ends),
    so that a reader wanting one file stops at that file's last sector."""

    def __init__(self, data: bytes, limit: int | None = None):
        if len(data) < 8 or data[:4] != b"BCFZ":
            raise ValueError("not a BCFZ block (no BCFZ header)")
        expected = struct.unpack_from("<i", data, 4)[0]
        if limit is None:
            limit = min(MAX_OUTPUT, max(1 << 20, MAX_RATIO * len(data)))
        if expected <= 0:
            raise ValueError(f"BCFZ header declares {expected} bytes of content")
        if expected > limit:
            raise ValueError(f"BCFZ header declares {expected:,} bytes from a {len(data):,}-byte file "
                             f"(more than {limit:,}): corrupt header")
        self.expected = expected
        self.total_bits = 8 * (len(data) - 8)
        self.stream = data[8:] + bytes(8)  # so an 8-byte window never runs past the end
        self.out = bytearray()
        self.pos = 0  # bit position in the stream
        self.ended = False  # the input ran out before the declared length

    def grow(self, target: int) -> None:
        target = min(target, self.expected)
        out, stream, total_bits, rev = self.out, self.stream, self.total_bits, _REV15
        from_bytes = int.from_bytes
        size, pos = len(out), self.pos
        # Each step takes at most 1 + 4 + 2*15 = 35 bits, so one 64-bit window read at the step's first byte
        # (at most 7 of its bits already used) holds all of it: one int.from_bytes per step, then shifts.
        while size < target:
            byte = pos >> 3
            window = from_bytes(stream[byte:byte + 8], "big")
            left = 64 - (pos & 7)  # bits of the window at and after pos
            head = (window >> (left - 5)) & 31  # the flag bit and the next four
            if head & 16:  # back-reference: w = the four bits
                w = head & 15
                step = 5 + 2 * w
                if pos + step > total_bits:
                    self.ended = True
                    break
                pair = (window >> (left - step)) & ((1 << (2 * w)) - 1)  # offset bits then length bits
                shift = 15 - w
                offset = rev[pair >> w] >> shift
                length = rev[pair & ((1 << w) - 1)] >> shift
                pos += step
                start = size - offset
                if offset == 0 or start < 0:
                    raise ValueError(f"corrupt BCFZ stream: a back-reference {offset} bytes back from byte {size:,}")
                if length <= offset:
                    out += out[start:start + length]
                else:  # the copy overlaps what it writes: the last `offset` bytes repeat
                    out += (out[start:] * (length // offset + 1))[:length]
                size += length
            else:  # literal run: n = the next two bits, lowest first
                n = _LITERALS[head >> 2]
                step = 3 + 8 * n
                if pos + step > total_bits:
                    self.ended = True
                    break
                if n:
                    out += ((window >> (left - step)) & ((1 << (8 * n)) - 1)).to_bytes(n, "big")
                pos += step
                size += n
        del out[self.expected:]
        self.pos = pos


class _Stored:
    """A BCFS file system given whole (a .gpx stored without compression), with _Expansion's interface."""

    def __init__(self, data: bytes):
        self.out, self.ended = data, False

    def grow(self, target: int) -> None:
        pass


def _entry(out, sector: int) -> tuple[str, int, list[int]]:
    """(name, size, sector numbers) of the file entry at `sector` of a BCFS image (magic included)."""
    at = 4 + sector * SECTOR
    name = bytes(out[at + 4:at + 0x84]).split(b"\0", 1)[0].decode("latin-1")
    size = struct.unpack_from("<i", out, at + 0x8C)[0]
    numbers = []
    end = min(at + SECTOR, len(out))
    for p in range(at + 0x94, end - 3, 4):
        number = struct.unpack_from("<i", out, p)[0]
        if number == 0 or len(numbers) * SECTOR >= max(0, size):
            break
        numbers.append(number)
    return name, size, numbers


def _content(out, name: str, size: int, numbers: list[int]) -> bytes:
    """A file's bytes: its sectors joined and cut to its size."""
    body = len(out) - 4
    if size < 0 or size > body:
        raise ValueError(f"BCFS entry {name!r} declares {size:,} bytes in a {body:,}-byte container "
                         "(truncated or corrupt)")
    for number in numbers:
        if number < 0 or number * SECTOR >= body:  # a last sector cut short is left to the size check
            raise ValueError(f"BCFS entry {name!r} points at sector {number}, past the container's "
                             f"{body // SECTOR + 1} sectors (truncated container)")
    content = b"".join(bytes(out[4 + k * SECTOR:4 + (k + 1) * SECTOR]) for k in numbers)
    if len(content) < size:
        raise ValueError(f"BCFS entry {name!r} holds {len(content):,} of its {size:,} bytes (truncated container)")
    return content[:size]


def _source(data: bytes):
    if data[:4] == b"BCFZ":
        return _Expansion(data)
    if data[:4] == b"BCFS":
        return _Stored(data)
    raise ValueError(f"not a Guitar Pro 6 container (starts with {data[:4]!r}, not BCFZ or BCFS)")


def _entries(source):
    """(sector, name, size, sector numbers) of each file entry, expanding the source as far as each one. Sectors
    that hold an earlier entry's data are not entries, whatever their first bytes say."""
    data_sectors: set[int] = set()
    sector = 1
    while True:
        source.grow(4 + (sector + 1) * SECTOR)
        out = source.out
        if out[:4] != b"BCFS":
            raise ValueError("the container holds no BCFS file system")
        if 4 + sector * SECTOR + 0x98 > len(out):
            return
        if sector not in data_sectors and struct.unpack_from("<i", out, 4 + sector * SECTOR)[0] == 2:
            name, size, numbers = _entry(out, sector)
            data_sectors.update(numbers)
            yield sector, name, size, numbers
        sector += 1


def gpx_file(data: bytes, wanted: str = "score.gpif", limit: int | None = None) -> bytes | None:
    """One file of a .gpx (BCFZ or BCFS), or None where the container holds no such file. A BCFZ stream is
    expanded only as far as that file's last sector. ValueError for a truncated or corrupt container; TooLarge
    where the file is bigger than `limit` bytes."""
    source = _source(data)
    for _, name, size, numbers in _entries(source):
        if name == wanted:
            if limit is not None and size > limit:
                raise TooLarge(size)
            if numbers:
                source.grow(4 + (max(numbers) + 1) * SECTOR)
            return _content(source.out, name, size, numbers)
    if source.ended:
        raise ValueError(f"the container ends before its {wanted} (truncated container)")
    return None


def gpx_files(data: bytes) -> dict[str, bytes]:
    """Every file inside a .gpx: BCFZ (compressed) or BCFS (stored)."""
    source = _source(data)
    found = list(_entries(source))
    source.grow(1 << 62)
    return {name: _content(source.out, name, size, numbers) for _, name, size, numbers in found}


def read_bcfs(data: bytes) -> dict[str, bytes]:
    """The files of a BCFS sector file system (magic included): name -> bytes."""
    return gpx_files(data)
