#!/usr/bin/env python3
"""An independent reader of an EventKernel store, written from Docs/FileFormat.md alone.

Python 3, standard library only: its own CRC32C, varints and LZ4 block decoder, nothing of
EventKernel's. It exists to keep the spec honest: SpecReaderTests (Tests/EventKernelToolTests)
runs it on fixture stores and compares its output with `eventkernel export` and the stores'
state, so a rule Docs/FileFormat.md states wrong makes that test fail.

    scripts/spec_reader.py STORE               one JSON object per event, as `eventkernel export`
                                               writes it (Docs/CLI.md, "Events of any entity type")
    scripts/spec_reader.py STORE --snapshots   one JSON object per snapshot file: its header, whether
                                               its anchor matches the log, and its state decoded
    scripts/spec_reader.py STORE --consumers   one JSON object per consumer checkpoint and parked file

What it checks: the store file; every segment's header and continuity (a position gap is
damage); every batch's header and payload CRC32C; each record's framing and envelope; the
index side files and checkpoint against the batches walked; every snapshot's two CRC32Cs,
lengths and name. An invalid batch followed by nothing but zeros is the end of the data; one in
the last segment with no valid batch header after it is a torn tail (noted: never acknowledged,
not part of the history); anything else is damage.

Exit status: 0 when every byte read decoded (notes on stderr: an empty segment, a torn tail, a
side file failing its CRC, payloads that are not self-describing, written as base64 as export
does); 3 when anything could not be decoded or a checksum failed (the message says what and
where; the events before it, or the other snapshots, were printed); 2 for bad usage.

Limits, by design: a payload is shown decoded only when the encoder would write the same bytes
for it, as export requires; this reader checks that by the canonical forms (shortest varints,
each key name defined once, decimals as parts when their significand fits 64 bits) rather than
by re-encoding. It decodes only the snapshot layouts a store restores ($entity-versions 5,
activities 2, repository 5); older ones are reported and exit 3. JSON is parsed by Python's
json module, which takes a key given twice where Swift's parser may not.
"""

import base64
import json
import math
import os
import re
import struct
import sys


class Damage(Exception):
    """Bytes the spec does not allow: the reader stops and exits 3."""


NOTES = []


def note(text):
    NOTES.append(text)
    print("spec_reader: note: " + text, file=sys.stderr)


# MARK: - Primitives (FileFormat.md, top)

def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


class Reader:
    """Bounds-checked reads; every failure names the place."""

    def __init__(self, data, where):
        self.data = data
        self.offset = 0
        self.where = where

    def fail(self, what, at=None):
        raise Damage("%s: %s at byte %d" % (self.where, what, self.offset if at is None else at))

    def remaining(self):
        return len(self.data) - self.offset

    def raw(self, n):
        if n < 0 or self.offset + n > len(self.data):
            self.fail("truncated (%d bytes needed, %d left)" % (n, self.remaining()))
        out = self.data[self.offset:self.offset + n]
        self.offset += n
        return bytes(out)

    def u8(self):
        return self.raw(1)[0]

    def fixed(self, fmt):
        return struct.unpack("<" + fmt, self.raw(struct.calcsize(fmt)))[0]

    def varint(self):
        start = self.offset
        value = 0
        for i in range(10):
            if self.offset >= len(self.data):
                self.fail("truncated varint", start)
            b = self.data[self.offset]
            self.offset += 1
            if i == 9 and b > 1:
                self.fail("varint larger than 64 bits", start)
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                return value
        self.fail("varint longer than 10 bytes", start)

    def zigzag(self):
        return unzigzag(self.varint())

    def string(self):
        n = self.varint()
        at = self.offset
        raw = self.raw(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("invalid UTF-8", at)

    def entity_id(self):
        """Tag first: the form inside snapshots."""
        at = self.offset
        tag = self.u8()
        if tag == 0:
            return ("uuid", uuid_text(self.raw(16)))
        if tag == 1:
            return ("string", self.string())
        self.fail("unknown entity id tag %d" % tag, at)

    def expect_end(self, what):
        if self.remaining():
            self.fail("%d byte(s) after %s" % (self.remaining(), what))


def unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def uuid_text(b):
    h = b.hex().upper()
    return "%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def lz4_block_decompress(src, size, where):
    """The LZ4 block format (FileFormat.md, "The LZ4 block format"), to exactly `size` bytes."""
    out = bytearray()
    i, n = 0, len(src)

    def length(nibble):
        nonlocal i
        if nibble != 15:
            return nibble
        total = 15
        while True:
            if i >= n:
                raise Damage("%s: LZ4 length runs past the block" % where)
            b = src[i]
            i += 1
            total += b
            if b != 255:
                return total

    while True:
        if i >= n:
            raise Damage("%s: LZ4 block ends without its last literals" % where)
        token = src[i]
        i += 1
        literals = length(token >> 4)
        if i + literals > n:
            raise Damage("%s: LZ4 literals run past the block" % where)
        out += src[i:i + literals]
        i += literals
        if i == n:
            break
        if i + 2 > n:
            raise Damage("%s: LZ4 match offset truncated" % where)
        offset = src[i] | src[i + 1] << 8
        i += 2
        if offset == 0 or offset > len(out):
            raise Damage("%s: LZ4 match offset %d beyond the %d bytes written" % (where, offset, len(out)))
        match = length(token & 15) + 4
        start = len(out) - offset
        for k in range(match):  # may overlap what it writes
            out.append(out[start + k])
        if len(out) > size:
            break
    if len(out) != size:
        raise Damage("%s: LZ4 block decompressed to %d bytes, expected %d" % (where, len(out), size))
    return bytes(out)


# MARK: - JSON text as export writes it

def jstr(s):
    return json.dumps(s, ensure_ascii=False)


def jnum_double(d):
    """A finite double as JSON that always shows it is one (a `.` or an exponent)."""
    text = repr(d)
    return text if ("." in text or "e" in text) else text + ".0"


def shortest_float32(bits):
    """A finite Float's shortest decimal that reads back as the same Float, as a JSON number."""
    f = struct.unpack("<f", struct.pack("<I", bits))[0]
    for p in range(1, 10):
        text = "%.*g" % (p, f)
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == f:
            break
    return jnum_double(float(text))


def write_json(value):
    """Values are ('raw', text) for numbers written verbatim, dicts as lists of pairs."""
    if isinstance(value, tuple) and value[0] == "raw":
        return value[1]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return jstr(value)
    if isinstance(value, Obj):
        return "{" + ",".join(jstr(k) + ":" + write_json(v) for k, v in value.pairs) + "}"
    if isinstance(value, list):
        return "[" + ",".join(write_json(v) for v in value) + "]"
    raise TypeError(value)


class Obj:
    def __init__(self, pairs):
        self.pairs = pairs


# MARK: - Dates (ISO 8601, UTC)

REFERENCE_1970 = 978_307_200  # 2001-01-01T00:00:00Z in seconds since 1970


def tdiv(a, b):
    """Integer division truncating toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def civil_from_days(z0):
    z = z0 + 719_468
    era = tdiv(z if z >= 0 else z - 146_096, 146_097)
    doe = z - era * 146_097
    yoe = tdiv(doe - tdiv(doe, 1460) + tdiv(doe, 36524) - tdiv(doe, 146_096), 365)
    y = yoe + era * 400
    doy = doe - (365 * yoe + tdiv(yoe, 4) - tdiv(yoe, 100))
    mp = tdiv(5 * doy + 2, 153)
    d = doy - tdiv(153 * mp + 2, 5) + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y, m, d)


def format_seconds(whole, fraction):
    days = math.floor(whole / 86_400)
    secs = whole - days * 86_400
    y, m, d = civil_from_days(days)
    year = str(y) if (y < 0 or y > 9999) else "%04d" % y
    return "%s-%02d-%02dT%02d:%02d:%02d%sZ" % (year, m, d, secs // 3600, secs // 60 % 60, secs % 60, fraction)


def shortest_fraction(value):
    text = repr(value)  # shortest round trip, "0.25" or "5e-05"
    if "e" not in text:
        return text[text.index("."):]
    mantissa, exponent = text.split("e")
    return "." + "0" * max(0, -int(exponent) - 1) + mantissa.replace(".", "")


def fewest_fraction(r, whole_ref):
    """The fewest fraction digits (".ddd") that a reader turns back into r: the whole seconds
    plus the fraction's correctly rounded value. For k digits the nearest k-digit candidates
    are tried (n / 10**k is correctly rounded for n < 10**15, as a reader's parse is); beyond
    15 digits, the fraction's own shortest form (exact, since whole + fraction is r)."""
    frac = r - whole_ref
    scale = 1.0
    for digits in range(1, 16):
        scale *= 10
        # Rounded half away from zero, as the tool rounds (Python's round() halves to even).
        x = frac * scale
        nearest = math.floor(x)
        if x - nearest >= 0.5:
            nearest += 1
        for n in (nearest, nearest - 1, nearest + 1):
            if 1 <= n < scale and whole_ref + n / scale == r:
                return ("." + ("%0*d" % (digits, n))).rstrip("0")
    return shortest_fraction(frac)


def format_date_text(r):
    """A date (seconds since 2001, a double) with the fewest fraction digits that give its
    double back; and whether parsing the text gives exactly that double again."""
    if not math.isfinite(r) or abs(r) >= 1e15:
        return "invalid", False
    whole_ref = math.floor(r)
    frac = r - whole_ref
    fraction = fewest_fraction(r, float(whole_ref)) if frac > 0 else ""
    text = format_seconds(int(whole_ref) + REFERENCE_1970, fraction)
    # Parsed back as a reader of the text does: the whole seconds, plus the fraction.
    back = float(int(whole_ref)) + (float("0" + fraction) if fraction else 0.0)
    return text, struct.pack("<d", back) == struct.pack("<d", r)


def format_date(r):
    text, exact = format_date_text(r)
    return text if exact else None


def format_timestamp(nanos):
    whole = nanos // 1_000_000_000
    rest = nanos - whole * 1_000_000_000
    fraction = ""
    if rest:
        fraction = ("." + "%09d" % rest).rstrip("0")
    return format_seconds(whole, fraction)


def nonfinite_text(d, bits):
    if math.isnan(d):
        return "nan" if bits == 0x7FF8000000000000 else "nan:%016x" % bits
    return "-inf" if d < 0 else "inf"


def date_json(bits):
    r = struct.unpack("<d", struct.pack("<Q", bits))[0]
    text = format_date(r)
    if text is not None:
        return Obj([("$date", text)])
    if math.isfinite(r):
        return Obj([("$date", ("raw", jnum_double(r)))])
    return Obj([("$date", nonfinite_text(r, bits))])


# MARK: - The binary entity format

MAX_DEPTH = 512


def decimal_text(negative, significand, exponent):
    """Decimal's text: the value without trailing zeros in its significand."""
    if significand == 0:
        return "0"
    while significand % 10 == 0:
        significand //= 10
        exponent += 1
    digits = str(significand)
    if exponent >= 0:
        text = digits + "0" * exponent
    elif -exponent >= len(digits):
        text = "0." + "0" * (-exponent - len(digits)) + digits
    else:
        text = digits[:exponent] + "." + digits[exponent:]
    return ("-" if negative else "") + text


DECIMAL_TEXT = re.compile(r"^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$")


class BinaryPayload:
    """Reads one payload (0xFF, one value) into a tree; `canonical` says whether the encoder
    would write the same bytes for that tree (as export requires before showing it decoded)."""

    def __init__(self, data, where):
        self.r = Reader(data, where)
        self.keys = []
        self.canonical = True
        self.why = None

    def otherwise(self, why):
        if self.canonical:
            self.canonical, self.why = False, why

    def varint(self):
        start = self.r.offset
        v = self.r.varint()
        if self.r.offset - start != max(1, (v.bit_length() + 6) // 7):
            self.otherwise("a varint is not in its shortest form")
        return v

    def length(self):
        return self.varint()

    def string(self):
        n = self.length()
        at = self.r.offset
        raw = self.r.raw(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.r.fail("invalid UTF-8", at)

    def decode(self):
        if self.r.u8() != 0xFF:
            self.r.fail("not a binary entity payload", 0)
        value = self.value(0)
        self.r.expect_end("the value")
        return value

    def value(self, depth):
        r = self.r
        if depth >= MAX_DEPTH:
            r.fail("nesting deeper than %d" % MAX_DEPTH)
        at = r.offset
        tag = r.u8()
        if tag == 0x00:
            return None
        if tag in (0x01, 0x02):
            return tag == 0x02
        if tag == 0x03:
            return unzigzag(self.varint())
        if tag == 0x04:
            return Obj([("$uint", self.varint())])
        if tag == 0x05:
            bits = r.fixed("Q")
            d = struct.unpack("<d", struct.pack("<Q", bits))[0]
            return ("raw", jnum_double(d)) if math.isfinite(d) else Obj([("$double", nonfinite_text(d, bits))])
        if tag == 0x06:
            bits = r.fixed("I")
            f = struct.unpack("<f", struct.pack("<I", bits))[0]
            if math.isfinite(f):
                return Obj([("$float", ("raw", shortest_float32(bits)))])
            if math.isnan(f):
                return Obj([("$float", "nan" if bits == 0x7FC00000 else "nan:%08x" % bits)])
            return Obj([("$float", "-inf" if f < 0 else "inf")])
        if tag == 0x07:
            return self.string()
        if tag == 0x08:
            return Obj([("$uuid", uuid_text(r.raw(16)))])
        if tag == 0x09:
            return date_json(r.fixed("Q"))
        if tag == 0x0A:
            return Obj([("$data", base64.b64encode(r.raw(self.length())).decode())])
        if tag == 0x0D:
            text = self.string()
            if text == "NaN":
                self.otherwise("a NaN decimal as text (the encoder writes NaN as parts)")
                return Obj([("$decimal", "NaN")])
            m = DECIMAL_TEXT.match(text)
            if not m:
                r.fail("invalid decimal %r" % text, at)
            digits = (m.group(2) + (m.group(3) or "")).lstrip("0") or "0"
            exponent = int(m.group(4) or 0) - len(m.group(3) or "")
            significand = int(digits)
            shown = decimal_text(m.group(1) == "-" and significand != 0, significand, exponent)
            if significand < 1 << 64 or shown != text:
                self.otherwise("a decimal as text that the encoder writes as its parts or as other text")
            return Obj([("$decimal", shown)])
        if tag == 0x10:
            flags = r.u8()
            exponent = unzigzag(self.varint())
            significand = self.varint()
            if flags == 2 and exponent == 0 and significand == 0:
                return Obj([("$decimal", "NaN")])
            if flags & ~1 or (flags == 1 and significand == 0) or not -128 <= exponent <= 127:
                r.fail("invalid decimal (flags %d, exponent %d)" % (flags, exponent), at)
            return Obj([("$decimal", decimal_text(flags == 1, significand, exponent))])
        if tag == 0x0E:
            return Obj([("$url", self.string())])
        if tag == 0x0B:
            pairs, seen = [], set()
            while True:
                ref_at = r.offset
                ref = self.varint()
                if ref == 0:
                    break
                if ref == 1:
                    name = self.string()
                    if name in self.keys:
                        r.fail("key %r defined twice" % name, ref_at)
                    self.keys.append(name)
                else:
                    if ref - 2 >= len(self.keys):
                        r.fail("key reference %d before its definition" % (ref - 2), ref_at)
                    name = self.keys[ref - 2]
                if name in seen:
                    r.fail("key %r twice in one keyed container" % name, at)
                seen.add(name)
                pairs.append((name, self.value(depth + 1)))
            if len(pairs) == 1 and pairs[0][0].startswith("$"):
                return Obj([("$object", Obj(pairs))])
            return Obj(pairs)
        if tag == 0x0C:
            values = []
            while True:
                if r.remaining() == 0:
                    r.fail("unterminated list")
                if r.data[r.offset] == 0x0F:
                    r.offset += 1
                    return values
                values.append(self.value(depth + 1))
        r.fail("unknown tag 0x%02x" % tag, at)


def strict_json(data):
    def constant(name):
        raise ValueError(name)
    return json.loads(data.decode("utf-8"), parse_constant=constant)


def payload_json(payload, where):
    """(codec, data, base64/reason or None, damaged): an event payload as export shows it."""
    if not payload:
        return "none", None, None, False
    if payload[0] == 0xFF:
        reader = BinaryPayload(payload, where)
        try:
            tree = reader.decode()
        except Damage as e:
            return "bytes", None, "binary entity payload does not decode: %s" % e, True
        if not reader.canonical:
            return "bytes", None, "decodes as the binary entity format, but the encoder writes that value otherwise (%s)" % reader.why, False
        return "binary", tree, None, False
    try:
        strict_json(payload)
    except (ValueError, UnicodeDecodeError):
        return "bytes", None, "not self-describing (neither the binary entity format nor JSON: a payload codec's bytes?)", False
    if b"\n" in payload or b"\r" in payload:
        return "bytes", None, "JSON payload spans several lines", False
    if payload[:1] in (b" ", b"\t") or payload[-1:] in (b" ", b"\t"):
        return "bytes", None, "JSON payload with whitespace before or after the value", False
    return "json", ("raw", payload.decode("utf-8")), None, False


# MARK: - The store: segments, batches, records

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def read_store_file(directory):
    path = os.path.join(directory, "eventkernel.store")
    if not os.path.exists(path):
        note("no eventkernel.store (a store from before it existed): history epoch 0")
        return 0
    data = open(path, "rb").read()
    where = "eventkernel.store"
    if len(data) != 28:
        raise Damage("%s: %d bytes, not 28" % (where, len(data)))
    if data[0:8] != b"EKSTORE1":
        raise Damage("%s: bad magic" % where)
    if struct.unpack_from("<I", data, 24)[0] != crc32c(data[0:24]):
        raise Damage("%s: checksum mismatch at byte 24" % where)
    version, flags, epoch = struct.unpack_from("<IIQ", data, 8)
    if version not in (1, 2):
        raise Damage("%s: unsupported format version %d" % (where, version))
    if (version == 2) != (flags != 0):
        raise Damage("%s: format version %d with flags %d (version 2 exactly when a flag is set)" % (where, version, flags))
    if flags & ~1:
        raise Damage("%s: unknown flags %d at byte 12 (bit 0, sparse batches, is the only one defined): "
                     "a newer format than this reader" % (where, flags))
    return epoch


def batch_header(data, offset, expected, where):
    """The batch header at `offset` (rules 1-5 of FileFormat.md), or (None, why)."""
    if len(data) - offset < 64:
        return None, "batch header truncated by the end of the file (%d of 64 bytes)" % (len(data) - offset)
    h = data[offset:offset + 64]
    if h == bytes(64):
        return None, "zeros"
    magic, version, codec, flags, first, count, stored, uncompressed, pcrc, tmin, tmax = \
        struct.unpack_from("<IHBBQIIIIqq", h, 0)
    if magic != 0x31424B45:
        return None, "bad batch magic 0x%08x" % magic
    if struct.unpack_from("<I", h, 60)[0] != crc32c(h[0:60]):
        return None, "batch header checksum mismatch"
    if version != 1 or codec not in (0, 1) or flags not in (0, 1):
        return None, "batch version %d, codec %d, flags %d" % (version, codec, flags)
    sparse = flags == 1
    # A sparse batch (compaction's) covers `span` positions and holds `count` of them.
    span = struct.unpack_from("<I", h, 48)[0] if sparse else count
    if (count < 1 and not sparse) or (sparse and (span < 1 or count > span)):
        return None, "invalid batch header fields (record count %d, position count %d)" % (count, span)
    if stored > 1 << 30 or uncompressed > 1 << 30 or (codec == 0 and stored != uncompressed) or tmin > tmax:
        return None, "invalid batch header fields"
    if first != expected:
        return None, "batch starts at position %d, expected %d" % (first, expected)
    if offset + 64 + stored > len(data):
        return None, "batch of %d bytes runs past the end of the file" % (64 + stored)
    payload = data[offset + 64:offset + 64 + stored]
    if crc32c(payload) != pcrc:
        return None, "payload checksum mismatch"
    return (codec, first, count, stored, uncompressed, tmin, payload, tmax, sparse, span), None


def valid_header_after(data, offset, expected):
    """Where a valid batch header (rules 1-3) for a position at or after `expected` follows
    `offset`, or None."""
    at = data.find(b"EKB1", offset + 1)
    while at != -1 and at + 64 <= len(data):
        first = struct.unpack_from("<Q", data, at + 8)[0]
        # Rule 4 asks for exactly the expected position; here any later one will do.
        if first >= expected and batch_header(data[:at + 64], at, first, "")[1] in (
                None, "batch of %d bytes runs past the end of the file" % (64 + struct.unpack_from("<I", data, at + 20)[0])):
            return at
        at = data.find(b"EKB1", at + 1)
    return None


def acknowledged_beyond(directory, epoch, position):
    """A snapshot of the current history epoch covering more than `position` records (then
    what ends the log there was acknowledged: damage, not a torn tail), by its header alone."""
    folder = os.path.join(directory, "snapshots")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith(".") or not name.endswith(".snap"):
            continue
        data = open(os.path.join(folder, name), "rb").read(64 + 65_535)
        if len(data) < 12 or data[:4] != b"EKSN" or struct.unpack_from("<H", data, 4)[0] != 2:
            continue
        n = struct.unpack_from("<H", data, 10)[0]
        if len(data) < 64 + n or struct.unpack_from("<I", data, 60 + n)[0] != crc32c(data[:60 + n]):
            continue  # a header failing its checks says nothing
        next_position, snapshot_epoch = struct.unpack_from("<QQ", data, 12 + n)
        if snapshot_epoch == epoch and next_position > position:
            return name
    return None


def records(directory, epoch=None):
    """Yields (position, timestamp ns, payload) of every record of every segment, in order."""
    names = sorted(n for n in os.listdir(directory) if SEGMENT_NAME.match(n))
    if not names:
        note("the store has no segment: no events")
    expected = None
    for index, name in enumerate(names):
        last = index == len(names) - 1
        data = open(os.path.join(directory, name), "rb").read()
        base = int(name[:20])
        if len(data) < 32 or data[0:8] != b"EKLOGSEG":
            raise Damage("%s: not a segment (bad magic or shorter than its 32-byte header)" % name)
        if struct.unpack_from("<I", data, 28)[0] != crc32c(data[0:28]):
            raise Damage("%s: segment header checksum mismatch at byte 28" % name)
        version, length, header_base = struct.unpack_from("<IIQ", data, 8)
        if version != 1 or length != 32:
            raise Damage("%s: segment version %d, header length %d" % (name, version, length))
        if header_base != base:
            raise Damage("%s: header says base position %d, its name %d" % (name, header_base, base))
        if expected is not None and base != expected:
            raise Damage("%s: position gap: the segment starts at %d, but the previous one ends at %d" % (name, base, expected))
        expected = base
        offset, batches = 32, []
        while offset < len(data):
            header, why = batch_header(data, offset, expected, name)
            if header is None:
                if data[offset:].count(0) == len(data) - offset:
                    break  # preallocated space: the end of the data
                later = valid_header_after(data, offset, expected)
                if later is not None or not last:
                    raise Damage("%s: %s at byte %d (position %d)%s" % (
                        name, why, offset, expected,
                        "; a valid batch follows at byte %d: damage, not a torn write" % later if later is not None
                        else "; a sealed segment holds no torn tail"))
                snapshot = acknowledged_beyond(directory, epoch, expected) if epoch is not None else None
                if snapshot is not None:
                    raise Damage("%s: %s at byte %d (position %d), but snapshots/%s covers positions beyond it in the same "
                                 "history epoch: acknowledged events are damaged, not a torn write" % (name, why, offset, expected, snapshot))
                note("%s: torn tail at byte %d: %d byte(s) after position %d are not a whole batch (%s); "
                     "an unacknowledged write cut short, not part of the history" % (name, offset, len(data) - offset, expected, why))
                break
            codec, first, count, stored, uncompressed, tmin, payload, _, sparse, span = header
            where = "%s batch at byte %d" % (name, offset)
            body = lz4_block_decompress(payload, uncompressed, where) if codec == 1 else payload
            r = Reader(body, where + " (uncompressed payload)")
            position = first
            for i in range(count):
                if sparse:
                    gap = r.varint()
                    if gap >= first + span - position:
                        r.fail("record %d of the sparse batch lies past its %d positions" % (i, span))
                    position += gap
                delta = r.varint()
                size = r.varint()
                record = r.raw(size)
                nanos = (tmin + delta) & 0xFFFFFFFFFFFFFFFF
                if nanos >= 1 << 63:
                    nanos -= 1 << 64
                yield position, nanos, record
                position += 1
            r.expect_end("the batch's %d records" % count)
            batches.append((first, span, 64 + stored, offset, tmin, header[7]))
            expected = first + span
            offset += 64 + stored
        if not batches:
            note("%s: empty segment (no batch; base position %d)" % (name, base))
        check_side_files(directory, name[:20], base, expected, batches, len(data), last)


def read_side_file(path):
    """An index side file or checkpoint: (base, next, data length, entries), or None when its
    magic, version or CRC32C fails (derived data gone bad: a store ignores and rebuilds it)."""
    data = open(path, "rb").read()
    if len(data) < 44 or data[0:8] != b"EKINDEX1" or struct.unpack_from("<I", data, 8)[0] != 1:
        return None
    n = struct.unpack_from("<I", data, 12)[0]
    if len(data) != 44 + 40 * n or struct.unpack_from("<I", data, 40 + 40 * n)[0] != crc32c(data[:40 + 40 * n]):
        return None
    base, next_position, length = struct.unpack_from("<QQQ", data, 16)
    entries = [struct.unpack_from("<QIIQqq", data, 40 + 40 * i) for i in range(n)]
    return base, next_position, length, entries


def check_side_files(directory, stem, base, next_position, batches, size, last):
    """The segment's `.idx` (it lists every batch) and `.ckpt` (a prefix of them) must say what
    the walk found: a store trusts a valid one instead of reading the segment."""
    for suffix in (".idx", ".ckpt"):
        path = os.path.join(directory, stem + suffix)
        if not os.path.exists(path):
            continue
        side = read_side_file(path)
        if side is None:
            note("%s: fails its checks (derived data: a store ignores it and walks the segment)" % (stem + suffix))
            continue
        side_base, side_next, length, entries = side
        whole = suffix == ".idx"
        listed = batches if whole else batches[:len(entries)]
        problems = []
        if side_base != base:
            problems.append("base position %d, the segment's is %d" % (side_base, base))
        if [tuple(e) for e in entries] != listed:
            problems.append("its %d batch entries are not the segment's first %d batches" % (len(entries), len(entries)))
        end = entries[-1][3] + entries[-1][2] if entries else 32
        if (whole and (side_next != next_position or length != size)) or length != end or length > size:
            problems.append("next position %d and data length %d, the segment holds %d and %d bytes" % (side_next, length, next_position, size))
        if problems:
            raise Damage("%s: %s" % (stem + suffix, "; ".join(problems)))


# MARK: - Envelopes

def envelope(payload, position):
    where = "record at position %d" % position
    r = Reader(payload, where)
    version = r.u8()
    if version not in (1, 2, 3):
        r.fail("unknown envelope format %d" % version, 0)
    event_type = r.string()
    schema = r.varint()
    if schema > 0xFFFF:
        r.fail("schema version %d beyond 16 bits" % schema)
    leading = r.entity_id() if version < 3 else None
    stream_version = r.varint()
    flags_at = r.offset
    flags = r.u8()
    known = 3 if version == 1 else 7
    if flags & ~known:
        r.fail("unknown flags %d" % flags, flags_at)
    if flags & 4:
        entity_type = r.string()
    else:
        entity_type = event_type[:event_type.rindex(".")] if "." in event_type else event_type
    correlation = r.string() if flags & 1 else None
    actor = r.string() if flags & 2 else None
    header_end = r.offset
    if leading is not None:
        entity, end = leading, len(payload)
    else:
        if len(payload) <= header_end:
            r.fail("no entity id trailer", len(payload))
        tag = payload[-1]
        if tag == 0:
            if len(payload) - 1 - header_end < 16:
                r.fail("UUID trailer truncated", header_end)
            entity, end = ("uuid", uuid_text(payload[-17:-1])), len(payload) - 17
        elif tag == 1:
            if len(payload) - 1 - header_end < 4:
                r.fail("string id trailer truncated", header_end)
            n = struct.unpack_from("<I", payload, len(payload) - 5)[0]
            end = len(payload) - 5 - n
            if end < header_end:
                r.fail("string id of %d bytes runs into the header" % n, header_end)
            try:
                entity = ("string", payload[end:len(payload) - 5].decode("utf-8"))
            except UnicodeDecodeError:
                r.fail("invalid UTF-8 in the entity id", end)
        else:
            r.fail("unknown entity id trailer %d" % tag, len(payload) - 1)
    return dict(event=event_type, schema=schema, type=entity_type, id=entity, version=stream_version,
                correlation=correlation, actor=actor, payload=payload[header_end:end])


def metadata_pairs(env):
    parts = []
    if env["correlation"] is not None:
        parts.append(("correlationID", env["correlation"]))
    if env["actor"] is not None:
        parts.append(("actor", env["actor"]))
    return [("metadata", Obj(parts))] if parts else []


# MARK: - Activities

ACTIVITY_EVENTS = ("activity.added", "activity.updated", "activity.ended", "activity.deleted")
TOMBSTONES = ("$deleted", "$purged")


def activity_date(r, schema, whole):
    if whole:
        return float(r.zigzag())
    d = struct.unpack("<d", r.raw(8))[0]
    return d - REFERENCE_1970 if schema == 1 else d


def iso(r):
    return format_date_text(r)[0]


def activity_event(env, position):
    """The activity event as export writes it (the pairs after recordedAt)."""
    where = "activity event at position %d" % position
    if env["id"][0] != "uuid":
        raise Damage("%s: the entity id %s is not a UUID" % (where, env["id"][1]))
    schema = env["schema"]
    if not 1 <= schema <= 3:
        raise Damage("%s: schema version %d is unknown" % (where, schema))
    r = Reader(env["payload"], where)
    name = env["event"]

    def flags(allowed):
        at = r.offset
        f = r.u8()
        if f & ~allowed:
            r.fail("unknown activity flags %d" % f, at)
        return f

    ident = env["id"][1]
    if name in ("activity.added", "activity.updated"):
        kind = type_name = None
        if schema >= 3:
            type_name = r.string()
        f = flags(7 if schema >= 3 else 1)
        start = activity_date(r, schema, f & 2)
        end = None
        if f & 1:
            end = start + float(r.varint()) if f & 4 else activity_date(r, schema, False)
        if type_name is None:
            type_name = r.string()
        r.expect_end("the activity")
        model = Obj([("id", ident), ("startDate", iso(start)), ("endDate", iso(end) if end is not None else None), ("type", type_name)])
        return [("event", name.split(".")[1]), ("activity", model)]
    if name == "activity.ended":
        whole = flags(2) & 2 if schema >= 3 else 0
        at = activity_date(r, schema, whole)
        r.expect_end("the date")
        return [("event", "ended"), ("id", ident), ("at", iso(at))]
    if name == "activity.deleted":
        r.expect_end("a delete")
        return [("event", "deleted"), ("id", ident)]
    raise Damage("%s: unknown activity event type %r" % (where, name))


# MARK: - Events as export writes them

def event_lines(directory, epoch):
    damaged = 0
    for position, nanos, payload in records(directory, epoch):
        env = envelope(payload, position)
        head = [("position", position), ("recordedAt", format_timestamp(nanos))]
        # A kernel tombstone ($deleted, $purged) of any stream, an activity's too, is written
        # as the event line of the kernel's event it is (Docs/FileFormat.md, "Tombstone events").
        if env["type"] == "activity" and env["event"] not in TOMBSTONES:
            try:
                yield write_json(Obj(head + activity_event(env, position) + metadata_pairs(env)))
                continue
            except Damage as e:
                codec, data, reason, bad = "bytes", None, "activity event does not decode: %s" % e, True
        else:
            codec, data, reason, bad = payload_json(env["payload"], "payload at position %d" % position)
        kind, ident = env["id"]
        pairs = head + [
            ("stream", Obj([("type", env["type"]), ("id", ident), ("idType", kind)])),
            ("version", env["version"]), ("event", env["event"]), ("schemaVersion", env["schema"]),
            ("codec", codec), ("data", data)]
        if codec == "bytes":
            pairs += [("base64", base64.b64encode(env["payload"]).decode()), ("reason", reason)]
            if bad:
                damaged += 1
                print("spec_reader: error: position %d (%s/%s, %s): %s" % (position, env["type"], ident, env["event"], reason), file=sys.stderr)
            else:
                note("position %d (%s/%s, %s): %s" % (position, env["type"], ident, env["event"], reason))
        yield write_json(Obj(pairs + metadata_pairs(env)))
    if damaged:
        raise Damage("%d event payload(s) do not decode (written as base64 with a reason)" % damaged)


# MARK: - Snapshots

SNAPSHOT_NAME = re.compile(r"^(\d{20})-([0-9a-f]*)\.snap$")


def snapshot_name_hex(projection):
    """The file name's hex of a projection name: whole up to 64 bytes, else the first 56 bytes
    and the FNV-1a 64-bit hash of all of them."""
    raw = projection.encode("utf-8")
    if len(raw) <= 64:
        return raw.hex()
    h = 0xcbf29ce484222325
    for byte in raw:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return raw[:56].hex() + "%016x" % h


def snapshot_file(path, name):
    data = open(path, "rb").read()
    r = Reader(data, "snapshots/" + name)
    if r.raw(4) != b"EKSN":
        r.fail("bad magic", 0)
    version = r.fixed("H")
    if version not in (1, 2):
        r.fail("unknown format version %d" % version, 4)
    codec = r.u8()
    if codec > 1:
        r.fail("unknown body codec %d" % codec, 6)
    if r.u8() != 0:
        r.fail("reserved header byte is not 0", 7)
    schema = r.fixed("H")
    projection = r.raw(r.fixed("H")).decode("utf-8")
    next_position = r.fixed("Q")
    epoch = anchor_ts = anchor_crc = None
    if version == 2:
        epoch, anchor_ts, anchor_crc = r.fixed("Q"), r.fixed("q"), r.fixed("I")
    uncompressed, stored, body_crc = r.fixed("Q"), r.fixed("Q"), r.fixed("I")
    header_end = r.offset
    if r.fixed("I") != crc32c(data[:header_end]):
        r.fail("header checksum mismatch", header_end)
    if stored != r.remaining():
        r.fail("stored length %d but %d byte(s) follow the header" % (stored, r.remaining()))
    body = r.raw(stored)
    if crc32c(body) != body_crc:
        r.fail("body checksum mismatch", header_end + 4)
    if uncompressed > 2_113_929_216:
        r.fail("uncompressed length %d too large" % uncompressed)
    if codec == 1:
        body = lz4_block_decompress(body, uncompressed, r.where)
    elif uncompressed != stored:
        r.fail("an uncompressed body with differing lengths")
    expected_name = "%020d-%s.snap" % (next_position, snapshot_name_hex(projection))
    spelled = "%020d-%s.snap" % (next_position, projection.encode("utf-8").hex())
    if name != expected_name and not (len(projection.encode("utf-8")) > 64 and name == spelled):
        raise Damage("snapshots/%s: its header says %s" % (name, expected_name))
    head = [("file", name), ("projection", projection), ("schemaVersion", schema), ("format", version),
            ("codec", codec), ("nextPosition", next_position)]
    if version == 2:
        head += [("historyEpoch", epoch),
                 ("anchor", Obj([("recordedAt", format_timestamp(anchor_ts)), ("payloadCRC32C", anchor_crc)]) if next_position else None)]
    return projection, schema, body, head, (version, next_position, anchor_ts, anchor_crc)


def anchor_records(directory):
    """Every record's (timestamp, CRC32C of its payload), by position."""
    return {position: (nanos, crc32c(payload)) for position, nanos, payload in records(directory)}


def anchor_before(anchors, position):
    """The anchor of the last record below `position`: the one at position - 1 unless
    compaction removed it (a gap), then the last one before it."""
    below = [p for p in anchors if p < position]
    return anchors[max(below)] if below else None


def entity_versions(body, where):
    r = Reader(body, where)
    excluded = [r.string() for _ in range(r.varint())]
    types = [r.string() for _ in range(r.varint())]
    entries = []
    for _ in range(r.varint()):
        at = r.offset
        code = r.varint()
        if code >= len(types):
            r.fail("entity type %d of %d" % (code, len(types)), at)
        kind, ident = r.entity_id()
        entries.append(Obj([("type", types[code]), ("id", ident), ("idType", kind), ("version", r.varint())]))
    # The purged section (a count, possibly 0), then the forgotten section: the SHA-256
    # digests of the purged streams compaction removed.
    purged = []
    for _ in range(r.varint()):
        type_name = r.string()
        kind, ident = r.entity_id()
        purged.append(Obj([("type", type_name), ("id", ident), ("idType", kind), ("position", r.varint())]))
    forgotten = [r.raw(16).hex() for _ in range(r.varint())]
    r.expect_end("the entries")
    return [("leftOut", excluded), ("streams", entries), ("purged", purged), ("forgotten", forgotten)]


def repository(body, where, type_name):
    r = Reader(body, where)
    entity_schema = r.varint()
    count = r.varint()
    if count > r.remaining():
        r.fail("%d entities in %d bytes" % (count, r.remaining()))
    next_sequence = r.varint()
    heads, sequence = [], 0
    for _ in range(count):
        ident = r.entity_id()
        version = r.varint()
        sequence += r.varint()
        heads.append((ident, version, sequence))
    deleted = []
    for _ in range(r.varint()):
        kind, ident = r.entity_id()
        deleted.append(Obj([("id", ident), ("idType", kind), ("version", r.varint())]))
    indexes = []
    for _ in range(r.varint()):
        name = r.string()
        order = []
        for _ in range(count):
            at = r.offset
            ordinal = r.varint()
            if ordinal >= count:
                r.fail("index ordinal %d of %d" % (ordinal, count), at)
            order.append(ordinal)
        if sorted(order) != list(range(count)):
            r.fail("index %r is not an order of the %d entities" % (name, count))
        indexes.append(Obj([("name", name), ("order", [heads[i][0][1] for i in order])]))
    parts = []
    for _ in range(r.varint()):
        parts.append(r.raw(r.varint()))
    r.expect_end("the parts")
    states = []
    for number, part in enumerate(parts):
        part_where = "%s part %d" % (where, number)
        if part[:1] == b"\xff":
            reader = BinaryPayload(part, part_where)
            value = reader.decode()
            if not isinstance(value, list):
                raise Damage("%s: not an unkeyed container of entities" % part_where)
            states += value
        elif part[:1] == b"[":
            states += [("raw", json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in strict_json(part)]
        else:
            # A payload codec's part: a count, then each payload after its length; not self-describing.
            pr = Reader(part, part_where)
            for _ in range(pr.varint()):
                states.append(Obj([("base64", base64.b64encode(pr.raw(pr.varint())).decode())]))
            pr.expect_end("the payloads")
    if len(states) != count:
        raise Damage("%s: %d entity heads but %d entities in the parts" % (where, count, len(states)))
    entities = [Obj([("id", ident[1]), ("idType", ident[0]), ("version", version), ("sequence", seq), ("state", state)])
                for (ident, version, seq), state in zip(heads, states)]
    return [("type", type_name), ("entitySchemaVersion", entity_schema), ("nextSequence", next_sequence),
            ("entities", entities), ("deleted", deleted), ("indexes", indexes)]


def activity_checksum(data):
    mask = (1 << 64) - 1
    p = 0x9FB21C651E98DF25
    h = 0x9E3779B97F4A7C15 ^ len(data)
    i = 0
    while i + 8 <= len(data):
        w = struct.unpack_from("<Q", data, i)[0]
        h = ((h ^ w) * p) & mask
        h = ((h << 29) | (h >> 35)) & mask
        i += 8
    tail = int.from_bytes(data[i:], "little")
    h = ((h ^ tail) * p) & mask
    return h ^ (h >> 31)


def activities(body, where):
    if len(body) < 8:
        raise Damage("%s: too short" % where)
    content, stored = body[:-8], struct.unpack("<Q", body[-8:])[0]
    if activity_checksum(content) != stored:
        raise Damage("%s: checksum mismatch" % where)
    r = Reader(content, where)
    if r.raw(4) != b"EKAI":
        r.fail("bad magic", 0)
    fmt = r.u8()
    if fmt != 2:
        r.fail("format %d (this reader reads format 2)" % fmt, 4)
    r.raw(3)
    types = [r.raw(r.fixed("I")).decode("utf-8") for _ in range(r.fixed("I"))]
    n = r.fixed("Q")
    ids = [uuid_text(r.raw(16)) for _ in range(n)]
    starts, last = [], 0
    for i in range(n):
        at = r.offset
        v = r.varint()
        if v & 1 == 0:
            last += unzigzag(v >> 1)
            starts.append(float(last))
        elif v == 1:
            starts.append(r.fixed("d"))
        else:
            r.fail("row %d: unknown start tag %d" % (i, v), at)
    ends = []
    for i in range(n):
        at = r.offset
        v = r.varint()
        if v == 0:
            ends.append(None)
        elif v & 3 == 1 and v >> 2 < 1 << 61:
            ends.append(starts[i] + float(v >> 2))
        elif v == 2:
            ends.append(r.fixed("d"))
        else:
            r.fail("row %d: unknown end tag %d" % (i, v), at)
    codes = [r.varint() for _ in range(n)]
    versions = [r.varint() for _ in range(n)]
    deleted = [Obj([("id", uuid_text(r.raw(16))), ("version", r.varint())]) for _ in range(r.varint())]
    r.expect_end("the deleted activities")
    rows = []
    for i in range(n):
        if codes[i] >= len(types):
            raise Damage("%s: row %d: type code %d of %d" % (where, i, codes[i], len(types)))
        rows.append(Obj([("id", ids[i]), ("startDate", iso(starts[i])), ("endDate", iso(ends[i]) if ends[i] is not None else None),
                         ("type", types[codes[i]]), ("version", versions[i])]))
    return [("activities", rows), ("deleted", deleted)]


def snapshot_lines(directory):
    folder = os.path.join(directory, "snapshots")
    names = sorted(n for n in os.listdir(folder) if not n.startswith(".")) if os.path.isdir(folder) else []
    if not names:
        note("the store has no snapshot")
    anchors, failed = None, 0
    for name in names:
        # Each file on its own: one that does not decode is reported, and the others still read.
        try:
            if not SNAPSHOT_NAME.match(name):
                raise Damage("snapshots/%s: not a snapshot file name" % name)
            projection, schema, body, head, (version, next_position, anchor_ts, anchor_crc) = \
                snapshot_file(os.path.join(folder, name), name)
            if version == 2 and next_position:
                # The anchor is the last record below next position: its timestamp and payload CRC32C.
                anchors = anchor_records(directory) if anchors is None else anchors
                found = anchor_before(anchors, next_position)
                head.append(("anchorMatchesLog", found == (anchor_ts, anchor_crc)))
            where = "snapshots/%s body" % name
            if projection == "$entity-versions" and schema == 5:
                state = entity_versions(body, where)
            elif projection == "activities" and schema == 2:
                state = activities(body, where)
            elif projection.startswith("repository:") and schema == 5:
                state = repository(body, where, projection[len("repository:"):])
            else:
                raise Damage("snapshots/%s: projection %r at schema %d: not a layout this reader decodes (the store "
                             "does not restore it either: it replays the log)" % (name, projection, schema))
        except Damage as e:
            failed += 1
            print("spec_reader: error: %s" % e, file=sys.stderr)
            continue
        yield write_json(Obj(head + state))
    if failed:
        raise Damage("%d snapshot file(s) not decoded" % failed)


# MARK: - Consumer files

def consumer_record(path, magic, version):
    data = open(path, "rb").read()
    r = Reader(data, "consumers/" + os.path.basename(path))
    if len(data) < 10 or data[:4] != magic:
        r.fail("not a %s record (too short or another magic)" % magic.decode(), 0)
    if struct.unpack_from("<H", data, 4)[0] != version:
        r.fail("format version %d, not %d" % (struct.unpack_from("<H", data, 4)[0], version), 4)
    if struct.unpack_from("<I", data, len(data) - 4)[0] != crc32c(data[:-4]):
        r.fail("CRC32C mismatch", len(data) - 4)
    r.data = data[:-4]
    r.offset = 6
    return r


def consumer_lines(directory):
    folder = os.path.join(directory, "consumers")
    names = sorted(n for n in os.listdir(folder) if not n.startswith(".")) if os.path.isdir(folder) else []
    anchors = None
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(".checkpoint"):
            r = consumer_record(path, b"EKCP", 2)
            committed, committed_at, epoch = r.fixed("Q"), r.fixed("q"), r.fixed("Q")
            at = r.offset
            flag = r.u8()
            if flag not in (0, 1):
                r.fail("anchor flag %d" % flag, at)
            anchor = (r.fixed("q"), r.fixed("I")) if flag else None
            consumer = r.string()
            r.expect_end("the name")
            pairs = [("file", name), ("consumer", consumer), ("committed", committed),
                     ("committedAt", format_timestamp(committed_at)), ("historyEpoch", epoch)]
            if anchor:
                anchors = anchor_records(directory) if anchors is None else anchors
                pairs += [("anchor", Obj([("recordedAt", format_timestamp(anchor[0])), ("payloadCRC32C", anchor[1])])),
                          ("anchorMatchesLog", anchor_before(anchors, committed) == anchor)]
            yield write_json(Obj(pairs))
        elif name.endswith(".parked"):
            r = consumer_record(path, b"EKPK", 1)
            consumer = r.string()
            events = []
            for _ in range(r.varint()):
                position, attempts, parked_at = r.fixed("Q"), r.varint(), r.fixed("q")
                events.append(Obj([("position", position), ("attempts", attempts), ("parkedAt", format_timestamp(parked_at)),
                                   ("stream", r.string()), ("event", r.string()), ("errorType", r.string()), ("error", r.string())]))
            r.expect_end("the parked events")
            yield write_json(Obj([("file", name), ("consumer", consumer), ("parked", events)]))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    options = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 1 or len(options) > 1 or any(o not in ("--snapshots", "--consumers") for o in options):
        print("usage: spec_reader.py STORE [--snapshots | --consumers]", file=sys.stderr)
        return 2
    directory = args[0]
    if not os.path.isdir(directory):
        print("spec_reader: error: %s is not a directory" % directory, file=sys.stderr)
        return 2
    out = sys.stdout
    try:
        epoch = read_store_file(directory)
        lines = (snapshot_lines(directory) if "--snapshots" in options
                 else consumer_lines(directory) if "--consumers" in options else event_lines(directory, epoch))
        for line in lines:
            out.write(line + "\n")
    except Damage as e:
        out.flush()
        print("spec_reader: error: %s" % e, file=sys.stderr)
        return 3
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
