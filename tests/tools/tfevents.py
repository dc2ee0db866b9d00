#!/usr/bin/env python3
"""A TensorBoard event file reader written from the specs, independent of dtrain's C code and of
any TensorFlow or protobuf package: TFRecord framing (uint64 length, masked CRC-32C of the
length, data, masked CRC-32C of the data) and the protobuf wire format of tensorflow.Event
(wall_time=1 double, step=2 int64, file_version=3 string, summary=5, session_log=6) and Summary
(value=1 repeated; Value: tag=1 string, simple_value=2 float).

  tfevents.py FILE...   prints one JSON object per event; exit 1 on a CRC mismatch or a
                        malformed record anywhere, a torn last record included (strict: the
                        tests check that dtrain writes whole records).
"""
import json
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf):
    """(field number, wire type, value) of one message: ints for varint/fixed, bytes else."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(buf):
            raise ValueError("field runs past the message")
        yield number, wire, value


def decode_event(data):
    ev = {"scalars": {}}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            ev["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3 and wire == 2:
            ev["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            for n2, w2, v2 in fields(value):
                if n2 != 1 or w2 != 2:
                    continue
                tag, simple = None, None
                for n3, w3, v3 in fields(v2):
                    if n3 == 1 and w3 == 2:
                        tag = v3.decode()
                    elif n3 == 2 and w3 == 5:
                        simple = struct.unpack("<f", v3)[0]
                if tag is not None and simple is not None:
                    ev["scalars"][tag] = simple
        elif number == 6 and wire == 2:
            for n2, w2, v2 in fields(value):
                if n2 == 1 and w2 == 0:
                    ev["session_status"] = v2
    return ev


def read_records(path):
    buf = open(path, "rb").read()
    i = 0
    while i < len(buf):
        if len(buf) - i < 12:
            raise ValueError("%s: torn length header at byte %d" % (path, i))
        header = buf[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", buf[i + 8:i + 12])
        if crc != masked_crc(header):
            raise ValueError("%s: length CRC mismatch at byte %d" % (path, i))
        data = buf[i + 12:i + 12 + n]
        tail = buf[i + 12 + n:i + 16 + n]
        if len(data) != n or len(tail) != 4:
            raise ValueError("%s: torn record at byte %d" % (path, i))
        if struct.unpack("<I", tail)[0] != masked_crc(data):
            raise ValueError("%s: data CRC mismatch at byte %d" % (path, i))
        yield data
        i += 16 + n


def read_events(path):
    return [decode_event(d) for d in read_records(path)]


if __name__ == "__main__":
    try:
        for path in sys.argv[1:]:
            for ev in read_events(path):
                print(json.dumps(ev))
    except (ValueError, IndexError, struct.error) as e:
        sys.exit(str(e))
