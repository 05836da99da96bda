"""Models saved by earlier tfbert code still load and compute the same.

`tests/fixtures/pre_move_*.keras` were written by `fine_tuning.save_without_optimizer` at
commit 83cf399, when every module sat directly under `tfbert/`; `pre_move_outputs.npz`
holds the features they were run on then and their outputs (training=False), computed by
that code. A later layout must load them through `tfbert`'s registered Keras names alone.
"""

import os

import keras
import numpy as np
import pytest

import tfbert  # noqa: F401  Registers the Keras classes.

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
MODELS = {"classifier": "BertClassifier", "span_labeler": "BertSpanLabeler",
          "pretrainer": "BertPretrainer"}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_saved_by_the_flat_layout_loads_and_gives_its_outputs(name):
  model = keras.saving.load_model(os.path.join(FIXTURES, f"pre_move_{name}.keras"),
                                  compile=False)
  assert type(model).__name__ == MODELS[name]
  with np.load(os.path.join(FIXTURES, "pre_move_outputs.npz")) as saved:
    features = {k.split("/")[1]: saved[k] for k in saved.files if k.startswith("features/")}
    if name != "pretrainer":
      del features["masked_lm_positions"]
    outputs = model(features, training=False)
    expected = {k.split("/")[1]: saved[k] for k in saved.files if k.startswith(name + "/")}
  assert sorted(expected) == sorted(k for k in outputs if k != "encoder_outputs")
  for key, value in expected.items():
    # Same weights and float32 ops: bit-equal on the machine that wrote them (measured);
    # 1e-5 leaves room for another CPU's oneDNN kernels (outputs are at most ~3.4).
    np.testing.assert_allclose(np.asarray(outputs[key]), value, rtol=0, atol=1e-5, err_msg=key)
