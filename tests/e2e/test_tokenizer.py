"""dtrun's tokenizer (runtime/text) against Hugging Face's tokenizers library on the same
tokenizer.json files, each trained here on the fortunes: GPT-2's byte-level BPE, Llama 2's
SentencePiece BPE (byte fallback, a <s> template), Llama 3's (a Split on its pattern before a
byte-level BPE that ignores merges where a word is whole), Qwen2's (NFC, one digit a piece),
and Mistral's Metaspace. For each, text in many scripts, digits, white space and added tokens:
encode equal to tokenizers' encode (special tokens added as its post-processor adds them), and
decode of those ids and of random ids equal to its decode (special tokens kept, as
transformers' decode keeps them). A tokenizer.json dtc cannot read is one line naming the part.

Then `dtrun --sample --tokenizer` on a GPT-2 of that vocabulary, from its folder and from its
ONNX export (input_ids and labels: the prompt goes into input_ids), greedy: the text
transformers' generate() gives; without a tokenizer, or with another model's, refused before
step 1.

Runs under scripts/setup.sh's virtual environment (.deps/hf-venv: tokenizers)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import expect_error, run, tool, write_tokens  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
TEXTS = ["Hello, world! It's 2026 and THEY'RE here.", "  leading spaces, trailing   ", "line one\n\nline two\r\n",
         "naïve café — déjà vu", "中文的文本 and 日本語のテキスト", "числа 1234567 и буквы", "emoji 🙂🚀 done",
         "tabs\tand\u00a0no-break spaces", "x", "<|endoftext|>between<|endoftext|>", "mixed<s>special</s>tokens",
         "'s 'T 're 've 'M 'll 'D contractions", "a" * 40, "12:30pm, $4.99 (50% off!)"]


def fortunes():
    text = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*"))[:40]:
        if os.path.isfile(path) and not path.endswith((".dat", ".u8")):
            text.append(open(path, encoding="utf-8", errors="ignore").read())
    text.append(" ".join(TEXTS))  # every script the cases use has merges of its own
    return text


def byte_level(corpus, split=None, ignore_merges=False, nfc=False, template=None):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    if split:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|begin_of_text|>"]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if template:
        tok.post_processor = processors.TemplateProcessing(single=f"{template} $A",
                                                           special_tokens=[(template, tok.token_to_id(template))])
    return tok


def sentencepiece(corpus, metaspace=False):
    """Llama 2's layout (Prepend and Replace normalizers, byte fallback, a <s> template) or
    Mistral's newer one (a Metaspace pre-tokenizer and decoder)."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"]))
    # The 256 byte tokens as ordinary vocabulary entries (SentencePiece's), past the trained ones.
    state = json.loads(tok.to_str())
    vocab = state["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tok = Tokenizer.from_str(json.dumps(state))
    if not metaspace:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def tokenizer_cli():
    """The test build's tokenizer_cli (tests/unit/text)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(tool("dtc")))), "tests", "unit", "text",
                        "tokenizer_cli")


def cli(path, mode, lines):
    out = subprocess.run([tokenizer_cli(), path, mode], input="".join(
        json.dumps(line) + "\n" for line in lines), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def main():
    rng = np.random.default_rng(0)
    corpus = fortunes()
    cases = {
        "gpt2": byte_level(corpus),
        "llama2": sentencepiece(corpus),
        "llama3": byte_level(corpus, split=LLAMA3, ignore_merges=True, template="<|begin_of_text|>"),
        "qwen2": byte_level(corpus, split=QWEN2, nfc=True),
        "mistral": sentencepiece(corpus, metaspace=True),
    }
    with tempfile.TemporaryDirectory() as work:
        for name, tok in cases.items():
            os.makedirs(os.path.join(work, name))
            path = os.path.join(work, name, "tokenizer.json")
            tok.save(path)
            theirs = [tok.encode(t).ids for t in TEXTS]
            ours = cli(os.path.join(work, name), "encode", TEXTS)
            for text, a, b in zip(TEXTS, ours, theirs):
                assert a == b, f"{name}: encode({text!r}): dtc {a}, tokenizers {b}"
            random_ids = [rng.integers(0, tok.get_vocab_size(), n).tolist() for n in (1, 5, 40, 200)]
            sequences = theirs + random_ids
            decoded = cli(path, "decode", sequences)
            for ids, text in zip(sequences, decoded):
                expected = tok.decode(ids, skip_special_tokens=False)
                assert text == expected, f"{name}: decode({ids}): dtc {text!r}, tokenizers {expected!r}"
            print(f"{name}: {len(TEXTS)} texts encoded ({sum(map(len, theirs))} tokens) and "
                  f"{len(sequences)} id sequences decoded as tokenizers does")
        # A tokenizer dtc cannot read: one line naming the part.
        state = json.loads(cases["gpt2"].to_str())
        state["model"]["type"] = "WordPiece"
        bad = os.path.join(work, "bad.json")
        json.dump(state, open(bad, "w"))
        out = subprocess.run([tokenizer_cli(), bad, "encode"], input="", capture_output=True, text=True)
        assert out.returncode == 2 and "is not one dtc reads (BPE)" in out.stderr, out.stderr
        print(f"refused: {out.stderr.strip()}")
        sampling(work, os.path.join(work, "gpt2"), cases["gpt2"])
    print("tokenizer: ok")


def refused(args, needle):
    """Refused before step 1: nothing trained."""
    expect_error(args, needle, stdout_free_of="step ")


def sampling(work, tokenizer_dir, tok):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    vocab = tok.get_vocab_size()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    folder = os.path.join(work, "gpt2-model")
    model.save_pretrained(folder)
    prompt, count = "The meaning of life is", 12
    ids = torch.tensor([tok.encode(prompt).ids])
    with torch.no_grad():
        generated = model.generate(ids, max_new_tokens=count, do_sample=False, pad_token_id=0)
    # As dtrun prints text: control characters but newlines and tabs as \xNN.
    expected = "".join(c if ord(c) >= 0x20 or c in "\n\t" else f"\\x{ord(c):02x}"
                       for c in tok.decode(generated[0].tolist(), skip_special_tokens=False))

    class WithLoss(torch.nn.Module):
        def __init__(self, m, logits):
            super().__init__()
            self.m, self.logits = m, logits

        def forward(self, input_ids, labels):
            out = self.m(input_ids=input_ids, labels=labels)
            return (out.loss, out.logits) if self.logits else out.loss

    def export(path, logits):
        example = torch.zeros((2, 32), dtype=torch.int64)
        torch.onnx.export(WithLoss(model, logits).train(), (example, example), path,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input_ids", "labels"], output_names=["loss"] + (["logits"] if logits else []),
                          dynamic_axes={"input_ids": {0: "batch"}, "labels": {0: "batch"}}, opset_version=14)
    onnx, loss_only = os.path.join(work, "gpt2.onnx"), os.path.join(work, "gpt2-loss.onnx")
    export(onnx, True)
    export(loss_only, False)
    plans = {}
    for name, source in (("folder", folder), ("onnx", onnx)):
        plan = os.path.join(work, f"sample-{name}.dtp")
        run(tool("dtc"), "compile", source, "-o", plan, "--batch", 2)
        plans[name] = plan
        init = ["--init", folder] if name == "folder" else []
        out = run(tool("dtrun"), plan, *init, "--sample", count, "--prompt", prompt, "--tokenizer", tokenizer_dir,
                  "--temperature", 0).stdout
        text = out[out.index("sample: ") + len("sample: "):out.index("\nmemory: ")]
        assert text == expected, f"{name}: dtc {text!r}, transformers {expected!r}"
        print(f"--sample from the {name} plan, greedy: {text!r}, as transformers' generate()")
    run(tool("dtc"), "compile", loss_only, "-o", os.path.join(work, "loss-only.dtp"), "--batch", 2)
    tokens = os.path.join(work, "tokens.bin")
    write_tokens(tokens, np.arange(200) % vocab)
    train = ["--data", tokens, "--steps", 2]
    refused([tool("dtrun"), plans["folder"], *train, "--sample", 5],
                   f"vocabulary has {vocab} tokens, not 256 bytes: give --tokenizer DIR")
    os.makedirs(os.path.join(work, "data"))
    np.save(os.path.join(work, "data", "input_ids.npy"), (np.arange(8 * 32) % vocab).reshape(8, 32))
    np.save(os.path.join(work, "data", "labels.npy"), (np.arange(8 * 32) % vocab).reshape(8, 32))
    refused([tool("dtrun"), os.path.join(work, "loss-only.dtp"), "--data", os.path.join(work, "data"),
                    "--steps", 2, "--sample", 5, "--tokenizer", tokenizer_dir],
                   "an ONNX export returns its logits as an output beside the loss")
    small = os.path.join(work, "small")
    os.makedirs(small)
    state = json.loads(tok.to_str())
    state["model"]["vocab"]["extra"] = vocab + 50
    json.dump(state, open(os.path.join(small, "tokenizer.json"), "w"))
    refused([tool("dtrun"), plans["folder"], *train, "--sample", 5, "--tokenizer", small],
                   f"'s vocabulary of {vocab}: it is another model's")


if __name__ == "__main__":
    main()
