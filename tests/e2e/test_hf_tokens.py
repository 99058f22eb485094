"""scripts/hf_tokens.py: text through a Hugging Face tokenizer (a byte-level BPE trained here on
a fortune file with the `tokenizers` library, saved as transformers saves one) into llm.c token
files: every document preceded by the end-of-text token, the tokens decoding back to the text;
a `dtc zoo llama` of that vocabulary trains on them; a missing tokenizer folder is one error
line. Runs under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import os
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import read_log, read_tokens, run, tool  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "hf_tokens.py")
SOURCE = "/usr/share/games/fortunes/fortunes"


def main():
    with tempfile.TemporaryDirectory() as work:
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        bpe.train([SOURCE], trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tokenizer_dir, out = os.path.join(work, "tokenizer"), os.path.join(work, "tokens")
        PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>").save_pretrained(tokenizer_dir)
        run(sys.executable, SCRIPT, tokenizer_dir, out, SOURCE)
        tokens = np.concatenate([read_tokens(os.path.join(out, f"{s}.bin")) for s in ("train", "val")])
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        eot = tokenizer.eos_token_id
        assert tokens[0] == eot and tokens.max() < len(tokenizer), (tokens[:4], tokens.max())
        docs = tokenizer.decode(tokens.tolist()).split("<|endoftext|>")[1:]
        text = open(SOURCE, encoding="utf-8").read()
        assert all(d.strip() and d in text for d in docs), "a document does not decode to the source's text"
        print(f"{len(tokens)} tokens, {len(docs)} documents, each decoding to the source's text")

        model, plan, log = (os.path.join(work, n) for n in ("llama.dtm", "llama.dtp", "log.jsonl"))
        run(tool("dtc"), "zoo", "llama", "--vocab", len(tokenizer), "--ctx", 32, "--layers", 1, "--heads", 2,
            "--embd", 32, "-o", model)
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 4, "--optimizer", "adamw", "--lr", "3e-3")
        run(tool("dtrun"), plan, "--data", os.path.join(out, "train.bin"), "--steps", 20, "--log", log)
        losses = [e["loss"] for e in read_log(log)]
        assert losses[-1] < losses[0], losses
        print(f"llama on the tokens: loss {losses[0]:.3f} -> {losses[-1]:.3f}")

        bad = subprocess.run([sys.executable, SCRIPT, os.path.join(work, "nothing"), out, SOURCE],
                             capture_output=True, text=True)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and "is not a folder" in lines[0], bad.stderr
        print(f"refused: {lines[0]}")
    print("hf tokens: ok")


if __name__ == "__main__":
    main()
