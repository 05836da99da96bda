"""How every tfbert config checks itself: every problem at once, each naming its fields.

Each config is a frozen dataclass with a `checks()` method that yields `(ok, message)`
pairs, one per rule, the message naming the field(s) the rule is about and the value found.
`__post_init__` calls `validate(self)`, so an invalid config cannot be built. A rule that
depends on the machine (how many replicas share the batch) takes `num_replicas`, 1 at
construction; a run calls `validate(config, num_replicas=n)` again once its strategy is
known.

`checks()` may be a generator: a rule that needs earlier ones to hold (a type check before
a range check) can stop the generator after them.

Before its rules, every field of a config is checked against its annotation (`field_types`):
an int, float, bool or str field (Optional: or None) and a Sequence[str] field (a list or
tuple of str, never one str read letter by letter) refuse a value of another type, naming
the field, what it takes and the value, so no rule (and no run) reads a value of the wrong
kind: a threshold given as the string "0.5" is refused, not compared with a float.

An integer argument or field of the Python API is any integer a caller may hold (`is_int`:
Python's, NumPy's `np.int64(2)`, but not a bool) and is kept as a plain int (`plain_int`;
`validate` makes a config's fields so first): JSON, `range` and TensorFlow then read it as
they read an int. A float (even 2.0), a bool or a string stays refused.
"""

import collections.abc
import dataclasses
import functools
import inspect
import math
import numbers
import typing
from typing import Any, Callable, Iterable, Optional

import numpy as np

Check = tuple[Any, str]


def batch_splits(train_batch_size: int, gradient_accumulation_steps: int,
                 num_replicas: int) -> Check:
  """The rule of every training config: the global batch splits into equal micro-batches.

  `train_batch_size` examples per applied step = `gradient_accumulation_steps` micro-steps
  x `num_replicas` replicas x a whole number of examples each.
  """
  if train_batch_size < 1 or gradient_accumulation_steps < 1:
    return (False, f"train_batch_size ({train_batch_size}) and gradient_accumulation_steps "
            f"({gradient_accumulation_steps}) must be >= 1")
  return (train_batch_size % (gradient_accumulation_steps * num_replicas) == 0,
          f"train_batch_size {train_batch_size} must be a multiple of "
          f"gradient_accumulation_steps ({gradient_accumulation_steps}) x replicas "
          f"({num_replicas})")


def seed_check(name: str, seed: int) -> Check:
  """A seed is what NumPy's and TensorFlow's generators take: an integer in [0, 2**32)."""
  return (0 <= seed < 2**32, f"{name} ({seed}) must be in [0, 2**32)")


def is_int(value: Any) -> bool:
  """Whether `value` is an integer of the API's kind: any `numbers.Integral` (NumPy's
  integers too) but not a bool (True is no count)."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
  """Whether `value` is a real number (NumPy's too) that is finite, and not a bool: NaN
  passes every `< 0` and `<= 0` test, and a NaN or inf rate or norm trains every weight to
  NaN (sweep 34, B42, B59)."""
  return (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(value))


def plain_int(name: str, value: Any, minimum: int = 1) -> int:
  """`value` (an integer argument named `name`) as a plain int.

  Raises:
    ValueError: "<name> must be an int >= <minimum>, got <value!r>" when it is not an
      integer (`is_int`) or is below `minimum`.
  """
  if not is_int(value) or value < minimum:
    raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
  return int(value)


def plain_bool(name: str, value: Any, *, optional: bool = False) -> Optional[bool]:
  """`value`, a bool argument of the Python API named `name`, as a plain bool (None kept
  when `optional`). NumPy's `np.bool_` is a bool; a str ("true", "False") or an int is not:
  `bool("false")` is True, so taking its truth would invert the caller's choice.

  Raises:
    ValueError: "<name> must be True or False (, or None), got <value!r>".
  """
  if value is None and optional:
    return None
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  allowed = "True, False or None" if optional else "True or False"
  raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _plain_fields(config: Any) -> None:
  """Replaces each field of the dataclass `config` (frozen too) that holds an integer of
  another type (`np.int64(8)`) with the plain int, a NumPy bool with the plain bool, and a
  NumPy float with the plain float (as JSON records them)."""
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if is_int(value) and type(value) is not int:  # pylint: disable=unidiomatic-typecheck
      object.__setattr__(config, field.name, int(value))
    elif isinstance(value, np.bool_):
      object.__setattr__(config, field.name, bool(value))
    elif isinstance(value, np.floating):
      object.__setattr__(config, field.name, float(value))


_KINDS = {int: "an int", float: "a number", bool: "True or False", str: "a str"}


def _of_kind(kind: type, value: Any) -> bool:
  """Whether `value` is of the field kind `kind` (an int or float counts as a number)."""
  if kind is bool:
    return isinstance(value, (bool, np.bool_))
  if kind is int:
    return is_int(value)
  if kind is float:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
  return isinstance(value, kind)


def _kind_of(name: str, hint: Any, default: Any) -> Optional[tuple[str, Any, bool, bool]]:
  """(name, kind, optional, sequence) of an annotation `hint` that is int, float, bool, str
  or Sequence[str], possibly Optional (or with a None default); None for any other."""
  optional = default is None
  args = typing.get_args(hint)
  if typing.get_origin(hint) is typing.Union and type(None) in args:
    optional = True
    rest = [a for a in args if a is not type(None)]
    hint = rest[0] if len(rest) == 1 else None
  sequence = (typing.get_origin(hint) is collections.abc.Sequence
              and typing.get_args(hint) == (str,))
  kind = str if sequence else hint
  return (name, kind, optional, sequence) if kind in _KINDS else None


@functools.cache
def _field_kinds(cls: type) -> tuple[tuple[str, Any, bool, bool], ...]:
  """(name, kind, optional, sequence) of each field of `cls` whose annotation is int,
  float, bool, str or Sequence[str], each possibly Optional; other fields are not listed."""
  hints = typing.get_type_hints(cls)
  kinds = (_kind_of(field.name, hints.get(field.name), field.default)
           for field in dataclasses.fields(cls))
  return tuple(kind for kind in kinds if kind is not None)


@functools.cache
def _argument_kinds(function: Callable) -> tuple[tuple[str, Any, bool, bool], ...]:
  """As `_field_kinds`, for the annotated parameters of `function`."""
  hints = typing.get_type_hints(function)
  kinds = (_kind_of(name, hints.get(name), parameter.default)
           for name, parameter in inspect.signature(function).parameters.items())
  return tuple(kind for kind in kinds if kind is not None)


def _type_problems(kinds, value_of: Callable[[str], Any]) -> list[str]:
  """One message per (name, kind, optional, sequence) of `kinds` whose value is not of it."""
  problems = []
  for name, kind, optional, sequence in kinds:
    value = value_of(name)
    if value is None and optional:
      continue
    what = ("a list of str" if sequence else _KINDS[kind]) + (" or None" if optional else "")
    if sequence:
      ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    else:
      ok = _of_kind(kind, value)
    if not ok:
      problems.append(f"{name} must be {what}, got {value!r}")
  return problems


def field_types(config: Any) -> list[str]:
  """The type problems of the dataclass `config`: one message per field whose value is not
  of its annotated kind ("<field> must be an int (or None), got <value!r>"); a
  Sequence[str] field must be a list or tuple of str. A class whose `checks()` type-check
  every field themselves, in words of their own, says so with `OWN_TYPE_CHECKS = True`."""
  if getattr(config, "OWN_TYPE_CHECKS", False):
    return []
  return _type_problems(_field_kinds(type(config)), lambda name: getattr(config, name))


def typed_arguments(*checked_by_itself: str) -> Callable[[Callable], Callable]:
  """A decorator of a class's `__init__`: every argument annotated int, float, bool, str or
  Sequence[str] (possibly Optional), but those `checked_by_itself` (whose own message says
  more), is of that kind before the constructor runs, as `field_types` checks a config's
  fields: `normalize="false"` (which `bool()` reads as True) and `dropout_rate="0.1"` (which
  failed deep in Keras, naming no argument) are refused naming the class, the argument,
  what it takes and the value. An integer of NumPy's is an int, an int a number
  (`_of_kind`).

  Raises (the decorated constructor):
    ValueError: "<Class>: <argument> must be <kind>, got <value!r>; ...".
  """

  def decorate(constructor: Callable) -> Callable:
    signature = inspect.signature(constructor)

    @functools.wraps(constructor)
    def checked(self, *args, **kwargs):
      try:
        given = signature.bind_partial(self, *args, **kwargs).arguments
      except TypeError:  # Python's own message (an unknown keyword...) says it best.
        return constructor(self, *args, **kwargs)
      kinds = [kind for kind in _argument_kinds(constructor)
               if kind[0] in given and kind[0] not in checked_by_itself]
      problems = _type_problems(kinds, given.__getitem__)
      if problems:
        raise ValueError(f"{type(self).__name__}: {'; '.join(problems)}")
      return constructor(self, *args, **kwargs)

    return checked

  return decorate


def checked_rate(name: str, value: float) -> float:
  """A dropout rate `value` (argument `name`) in [0, 1), as a float.

  Raises:
    ValueError: "<name> must be in [0, 1) (...), got <value!r>", naming the argument where
      Keras' own check names an inner layer (`dropout_164`).
  """
  if not _of_kind(float, value) or not 0 <= value < 1:
    raise ValueError(f"{name} must be a number in [0, 1) (the share of units dropped in "
                     f"training), got {value!r}")
  return float(value)


def failures(checks: Iterable[Check]) -> list[str]:
  """The messages of the checks whose condition is false."""
  return [message for ok, message in checks if not ok]


def validate(config: Any, **context: Any) -> None:
  """Raises one ValueError listing every rule of `config.checks(**context)` that fails;
  first refuses a field of another type than its annotation (`field_types`: then only those
  are listed, since the rules read typed values), and before that makes each field of a
  dataclass `config` holding a NumPy integer, bool or float a plain int, bool or float.

  Raises:
    ValueError: "<ConfigClass>: <message>; <message>...".
  """
  found = []
  if dataclasses.is_dataclass(config):
    _plain_fields(config)
    found = field_types(config)
  found = found or failures(config.checks(**context))  # The rules compare typed values.
  if found:
    raise ValueError(f"{type(config).__name__}: {'; '.join(found)}")
