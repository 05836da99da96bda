"""Tests for tfbert.runtime.json_values: results are JSON every parser reads; JSON files are
read strictly (a key given twice refused) wherever tfbert reads one."""

import json
import math
import re

import pytest

from tfbert.checkpoints import huggingface
from tfbert.config import BertConfig
from tfbert.embeddings import embedding_data, sentence_transformers
from tfbert.inference import loading
from tfbert.pretraining import data_checks, pretraining_init
from tfbert.runtime import json_values
from tfbert.serving import serving_dtype, tflite_export
from tfbert.squad import squad_data
from tfbert.text import casing


def _strict(text):
  def refuse(token):
    raise ValueError(f"not JSON: {token}")
  return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth():
  value = {"f1": math.nan, "rows": [1.5, -math.inf, (math.inf, 2)], "name": "x", "n": 3}
  text = json_values.dumps(value, sort_keys=True)
  assert _strict(text) == {"f1": None, "n": 3, "name": "x", "rows": [1.5, None, [None, 2]]}
  with pytest.raises(ValueError, match="not JSON: NaN"):  # What Python's json writes.
    _strict(json.dumps(value))


def test_number_reads_null_back_as_nan():
  assert math.isnan(json_values.number(None))
  assert json_values.number(2) == 2.0 and isinstance(json_values.number(2), float)


def test_loads_refuses_a_key_given_twice_at_any_depth_naming_source_key_and_values():
  assert json_values.loads('{"a": {"b": 1}, "c": [{"b": 2}]}', "x") == {
      "a": {"b": 1}, "c": [{"b": 2}]}  # One key per object: the same key in two is fine.
  with pytest.raises(ValueError, match=r"^f.jsonl:3: key 'b' appears twice in one JSON "
                     r"object \(1, then \[2\]\); which one is meant cannot be told: keep one$"):
    json_values.loads('{"a": [{"b": 1, "b": [2]}]}', "f.jsonl:3")


def test_read_names_the_file_of_bad_json_and_drops_a_byte_order_mark(tmp_path):
  path = tmp_path / "c.json"
  path.write_bytes(b'\xef\xbb\xbf{"a": 1}')
  assert json_values.read(str(path)) == {"a": 1}
  path.write_text('{"a": 1,\n}')
  with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: not valid JSON \(.*line 2"):
    json_values.read(str(path))


def _summary_vocab_size(directory):
  return pretraining_init._data_vocab_size(  # pylint: disable=protected-access
      {"summaries": [str(directory / "data-summary.json")]})


# (file written, how tfbert reads it) of every JSON file read as configuration or data.
# pylint: disable=protected-access
READERS = {
    "bert_config": ("bert_config.json",
                    lambda d: BertConfig.from_json_file(str(d / "bert_config.json"))),
    "hf_config": ("config.json", lambda d: BertConfig.from_hf_json_file(str(d / "config.json"))),
    "hf_task": ("config.json", lambda d: huggingface.read_hf_task(str(d))),
    "tokenizer_casing": ("tokenizer_config.json", lambda d: casing.checkpoint_casing(str(d))),
    "run_casing": ("run_config.json", lambda d: casing.checkpoint_casing(str(d))),
    "tflite_run_config": ("run_config.json",
                          lambda d: tflite_export.run_config_of(str(d / "model.keras"))),
    "tflite_sidecar": ("bert_config.json", lambda d: tflite_export._check_sidecars(
        str(d / "m.tflite"), str(d), {}, None, None)),
    "text_settings": ("text_settings.json",
                      lambda d: loading._saved_settings(str(d / "model.keras"))),
    "tokenizer_length": ("tokenizer_config.json",
                         lambda d: loading._recorded_max_length(str(d))),
    "serving_record": ("serving.json", serving_dtype.read_record),
    "sentence_transformers": ("modules.json",
                              lambda d: sentence_transformers.read_config(str(d))),
    "data_summary": ("data-summary.json", lambda d: data_checks.data_summaries(
        [str(d / "data-00000-of-00001.tfrecord")])),
    "summary_vocab_size": ("data-summary.json", _summary_vocab_size),
    "embedding_jsonl": ("pairs.jsonl",
                        lambda d: embedding_data.read_examples(str(d / "pairs.jsonl"))),
    "squad": ("train.json", lambda d: squad_data.load_json(str(d / "train.json"))),
}
# pylint: enable=protected-access


@pytest.mark.parametrize("reader", READERS)
def test_every_json_file_read_as_configuration_or_data_refuses_a_key_given_twice(
    tmp_path, reader):
  # Old code: read with json.loads, the last hidden_size won (sweep 6, C16); only SQuAD
  # files were refused (without the values).
  name, read = READERS[reader]
  text = '{"hidden_size": 32, "hidden_size": 64}'
  (tmp_path / name).write_text(f"[{text}]" if name == "modules.json" else text)
  where = re.escape(str(tmp_path / name)) + (":1" if name.endswith(".jsonl") else "")
  with pytest.raises(ValueError, match=rf"{where}: key 'hidden_size' appears twice in one "
                     r"JSON object \(32, then 64\)"):
    read(tmp_path)


@pytest.mark.parametrize("text, problem", [
    ("[" * 100_000, r"arrays or objects nested too deeply \(more than about \d+ levels"),
    ('{"n": ' + "1" * 5000 + "}", r"an integer of more than \d+ digits"),
])
@pytest.mark.parametrize("reader", READERS)
def test_every_json_file_the_parser_cannot_read_is_refused_naming_the_file(
    tmp_path, reader, text, problem):
  # Old code: a RecursionError traceback (sweep 8, ES08: evaluate_squad on 100,000 nested
  # '['), or Python's bare ValueError about sys.set_int_max_str_digits, naming no file.
  name, read = READERS[reader]
  (tmp_path / name).write_text(text)
  where = re.escape(str(tmp_path / name)) + (":1" if name.endswith(".jsonl") else "")
  with pytest.raises(ValueError, match=rf"{where}.*{problem}") as caught:
    read(tmp_path)
  assert "set_int_max_str_digits" not in str(caught.value)


def test_read_says_cannot_be_read_not_invalid_for_json_nested_too_deeply(tmp_path):
  path = tmp_path / "p.json"
  path.write_text("[" * 100_000 + "]" * 100_000)  # Valid JSON, deeper than Python reads.
  with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: cannot be read as JSON "
                     r"\(arrays or objects nested too deeply"):
    json_values.read(str(path))
