"""Gives a plan FlatBuffer made by hand (flatc -b from edited JSON) the checksum footer dtc
writes (runtime/planfile/plan_format.h), in place: usage seal_plan.py PLAN.dtp."""
import struct
import sys
import zlib

path = sys.argv[1]
with open(path, "rb") as f:
    body = f.read()
with open(path, "wb") as f:
    f.write(body + b"DTCS" + struct.pack("<IQ", zlib.crc32(body), len(body)))
