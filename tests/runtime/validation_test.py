"""tfbert.runtime.validation: every config checks itself one way, naming every problem at once."""

import ast
import dataclasses
import json
import os
import pathlib
import re
import sys
import typing
from typing import Optional, Sequence

import numpy as np
import pytest

from tests import forked, helpers
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.config import BertConfig
from tfbert.embeddings.embedding_run import EmbeddingRunConfig
from tfbert.pretraining.pretraining_instances import PretrainingDataConfig
from tfbert.pretraining.pretraining_run import PretrainingRunConfig
from tfbert.runtime import validation
from tfbert.squad.squad_features import FeatureConfig
from tfbert.squad.squad_postprocess import PostprocessConfig
from tfbert.squad.squad_run import SquadRunConfig
from tfbert.tagging.tagging_run import NerRunConfig
from tfbert.training.optimization import OptimizerConfig


@dataclasses.dataclass(frozen=True)
class _Toy:
  size: int = 3
  kind: str = "a"

  def __post_init__(self):
    validation.validate(self)

  def checks(self, num_replicas: int = 1):
    yield self.kind in ("a", "b"), f"kind must be 'a' or 'b', got {self.kind!r}"
    if not isinstance(self.size, int):
      yield False, f"size must be an integer, got {self.size!r}"
      return  # The rule below would raise a TypeError on a string.
    yield self.size % num_replicas == 0, f"size {self.size} is not a multiple of {num_replicas}"


def test_every_failed_rule_is_named_in_one_error_in_rule_order():
  toy = _Toy(size=3)
  object.__setattr__(toy, "kind", "c")  # Two rules fail: both named, in their order.
  with pytest.raises(ValueError) as e:
    validation.validate(toy, num_replicas=2)
  assert str(e.value) == "_Toy: kind must be 'a' or 'b', got 'c'; size 3 is not a multiple of 2"
  assert validation.failures(_Toy(size=3).checks(num_replicas=2)) == [
      "size 3 is not a multiple of 2"]


@dataclasses.dataclass(frozen=True)
class _Typed:
  count: int = 1
  rate: float = 0.5
  name: str = "a"
  flag: bool = False
  files: Sequence[str] = ()
  limit: Optional[int] = None
  path: str = None  # Unset means None whatever the annotation says.

  def __post_init__(self):
    validation.validate(self)

  def checks(self):
    yield self.rate < self.count, "the rules run on typed values only"


def test_a_field_of_another_type_than_its_annotation_is_refused_before_the_rules():
  """Sweep 17: a string null_score_diff_threshold in run_config.json reached a float
  comparison and crashed with a TypeError; every config field is now checked by its type."""
  with pytest.raises(ValueError) as e:
    _Toy(size="3", kind="c")
  assert str(e.value) == "_Toy: size must be an int, got '3'"  # The rules read typed values.
  with pytest.raises(ValueError) as e:
    _Typed(count=2.0, rate="0.5", name=3, flag="false", files="a.txt", limit=1.5, path=7)
  assert str(e.value) == (
      "_Typed: count must be an int, got 2.0; rate must be a number, got '0.5'; name must be "
      "a str, got 3; flag must be True or False, got 'false'; files must be a list of str, got "
      "'a.txt'; limit must be an int or None, got 1.5; path must be a str or None, got 7")
  with pytest.raises(ValueError, match=r"^_Typed: files must be a list of str, got \('a', 2\)$"):
    _Typed(files=("a", 2))
  # What each kind takes: NumPy's numbers and bools, an int for a number, None where unset.
  typed = _Typed(count=np.int64(3), rate=1, flag=np.bool_(True), files=["a"], limit=None)
  assert (typed.count, typed.rate, typed.flag, typed.path) == (3, 1, True, None)
  _Typed(rate=np.float32(0.25), limit=np.int32(4), path="p")


def test_rules_that_depend_on_the_machine_are_checked_again_with_it():
  toy = _Toy(size=3)  # Valid at construction (num_replicas=1).
  validation.validate(toy, num_replicas=3)
  with pytest.raises(ValueError, match=r"^_Toy: size 3 is not a multiple of 2$"):
    validation.validate(toy, num_replicas=2)


def test_an_integer_is_any_integral_but_a_bool_and_is_kept_as_a_plain_int():
  """Sweep 7 A10, A11, A40: NumPy's integers were refused where an int was checked by type."""
  for value in (2, np.int64(2), np.int32(2), np.uint8(2)):
    assert validation.is_int(value)
    got = validation.plain_int("batch_size", value)
    assert got == 2 and type(got) is int
  for value in (2.0, np.float64(2), True, np.bool_(True), "2", None, 0, np.int64(-1)):
    with pytest.raises(ValueError, match=rf"^batch_size must be an int >= 1, got "
                                         rf"{re.escape(repr(value))}$"):
      validation.plain_int("batch_size", value)
  # A config's fields: NumPy's integers become plain ints (JSON writes them) at validation.
  toy = _Toy(size=np.int64(4))
  assert type(toy.size) is int and json.dumps(dataclasses.asdict(toy)) == (
      '{"size": 4, "kind": "a"}')


def _post_inits():
  """(file, class, body source) of every `__post_init__` in the library and the tools."""
  for root in ("tfbert", "tools"):
    for path in sorted(pathlib.Path(helpers.ROOT, root).rglob("*.py")):
      tree = ast.parse(path.read_text(encoding="utf-8"))
      for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
          for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__post_init__":
              yield path.name, node.name, [ast.unparse(s) for s in item.body]


def test_every_config_validates_itself_the_same_way():
  found = list(_post_inits())
  # The library's configs, the alignment variants and the benchmark cases, at least.
  names = {name for _, name, _ in found}
  assert {"BertConfig", "OptimizerConfig", "PretrainingRunConfig", "FineTuningConfig",
          "PretrainingDataConfig", "FeatureConfig", "PostprocessConfig", "Variant",
          "AlignmentConfig", "StepCase", "PretrainingCase"} <= names, names
  for file, name, body in found:
    assert body == ["validation.validate(self)"], (file, name, body)



def _bert_config():
  return BertConfig(vocab_size=11, hidden_size=6, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=7)


# One valid instance of every config a tool builds from its flags.
CONFIGS = {
    ClassifierRunConfig: lambda: ClassifierRunConfig(output_dir="o", task_name="mrpc",
                                                     do_train=True, data_dir="d"),
    NerRunConfig: lambda: NerRunConfig(output_dir="o", do_train=True, train_file="t"),
    SquadRunConfig: lambda: SquadRunConfig(output_dir="o", do_train=True, train_file="t"),
    EmbeddingRunConfig: lambda: EmbeddingRunConfig(output_dir="o", do_train=True,
                                                   train_file="t"),
    FeatureConfig: FeatureConfig,
    PostprocessConfig: PostprocessConfig,
    PretrainingDataConfig: lambda: PretrainingDataConfig(vocab_file="v"),
    PretrainingRunConfig: lambda: PretrainingRunConfig(
        _bert_config(), ["x"], "m", OptimizerConfig(learning_rate=1e-3, num_train_steps=10)),
    OptimizerConfig: lambda: OptimizerConfig(learning_rate=1e-3, num_train_steps=10),
    BertConfig: _bert_config,
}


def numeric_fields(cls) -> list[str]:
  """The int and float fields (optional or not) of a config class."""
  numeric = (int, float, Optional[int], Optional[float])
  hints = typing.get_type_hints(cls)
  return [f.name for f in dataclasses.fields(cls) if hints[f.name] in numeric]


@pytest.mark.parametrize("cls", list(CONFIGS), ids=lambda cls: cls.__name__)
def test_every_numeric_setting_refuses_a_negative_value_naming_it(cls):
  """A negative count, size, rate or seed is never valid: each numeric field of every
  config set to -1 fails its checks with a message naming the field (but for `ANY_VALUE`)."""
  valid = CONFIGS[cls]()
  fields = [name for name in numeric_fields(cls) if name not in ANY_VALUE]
  assert fields
  for name in fields:
    with pytest.raises(ValueError, match=name):
      dataclasses.replace(valid, **{name: -1})


# Every flags module's numeric flags, each module imported alone (several define the same
# names): {module: {flag: lower bound or None}}.
_NUMERIC_FLAGS = """
import importlib, json, os, sys
from absl import flags
out = {}
for name in sorted(f[:-3] for f in os.listdir("flags") if f.endswith("_flags.py")):
  for module in [m for m in sys.modules if m.split(".")[0] == "tfbert_flags"]:
    del sys.modules[module]
  for flag in list(flags.FLAGS):
    if (flags.FLAGS.find_module_defining_flag(flag) or "").startswith("tfbert_flags."):
      delattr(flags.FLAGS, flag)
  importlib.import_module("tfbert_flags." + name)
  out[name] = {flag: flags.FLAGS[flag].parser.lower_bound for flag in flags.FLAGS
               if (flags.FLAGS.find_module_defining_flag(flag) or "").startswith("tfbert_flags.")
               and isinstance(flags.FLAGS[flag].parser, (flags.IntegerParser, flags.FloatParser))}
print(json.dumps(out))
"""
# Numeric flags whose whole range is valid: a negative column counts from the end (Python's
# index), a null-score threshold is any log-odds difference.
ANY_VALUE = {"token_column", "tag_column", "custom_text_a_column", "custom_text_b_column",
             "custom_label_column", "null_score_diff_threshold"}


@pytest.mark.slow
def test_every_numeric_flag_is_range_checked_by_absl_or_by_its_config():
  """`demo --pretrain_steps=-5` once exited 0 having skipped its work. Every integer and
  float flag of every tool now has an absl lower bound, or sets a config field whose checks
  refuse an out-of-range value naming the field (the test above proves those for every
  numeric field), or takes any value (`ANY_VALUE`)."""
  checked = {field for cls in CONFIGS for field in numeric_fields(cls)}
  out = forked.run([sys.executable, "-c", _NUMERIC_FLAGS], cwd=helpers.ROOT,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                   capture_output=True, text=True, timeout=240, check=True).stdout
  numeric = json.loads(out.splitlines()[-1])
  assert "pretrain_steps" in numeric["demo_flags"] and "opset" in numeric["export_onnx_flags"]
  unchecked = sorted(
      (module, flag) for module, found in numeric.items() for flag, bound in found.items()
      if bound is None and flag not in ANY_VALUE and flag not in checked)
  assert not unchecked


@pytest.mark.parametrize("value, optional, expected", [
    (True, False, True), (np.bool_(False), False, False), (None, True, None)])
def test_plain_bool_takes_a_bool_or_numpys(value, optional, expected):
  """Issue 47: the generic bool check lives beside `plain_int` (it was in
  tfbert.text.casing, which tokenization imported inside functions to reach it)."""
  assert validation.plain_bool("flag", value, optional=optional) is expected


@pytest.mark.parametrize("value, optional, message", [
    ("false", False, "^flag must be True or False, got 'false'$"),
    (None, False, "^flag must be True or False, got None$"),
    (1, True, "^flag must be True, False or None, got 1$")])
def test_plain_bool_refuses_a_str_or_a_number_naming_the_setting(value, optional, message):
  with pytest.raises(ValueError, match=message):
    validation.plain_bool("flag", value, optional=optional)


class _Built:
  @validation.typed_arguments("size")
  def __init__(self, size: int, rate: float = 0.5, flag: bool = False,
               name: Optional[str] = None, names: Sequence[str] = (), anything=None):
    self.values = (size, rate, flag, name, names, anything)


def test_typed_arguments_refuses_an_argument_of_another_kind_naming_the_class_and_it():
  """Sweep 18: a model constructor took `normalize="false"` as True; `typed_arguments`
  checks a constructor's arguments as `field_types` checks a config's fields."""
  with pytest.raises(ValueError) as e:
    _Built(1, "0.5", flag="false", name=3, names="ab")
  assert str(e.value) == ("_Built: rate must be a number, got '0.5'; flag must be True or "
                          "False, got 'false'; name must be a str or None, got 3; names must "
                          "be a list of str, got 'ab'")
  # What each takes; "size" checks itself (`checked_by_itself`), the unannotated anything.
  built = _Built("x", np.float32(0.25), np.bool_(True), None, ["a"], anything=object)
  assert built.values[:5] == ("x", 0.25, True, None, ["a"])
  assert _Built(1, rate=2).values[1] == 2  # An int is a number.
  with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
    _Built(1, bogus=2)  # Python's own message for a call that does not bind.
