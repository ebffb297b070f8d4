"""What a checkpoint says about what wrote it, and its comparison with
what loads it: the field path of every tensor of the state and results,
the chain's seed (`StepSeeded`) and the kernel's class and parameters
(`kernel_summary`). `checkpointing.save_chain` writes them in the file's
header; `load_chain` refuses a file whose paths or kernel differ from its
templates', naming each difference.
"""

import hashlib
import re
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["kernel_summary", "field_paths", "seed_paths", "differences",
           "check_kernel", "check_results_paths", "leaves"]

# Kernels whose results became a type of their own after checkpoints of them
# had been written: {kernel class: (results type in such files, today's)}.
# A file whose header names the kernel is read with today's type.
_RESULTS_TYPE_RENAMED = {
    "tfp_sgmcmc.kernels.sghmc.NaiveSGHMC": ("SGHMCResults",
                                            "NaiveSGHMCResults"),
}
# The `Type.` that starts a segment of a field path.
_TYPE_OF_SEGMENT = re.compile(r"(?:(?<=^)|(?<=/))[A-Za-z_][A-Za-z0-9_]*\.")


def _type_name(obj):
  return f"{type(obj).__module__}.{type(obj).__qualname__}"


def leaves(structure):
  """The tensors of `structure` in the order a checkpoint stores them:
  tf.nest's, with composite tensors (a `momentum_distribution` in the
  results of a kernel built by TFP's adaptation kernels) opened into their
  component tensors, which is what can be written to and read from a file."""
  return tf.nest.flatten(structure, expand_composites=True)


def field_paths(structure, prefix):
  """One path per tf.nest leaf, naming each results type and field (e.g.
  `results/StepSeededResults.inner_results/SGHMCResults.momentum`), so that
  a checkpoint of another kernel, or with fields in another order, is told
  apart even when every shape and dtype agrees."""
  paths = []

  def walk(node, path):
    if isinstance(node, tuple) and hasattr(node, "_fields"):
      for field in node._fields:
        walk(getattr(node, field), f"{path}/{type(node).__name__}.{field}")
    elif isinstance(node, dict):
      for key in sorted(node):
        walk(node[key], f"{path}/{key}")
    elif isinstance(node, (list, tuple)):
      for i, item in enumerate(node):
        walk(item, f"{path}/{i}")
    elif isinstance(node, tf.__internal__.CompositeTensor):
      paths.extend(f"{path}/{type(node).__name__}.{i}"
                   for i in range(len(leaves(node))))
    else:
      paths.append(path)

  walk(structure, prefix)
  if len(paths) != len(leaves(structure)):
    # A structure tf.nest flattens its own way (attrs, composites): its
    # own paths, which still name every field.
    paths = [f"{prefix}/{type(structure).__name__}.{i}"
             for i in range(len(leaves(structure)))]
  return paths


def _jsonable(value, depth=0):
  """A stable, JSON-able summary of a kernel parameter: numbers and strings
  as they are, small arrays by value, large ones by digest, kernels by
  class and parameters, anything else (targets, functions) by its type."""
  if depth > 8:
    return _type_name(value)
  if value is None or isinstance(value, (bool, int, str)):
    return value
  if isinstance(value, float):
    return value if np.isfinite(value) else repr(value)
  if isinstance(value, tfp.mcmc.TransitionKernel):
    return kernel_summary(value, depth + 1)
  if isinstance(value, (list, tuple)):
    return [_jsonable(v, depth + 1) for v in value]
  if isinstance(value, dict):
    return {str(k): _jsonable(v, depth + 1) for k, v in sorted(value.items())}
  if isinstance(value, (np.ndarray, np.generic)) or tf.is_tensor(value):
    try:
      array = np.asarray(value)
    except Exception:  # pylint: disable=broad-except
      return _type_name(value)  # A symbolic tensor: no value to compare.
    if array.size <= 64:
      values = array.ravel().tolist()
      if array.dtype.kind == "f":  # JSON has no inf or NaN.
        values = [v if np.isfinite(v) else repr(v) for v in values]
      elif array.dtype.kind not in "biu":
        values = [repr(v) for v in values]
      return dict(dtype=array.dtype.name, shape=list(array.shape),
                  value=values)
    return dict(dtype=array.dtype.name, shape=list(array.shape),
                sha256=hashlib.sha256(array.tobytes()).hexdigest())
  described = _described(value)
  if described is not None:
    return {"object": _type_name(value),
            "parameters": {str(k): _jsonable(v, depth + 1)
                           for k, v in sorted(described.items())
                           if k != "name"}}
  if callable(value) and hasattr(value, "__qualname__"):
    return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
  return _type_name(value)


def _described(value):
  """The settings of a parameter that is neither a kernel nor a tensor but
  changes the chain: a mass (a TFP distribution, its bijectors and linear
  operators) or one of this package's step-size schedules; None for
  anything else (targets, which hold data, and functions)."""
  if isinstance(value, (tfp.distributions.Distribution,
                        tfp.bijectors.Bijector, tf.linalg.LinearOperator)):
    # Its tensors, flat: a mass nests a dozen objects deep, past the depth
    # at which parameters are no longer described.
    parts = tf.nest.flatten(value, expand_composites=True)
    if all(tf.is_tensor(p) for p in parts):
      return {"tensors": parts}
    return {k: v for k, v in value.parameters.items()
            if tf.is_tensor(v) or isinstance(v, (bool, int, float, str))}
  if type(value).__module__ == "tfp_sgmcmc.chains.schedules":
    return {k: v for k, v in vars(value).items() if not k.startswith("_")}
  return None


def kernel_summary(kernel, depth=0):
  """The kernel's class and parameters as stored in a checkpoint: the
  seed and the name are left out (the seed is checked on its own)."""
  parameters = getattr(kernel, "parameters", None) or {}
  return {"class": _type_name(kernel),
          "parameters": {k: _jsonable(v, depth + 1)
                         for k, v in sorted(parameters.items())
                         if k not in ("seed", "name")}}


def seed_paths(paths):
  return [i for i, p in enumerate(paths)
          if p.endswith("StepSeededResults.base_seed")]


def differences(saved, mine):
  """The entries of two equal-length lists that differ, as text."""
  return "; ".join(f"{i}: {a!r} (file) vs {b!r} (template)"
                   for i, (a, b) in enumerate(zip(saved, mine)) if a != b)


def _classes(summary):
  """Every kernel class in a kernel summary, the outer one first."""
  if not isinstance(summary, dict):
    return []
  found = [summary["class"]] if isinstance(summary.get("class"), str) else []
  for value in (summary.get("parameters") or {}).values():
    found += _classes(value)
  return found


def writer(summary):
  """The kernel of a summary by its classes' names, e.g.
  `StepSeeded(NaiveSGHMC)`."""
  names = [c.rsplit(".", 1)[-1] for c in _classes(summary)]
  return "(".join(names) + ")" * (len(names) - 1)


def _types(path):
  return [m.rstrip(".") for m in _TYPE_OF_SEGMENT.findall(path)]


def check_results_paths(path, header, saved, mine, kernel,
                        allow_other_kernel):
  """The results' field paths in the file (`saved`) are the template's
  (`mine`). Results with the same fields under another type were written by
  another kernel (`NaiveSGHMC` for `SGHMC`): refused unless
  `allow_other_kernel`, naming both types and the file's kernel."""
  summary = header.get("kernel")
  for cls in _classes(summary):
    if cls in _RESULTS_TYPE_RENAMED:
      # Read with today's type: loads into the kernel that wrote it, and is
      # refused by the kernel whose type the file's paths name.
      old, new = _RESULTS_TYPE_RENAMED[cls]
      saved = [re.sub(rf"(?:(?<=^)|(?<=/)){old}\.", f"{new}.", p)
               for p in saved]
  if saved == mine:
    return
  untyped = [_TYPE_OF_SEGMENT.sub("", p) for p in saved]
  if untyped != [_TYPE_OF_SEGMENT.sub("", p) for p in mine]:
    raise ValueError(
        f"{path} holds results with other fields than "
        f"`results_template` (another kernel, or fields in another "
        f"order): {differences(saved, mine)}. Load it "
        "with the kernel that wrote it.")
  if allow_other_kernel:
    return
  if kernel is not None and summary is not None:
    # The kernels' classes, when both are known, say it best.
    check_kernel(path, header, kernel, allow_other_kernel)
  pairs = []
  for a, b in zip(saved, mine):
    for pair in zip(_types(a), _types(b)):
      if pair[0] != pair[1] and pair not in pairs:
        pairs.append(pair)
  types = "; ".join(f"{a} (file) vs {b} (`results_template`)"
                    for a, b in pairs)
  by = f" ({writer(summary)})" if summary is not None else ""
  raise ValueError(
      f"{path} was written by another kernel{by}: its results are of "
      f"another type, {types}, with the same fields, which mean other "
      "things. Load it with a template of the kernel that wrote it, or pass "
      "allow_other_kernel=True to continue the chain with this kernel "
      "anyway.")


def _dictdifferences(saved, mine):
  keys = sorted(set(saved) | set(mine))
  return {k: (saved.get(k, "<absent>"), mine.get(k, "<absent>"))
          for k in keys if saved.get(k) != mine.get(k)}


def check_kernel(path, header, kernel, allow_other_kernel):
  saved = header.get("kernel")
  if kernel is None:
    if saved is not None:
      warnings.warn(
          f"{path} was written by {writer(saved)}; pass `kernel=` to "
          "load_chain to check that the chain continues with the same "
          "kernel class and parameters.", UserWarning, stacklevel=3)
    return
  mine = kernel_summary(kernel)
  if saved is None:
    warnings.warn(
        f"{path} was saved without `kernel=`: load_chain cannot check that "
        f"it was written by a {mine['class']} with the same parameters. "
        "Pass `kernel=` to save_chain.", UserWarning, stacklevel=3)
    return
  # A file written before masses and schedules were described by their
  # settings names them by type only: compared as it can be.
  mine = _as_saved(saved, mine)
  if saved == mine or allow_other_kernel:
    return
  diffs = _dictdifferences(_flat(saved), _flat(mine))
  classes = {k: v for k, v in diffs.items() if k.endswith("class")}
  if classes:
    raise ValueError(
        f"{path} was written by another kernel, (file, `kernel`): "
        f"{classes}. Its results mean other things even where their shapes "
        "agree. Load it with the kernel that wrote it, or pass "
        "allow_other_kernel=True to continue the chain with this kernel "
        "anyway.")
  raise ValueError(
      f"{path} was written by a {saved['class'].rsplit('.', 1)[-1]} with "
      f"other parameters, (file, `kernel`): {diffs}. Build the kernel with "
      "the checkpoint's parameters, or pass allow_other_kernel=True to "
      "continue the chain with the new ones.")


def _as_saved(saved, mine):
  """`mine` with each described object that `saved` names by its type only
  replaced by that name."""
  if isinstance(mine, dict) and "object" in mine and saved == mine["object"]:
    return saved
  if isinstance(saved, dict) and isinstance(mine, dict):
    return {k: _as_saved(saved[k], v) if k in saved else v
            for k, v in mine.items()}
  if (isinstance(saved, list) and isinstance(mine, list) and
      len(saved) == len(mine)):
    return [_as_saved(a, b) for a, b in zip(saved, mine)]
  return mine


def _flat(summary, prefix=""):
  """A kernel summary as {dotted name: value}: nested kernels' classes and
  parameters side by side, so a difference names where it is."""
  out = {}
  for key, value in summary.items():
    name = f"{prefix}{key}"
    if key == "parameters" and isinstance(value, dict):
      for k, v in value.items():
        if isinstance(v, dict) and "parameters" in v and (
            "class" in v or "object" in v):
          out.update(_flat(v, f"{prefix}{k}."))
        else:
          out[f"{prefix}{k}"] = v
    else:
      out[name] = value
  return out
