"""Minimal safetensors reader/writer on NumPy (no safetensors package needed)."""
import json
import os
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "F64": np.float64}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def load(path):
    """Returns {name: ndarray} (copies)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=_DTYPES[info["dtype"]]).reshape(info["shape"]).copy()
    return out


def save(path, tensors, metadata=None):
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(tmp, path)
