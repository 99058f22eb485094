"""Tokenizes text files with a Hugging Face tokenizer into llm.c token files (.bin), as llm.c's
data scripts do: each document is its tokens preceded by the tokenizer's end-of-text token
(`<|endoftext|>` for GPT-2), the first 90% of the tokens in OUT_DIR/train.bin, the rest in
OUT_DIR/val.bin.

usage: hf_tokens.py TOKENIZER_DIR OUT_DIR SRC [SRC ...]

TOKENIZER_DIR is a folder save_pretrained wrote (tokenizer.json or the tokenizer's own files);
nothing is downloaded. A document is a whole SRC file, or each entry of a fortune file (text
between `%` lines). Token files are llm.c's: uint16 tokens (GPT-2's format) where every id fits,
uint32 (Llama 3's: magic 20240801, version 7) for larger vocabularies. Files are written to a temporary name, then renamed. Errors: one line on
stderr, exit status 2. Run under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from text_to_tokens import Error, entries, is_binary, main_of, read_bytes, write_train_val  # noqa: E402


def documents(path):
    data = read_bytes(path)
    if is_binary(data):
        raise Error(f"{path} is not a text file (it holds NUL bytes)")
    parts = entries(data) if b"\n%\n" in data else [data]
    return [p.decode("utf-8", errors="replace") for p in parts if p.strip()]


def run(argv):
    if len(argv) < 3 or argv[0] in ("-h", "--help"):
        raise Error("usage: hf_tokens.py TOKENIZER_DIR OUT_DIR SRC [SRC ...]")
    tokenizer_dir, out, sources = argv[0], argv[1], argv[2:]
    if not os.path.isdir(tokenizer_dir):
        raise Error(f"{tokenizer_dir} is not a folder (a tokenizer save_pretrained wrote)")
    for path in sources:
        if not os.path.isfile(path):
            raise Error(f"{path} is not a file")
    from transformers import AutoTokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except (OSError, ValueError) as e:
        raise Error(f"{tokenizer_dir}: no tokenizer there ({str(e).splitlines()[0]})") from None
    vocab = len(tokenizer)
    eot = tokenizer.eos_token_id
    if eot is None:
        raise Error(f"{tokenizer_dir}: the tokenizer has no end-of-text token to separate documents")
    tokens = []
    for path in sources:
        for doc in documents(path):
            tokens.append(eot)
            tokens.extend(tokenizer.encode(doc, add_special_tokens=False))
    write_train_val(out, np.array(tokens, dtype=np.int64), "tokens",
                    f"vocabulary {vocab}, from {len(sources)} files")


def main():
    main_of("hf_tokens", run)


if __name__ == "__main__":
    main()
