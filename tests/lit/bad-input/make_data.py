"""Writes input.npy/target.npy variants for a model with 4 features and 2 classes.
usage: make_data.py DIR VARIANT"""
import os
import sys

import numpy as np

out, variant = sys.argv[1:3]
rng = np.random.default_rng(0)
x = rng.standard_normal((16, 4)).astype(np.float32)
y = rng.integers(0, 2, 16).astype(np.int64)
if variant == "float64":
    x = x.astype(np.float64)
elif variant == "int32_labels":
    y = y.astype(np.int32)
elif variant == "wrong_width":
    x = rng.standard_normal((16, 5)).astype(np.float32)
elif variant == "mismatched_rows":
    y = y[:15]
elif variant == "too_few":
    x, y = x[:3], y[:3]
elif variant == "label_out_of_range":
    y[:] = 2
elif variant not in ("good", "no_target"):
    raise SystemExit(f"unknown variant {variant}")
np.save(os.path.join(out, "input.npy"), x)
if variant != "no_target":
    np.save(os.path.join(out, "target.npy"), y)
