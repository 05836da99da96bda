"""tools.benchmarks.benchmark_resume: near, far and far-without-position resumes, measured."""

import pytest
import tensorflow as tf

from tfbert_tools.benchmarks import benchmark_resume

# Odd sizes; a few documents; far = 25 applied steps of 3 (the data set repeats).
TINY = benchmark_resume.ResumeCase(near_sequences=6, far_sequences=75, batch_size=3,
                                   seq_length=32, max_predictions=5, num_layers=1,
                                   hidden_size=14, intermediate_size=19, rounds=1,
                                   max_documents=8)


@pytest.mark.slow
def test_the_three_resumes_are_timed_and_the_position_is_what_the_far_checkpoint_adds(
    tmp_path):
  result = benchmark_resume.measure(TINY, str(tmp_path))
  assert [len(result["seconds"][k]) for k in ("near", "far", "far_no_position")] == [1, 1, 1]
  assert all(s > 0 for values in result["seconds"].values() for s in values)
  # Each resume trained one step on from its checkpoint: near 2 -> 3, far 25 -> 26.
  assert benchmark_resume.latest_step(str(tmp_path / "near")) == 3
  assert benchmark_resume.latest_step(str(tmp_path / "far")) == 26
  far = tf.train.load_checkpoint(str(tmp_path / "far" / "checkpoints" / "ckpt-26"))
  assert "data_position" in {n.split("/")[0] for n in far.get_variable_to_shape_map()}
  assert result["iterator_state_bytes"] > 0
  assert result["ratio"] == result["medians"]["far"] / result["medians"]["near"]
  text = benchmark_resume.format_result(result)
  assert "| far | 75 |" in text and "| near | 6 |" in text and "far/near: **" in text
