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
    stream = data[8:]
    total_bits = 8 * len(stream)
    stream += bytes(8)  # so an 8-byte window never runs past the end
    rev = _REV15
    from_bytes = int.from_bytes
    out = bytearray()
    size = 0  # len(out)
    pos = 0  # bit position in the stream
    # Each step takes at most 1 + 4 + 2*15 = 35 bits, so one 64-bit window read at the step's first byte
    # (at most 7 of its bits already used) holds all of it: one int.from_bytes per step, then shifts.
    while size < expected:
        byte = pos >> 3
        window = from_bytes(stream[byte:byte + 8], "big")
        left = 64 - (pos & 7)  # bits of the window at and after pos
        head = (window >> (left - 5)) & 31  # the flag bit and the next four
        if head & 16:  # back-reference: w = the four bits
            w = head & 15
            step = 5 + 2 * w
            if pos + step > total_bits:
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
                break
            if n:
                out += ((window >> (left - step)) & ((1 << (8 * n)) - 1)).to_bytes(n, "big")
            pos += step
            size += n
    del out[expected:]
    return bytes(out)


def read_bcfs(data: bytes) -> dict[str, bytes]:
    """The files of a BCFS sector file system (magic included): name -> bytes.

    Raises ValueError for a file entry whose sectors or size run past the data (a truncated container).
    """
    if data[:4] != b"BCFS":
        raise ValueError("the container holds no BCFS file system")
    body = memoryview(data)[4:]
    files: dict[str, bytes] = {}
    for sector in range(1, (len(body) - 0x98) // SECTOR + 1):
        at = sector * SECTOR
        if struct.unpack_from("<i", body, at)[0] != 2:
            continue
        raw_name = bytes(body[at + 4:at + 0x84])
        name = raw_name.split(b"\0", 1)[0].decode("latin-1")
        size = struct.unpack_from("<i", body, at + 0x8C)[0]
        if size < 0 or size > len(body):
            raise ValueError(f"BCFS entry {name!r} declares {size:,} bytes in a {len(body):,}-byte container "
                             "(truncated or corrupt)")
        parts = []
        p = at + 0x94
        got = 0
        while got < size and p + 4 <= min(at + SECTOR, len(body)):
            index = struct.unpack_from("<i", body, p)[0]
            if index == 0:
                break
            if index < 0 or index * SECTOR >= len(body):  # a last sector cut short is left to the size check
                raise ValueError(f"BCFS entry {name!r} points at sector {index}, past the container's "
                                 f"{len(body) // SECTOR + 1} sectors (truncated container)")
            parts.append(body[index * SECTOR:(index + 1) * SECTOR])
            got += SECTOR
            p += 4
        content = b"".join(parts)
        if len(content) < size:
            raise ValueError(f"BCFS entry {name!r} holds {len(content):,} of its {size:,} bytes "
                             "(truncated container)")
        files[name] = content[:size]
    return files


def gpx_files(data: bytes) -> dict[str, bytes]:
    """The files inside a .gpx: BCFZ (compressed) or BCFS (stored)."""
    if data[:4] == b"BCFZ":
        data = decompress(data)
    return read_bcfs(data)
