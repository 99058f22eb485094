"""Converts Fashion-MNIST's IDX files (gzip) into the .npy inputs dtrun reads.

usage: fashion_mnist_to_npy.py [SRC_DIR] OUT_DIR
Writes OUT_DIR/{train,test}/input.npy (float32 [N,784], pixels / 255) and target.npy (int64 [N]).
Does nothing when the outputs exist and are newer than the sources."""
import gzip
import os
import struct
import sys
import zlib

import numpy as np

SPLITS = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
          "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
IMAGE_MAGIC, LABEL_MAGIC = 0x803, 0x801  # IDX: unsigned bytes, 3 and 1 dimensions
CLASSES = 10


def fail(message):
    print(f"fashion_mnist_to_npy: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_idx(path, magic, dims):
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:  # a truncated gzip raises EOFError
        fail(f"cannot read {path}: {e}")
    header = 4 + 4 * dims
    if len(data) < header:
        fail(f"{path} is truncated")
    got, *shape = struct.unpack(">" + "I" * (1 + dims), data[:header])
    if got != magic:
        fail(f"{path} has IDX magic {got:#x}, expected {magic:#x}")
    count = int(np.prod(shape))
    if len(data) - header != count:
        fail(f"{path} holds {len(data) - header} bytes of data, its header promises {count}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def save(path, array):
    """Writes through a temporary name and a rename, so a reader never sees a partial file."""
    tmp = f"{path}.tmp.{os.getpid()}.npy"
    try:
        np.save(tmp, array)
        os.replace(tmp, path)
    except OSError as e:
        fail(f"cannot write {path}: {e}")
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main():
    args = sys.argv[1:]
    if len(args) == 1:
        src, out = "/usr/share/datasets/fashion-mnist", args[0]
    elif len(args) == 2:
        src, out = args
    else:
        fail("usage: fashion_mnist_to_npy.py [SRC_DIR] OUT_DIR")
    for split, (images_name, labels_name) in SPLITS.items():
        sources = [os.path.join(src, images_name), os.path.join(src, labels_name)]
        for s in sources:
            if not os.path.exists(s):
                fail(f"missing {s} (apt-get install dataset-fashion-mnist)")
        outputs = [os.path.join(out, split, "input.npy"), os.path.join(out, split, "target.npy")]
        newest_source = max(os.path.getmtime(s) for s in sources)
        if all(os.path.exists(o) and os.path.getmtime(o) >= newest_source for o in outputs):
            print(f"{split}: up to date in {os.path.join(out, split)}")
            continue
        images = read_idx(sources[0], IMAGE_MAGIC, 3)
        labels = read_idx(sources[1], LABEL_MAGIC, 1)
        if images.shape[1:] != (28, 28):
            fail(f"{sources[0]} holds {images.shape[1]}x{images.shape[2]} images, expected 28x28")
        if len(images) != len(labels):
            fail(f"{split}: {len(images)} images but {len(labels)} labels")
        if len(labels) and labels.max() >= CLASSES:
            fail(f"{sources[1]} has label {labels.max()}, expected 0..{CLASSES - 1}")
        try:
            os.makedirs(os.path.join(out, split), exist_ok=True)
        except OSError as e:
            fail(f"cannot create {os.path.join(out, split)}: {e}")
        save(outputs[0], (images.reshape(len(images), -1).astype(np.float32) / 255.0))
        save(outputs[1], labels.astype(np.int64))
        print(f"{split}: {len(images)} samples -> {os.path.join(out, split)}")


if __name__ == "__main__":
    main()
