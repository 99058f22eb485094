"""Builds a byte-level token corpus (llm.c .bin format) from Debian's fortune files.

usage: text_to_tokens.py OUT_DIR [SRC ...]
Tokens are bytes (vocabulary 256). Sources default to the plain-text fortune files in
/usr/share/games/fortunes (package `fortunes`); the `%` lines between fortunes become blank
lines. Writes OUT_DIR/train.bin (first 90%) and OUT_DIR/val.bin (last 10%); does nothing when
they are newer than every source."""
import glob
import os
import sys

import numpy as np

FORTUNES = "/usr/share/games/fortunes"


def fail(message):
    print(f"text_to_tokens: error: {message}", file=sys.stderr)
    sys.exit(2)


def sources(args):
    if args:
        return args
    files = sorted(f for f in glob.glob(os.path.join(FORTUNES, "*"))
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")) and not os.path.islink(f))
    if not files:
        fail(f"no fortune files in {FORTUNES} (apt-get install fortunes)")
    return files


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = [b"" if line.strip() == b"%" else line for line in data.split(b"\n")]
    return b"\n".join(lines)


def write_tokens(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())
    os.replace(tmp, path)


def main():
    if len(sys.argv) < 2:
        fail("usage: text_to_tokens.py OUT_DIR [SRC ...]")
    out, files = sys.argv[1], sources(sys.argv[2:])
    for f in files:
        if not os.path.exists(f):
            fail(f"missing {f}")
    outputs = [os.path.join(out, "train.bin"), os.path.join(out, "val.bin")]
    newest = max(os.path.getmtime(f) for f in files)
    if all(os.path.exists(o) and os.path.getmtime(o) >= newest for o in outputs):
        print(f"tokens: up to date in {out}")
        return
    text = b"\n".join(read_text(f) for f in files)
    tokens = np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
    split = int(len(tokens) * 0.9)
    os.makedirs(out, exist_ok=True)
    write_tokens(outputs[0], tokens[:split])
    write_tokens(outputs[1], tokens[split:])
    print(f"tokens: {split} train, {len(tokens) - split} val (byte-level, from {len(files)} files) -> {out}")


if __name__ == "__main__":
    main()
