"""tfbert.runtime.validation: every config checks itself one way, naming every problem at once."""

import ast
import dataclasses
import pathlib

import pytest

from tests import helpers
from tfbert.runtime import validation


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
  with pytest.raises(ValueError) as e:
    _Toy(size="3", kind="c")
  assert str(e.value) == ("_Toy: kind must be 'a' or 'b', got 'c'; size must be an integer, "
                          "got '3'")
  assert validation.failures(_Toy(size=3).checks(num_replicas=2)) == [
      "size 3 is not a multiple of 2"]


def test_rules_that_depend_on_the_machine_are_checked_again_with_it():
  toy = _Toy(size=3)  # Valid at construction (num_replicas=1).
  validation.validate(toy, num_replicas=3)
  with pytest.raises(ValueError, match=r"^_Toy: size 3 is not a multiple of 2$"):
    validation.validate(toy, num_replicas=2)


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
