"""Builds a byte-level token corpus (llm.c .bin format) from text files.

usage: text_to_tokens.py OUT_DIR [SRC ...]

Tokens are bytes (vocabulary 256). SRC defaults to every plain-text file under
/usr/share/games/fortunes (Debian package `fortunes`). Fortune files separate entries with `%`
lines; those lines are dropped so exactly one newline separates consecutive entries. Writes
OUT_DIR/train.bin (first 90% of the bytes) and OUT_DIR/val.bin (last 10%), each through a
temporary name and a rename, and does nothing when both are newer than every source (and this
script). Errors: one line on stderr, exit status 2. Run with /usr/bin/python3 (numpy + stdlib)."""
import os
import sys

import numpy as np

FORTUNES = "/usr/share/games/fortunes"
MAGIC, VERSION = 20240520, 1  # llm.c's GPT-2 token files: uint16 tokens
WIDE_MAGIC, WIDE_VERSION = 20240801, 7  # llm.c's Llama 3 token files: uint32 tokens
TRAIN_FRACTION = 0.9


class Error(Exception):
    pass


def default_sources():
    if not os.path.isdir(FORTUNES):
        raise Error(f"no fortune files: {FORTUNES} is missing (apt-get install fortunes)")
    files = []
    for root, dirs, names in os.walk(FORTUNES):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            # .dat files are strfile's binary indexes; .u8 ones are symlinks to the text (same
            # entries twice would skew the corpus), so links are skipped altogether.
            if name.endswith((".dat", ".u8")) or os.path.islink(path) or not os.path.isfile(path):
                continue
            if not is_binary(read_bytes(path)):
                files.append(path)
    if not files:
        raise Error(f"no plain-text fortune files under {FORTUNES} (apt-get install fortunes)")
    return files


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise Error(f"cannot read {path}: {e.strerror}") from None


def is_binary(data):
    return b"\0" in data[:65536]


def entries(data):
    """The file's entries: text between `%` lines, without their surrounding newlines."""
    out, current = [], []
    for line in data.split(b"\n"):
        if line.rstrip(b" \t\r") == b"%":
            out.append(b"\n".join(current))
            current = []
        else:
            current.append(line)
    out.append(b"\n".join(current))
    return [e.strip(b"\r\n") for e in out if e.strip(b"\r\n")]


def corpus(files):
    all_entries = []
    for path in files:
        data = read_bytes(path)
        if is_binary(data):
            raise Error(f"{path} is not a text file (it holds NUL bytes)")
        all_entries.extend(entries(data))
    return b"\n".join(all_entries) + b"\n" if all_entries else b""


def write_tokens(path, tokens):
    """GPT-2's format when every id fits in uint16, Llama 3's otherwise (as llm.c's data scripts)."""
    wide = len(tokens) > 0 and int(tokens.max()) > 65535
    header = np.zeros(256, dtype="<i4")
    header[:3] = [WIDE_MAGIC, WIDE_VERSION, len(tokens)] if wide else [MAGIC, VERSION, len(tokens)]
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(header.tobytes())
            f.write(tokens.astype("<u4" if wide else "<u2").tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise Error(f"cannot write {path}: {e.strerror}") from None


def write_train_val(out, tokens, unit, describe):
    """OUT/train.bin (the first 90% of `tokens`) and OUT/val.bin (the rest); `unit` names what
    was counted when there are too few, `describe` ends each file's line."""
    split = int(len(tokens) * TRAIN_FRACTION)
    if split == 0 or split == len(tokens):
        raise Error(f"{len(tokens)} {unit} are too few to split into train and val")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise Error(f"cannot create {out}: {e.strerror}") from None
    for name, part in (("train.bin", tokens[:split]), ("val.bin", tokens[split:])):
        path = os.path.join(out, name)
        write_tokens(path, part)
        print(f"{path}: {len(part)} tokens ({describe})")


def up_to_date(outputs, inputs):
    try:
        newest = max(os.path.getmtime(p) for p in inputs)
        return all(os.path.getmtime(o) > newest for o in outputs)
    except OSError:
        return False


def run(argv):
    if len(argv) < 1 or argv[0] in ("-h", "--help"):
        raise Error("usage: text_to_tokens.py OUT_DIR [SRC ...]")
    out, explicit = argv[0], argv[1:]
    for path in explicit:
        if not os.path.isfile(path):
            raise Error(f"{path} is not a file")
    files = explicit or default_sources()
    outputs = [os.path.join(out, "train.bin"), os.path.join(out, "val.bin")]
    if up_to_date(outputs, files + [os.path.abspath(__file__)]):
        print(f"text_to_tokens: {out} is up to date")
        return
    tokens = np.frombuffer(corpus(files), dtype=np.uint8).astype(np.uint16)
    write_train_val(out, tokens, "bytes of text", f"byte-level, vocabulary 256, from {len(files)} files")


def main_of(prog, run_with):
    """Runs `run_with` on the command line's arguments: an Error is one line on stderr, exit 2."""
    try:
        run_with(sys.argv[1:])
    except Error as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)


def main():
    main_of("text_to_tokens", run)


if __name__ == "__main__":
    main()
