"""Minimal safetensors reader/writer on NumPy (no safetensors package needed).

load(path) -> {name: ndarray}; metadata(path) -> {str: str}; save(path, {name: ndarray}, metadata).
BF16 tensors, which NumPy cannot represent, load as float32 (exactly: bf16 is float32's top half).
Writes go through "<path>.tmp.<pid>" and a rename, like dtrun's writer."""
import json
import os
import struct

import numpy as np

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20  # as the reference implementation


def _read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} does not fit the file ({len(data)} bytes)")
    header = json.loads(data[8:8 + n])
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    return header, memoryview(data)[8 + n:]


def load(path):
    """Returns {name: ndarray} (copies, little-endian, C order)."""
    header, body = _read(path)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = info["shape"]
        if not 0 <= begin <= end <= len(body):
            raise ValueError(f"{path}: tensor {name!r}: data_offsets {begin, end} outside the data")
        raw = body[begin:end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif info["dtype"] in _DTYPES:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r}: shape {shape} does not match its bytes")
        out[name] = array.reshape(shape).copy()
    return out


def metadata(path):
    """The file's __metadata__ ({} when absent)."""
    header, _ = _read(path)
    return dict(header.get("__metadata__", {}))


def save(path, tensors, metadata=None):
    """Writes {name: ndarray}: header keys sorted, data in name order, header padded to 8."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        if a.dtype.newbyteorder("=") not in _NAMES:
            raise ValueError(f"tensor {name!r}: dtype {a.dtype} has no safetensors name here")
        header[name] = {"dtype": _NAMES[a.dtype.newbyteorder("=")], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
