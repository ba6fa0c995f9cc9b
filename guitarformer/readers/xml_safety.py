"""XML and zip members from user files, unpacked within bounds and parsed safely whatever the platform's expat.

Entities (the "billion laughs" bomb, external entities) are refused by defusedxml rather than trusted to the
expat version Python was built with; a zip member is read only up to the bound its caller gives, whatever its
header declares, and a member that inflates past it is reported as the limit it broke."""

from __future__ import annotations

import zipfile
import zlib
from io import BytesIO
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from guitarformer.readers.limits import TooLarge

# Real scores deflate at most ~35:1 (XML); a member claiming far more is corrupt or a zip bomb.
ZIP_MAX_RATIO = 200


def parse_xml(data: bytes, name: str, what: str) -> Element:
    """The root element of `data` (the XML of `what` in file `name`). Raises ValueError naming the file for XML
    that is not well-formed or that declares entities (refused: they are how XML bombs work)."""
    try:
        return fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise ValueError(f"{name}: {what} declares XML entities ({type(e).__name__}); refused, as an entity can "
                         "expand without bound") from None
    except ParseError as e:
        raise ValueError(f"{name}: {what} is not well-formed XML ({e})") from None


def zip_member(data: bytes, pick, limit: int, name: str, what: str = "zip") -> tuple[str, bytes] | None:
    """(member name, bytes) of the first member of the zip `data` for which pick(member name) is true, None if
    none. Raises TooLarge when it declares or inflates to more than `limit` bytes, or more than ZIP_MAX_RATIO
    times the zip's size (at least 1 MB allowed); ValueError naming the file for a damaged zip (`what`)."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as zf:
            info = next((i for i in zf.infolist() if pick(i.filename)), None)
            if info is None:
                return None
            ratio_bound = max(1 << 20, ZIP_MAX_RATIO * len(data))
            bound = min(limit, ratio_bound)
            with zf.open(info) as f:
                # never more than the bound, whatever the header says
                out = f.read(bound + 1) if info.file_size <= bound else b""
            size = max(info.file_size, len(out))
            if size <= bound:
                return info.filename, out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, NotImplementedError,
            RuntimeError) as e:  # zlib.error: a flipped bit inside the deflated data
        raise ValueError(f"{name}: unreadable {what} ({type(e).__name__}: {e})") from None
    if size > limit:
        raise TooLarge(size)
    raise ValueError(f"{name}: {info.filename} inflates to more than {ratio_bound:,} bytes from a {len(data):,}-byte "
                     f"file (over {ZIP_MAX_RATIO}:1, which no real score reaches: a damaged zip or a zip bomb)")

