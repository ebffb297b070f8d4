"""Compares two golden_streams.py outputs bit for bit.

Usage: python benchmarks/golden_compare.py A.npz B.npz [--quiet]

Prints, per key, `identical`, `differs (...)` or `missing in A/B`, then
"N/M identical" (M = keys in either file). Exit code 0 iff all identical.
--quiet prints only the keys that are not identical, and the summary.
"""

import sys

import numpy as np


def _describe(a, b):
  if a.shape != b.shape:
    return f"differs (shape {a.shape} vs {b.shape})"
  if a.dtype != b.dtype:
    return f"differs (dtype {a.dtype} vs {b.dtype})"
  if a.dtype.kind in "fc":
    with np.errstate(invalid="ignore", over="ignore"):
      d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    finite = np.isfinite(d)
    n = int(np.sum(~_bitwise_equal(a, b)))
    mad = float(np.max(d[finite])) if finite.any() else float("nan")
    return f"differs (max abs diff {mad:.6g}, {n}/{a.size} elements)"
  if a.dtype.kind in "biu":
    n = int(np.sum(a != b))
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return f"differs (max abs diff {float(np.max(d)):.6g}, {n}/{a.size} " \
           "elements)"
  text_a, text_b = str(a)[:200], str(b)[:200]
  return f"differs ({text_a!r} vs {text_b!r})"


def _bitwise_equal(a, b):
  """Elementwise bit equality (NaN == NaN with the same bits; -0 != +0)."""
  if a.dtype.kind in "fc" and a.dtype.itemsize in (2, 4, 8):
    view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    if a.dtype.kind == "c":
      return _bitwise_equal(a.real, b.real) & _bitwise_equal(a.imag, b.imag)
    return np.ascontiguousarray(a).view(view) == \
        np.ascontiguousarray(b).view(view)
  return a == b


def identical(a, b):
  if a.shape != b.shape or a.dtype != b.dtype:
    return False
  if a.dtype.kind in "fc":
    return bool(np.all(_bitwise_equal(a, b)))
  return bool(np.array_equal(a, b))


def main(argv):
  quiet = "--quiet" in argv
  argv = [a for a in argv if a != "--quiet"]
  if len(argv) != 2:
    sys.exit("usage: golden_compare.py A.npz B.npz [--quiet]")
  with np.load(argv[0], allow_pickle=False) as fa, \
      np.load(argv[1], allow_pickle=False) as fb:
    a = {k: fa[k] for k in fa.files}
    b = {k: fb[k] for k in fb.files}
  keys = sorted(set(a) | set(b))
  same = 0
  for k in keys:
    if k not in a:
      line = "missing in A"
    elif k not in b:
      line = "missing in B"
    elif identical(a[k], b[k]):
      same += 1
      if quiet:
        continue
      line = "identical"
    else:
      line = _describe(a[k], b[k])
    print(f"{k}: {line}")
  print(f"{same}/{len(keys)} identical")
  return 0 if same == len(keys) else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
