"""Runs one MultiWorkerMirroredStrategy worker for tests; launched as a subprocess.

  python -m tests.multi_worker accumulate OUTPUT STEPS OPTIMIZER
  python -m tests.multi_worker keras_fit
  python -m tests.multi_worker embeddings OUTPUT LOSS
  python -m tests.multi_worker buckets OUTPUT

TF_CONFIG (set by the launching test) names the cluster and this worker's index. The worker
trains the accumulation test's model on its slice of every micro-batch and writes its final
weights and counters to OUTPUT.npz.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfbert.training.workers import free_ports, launch_workers  # noqa: E402,F401  (no TensorFlow)


def worker_command(*args: str) -> list[str]:
  """The command line that runs `main(*args)` in a worker process."""
  return [sys.executable, "-m", "tests.multi_worker", *args]


def accumulate(output: str, steps: str, optimizer_name: str) -> None:
  """Trains the accumulation test's model; writes weights to OUTPUT.<worker>.npz."""
  import numpy as np
  import tensorflow as tf

  from tests import training_loop
  from tests.training import accumulation_test
  from tfbert.training.accumulation import with_gradient_accumulation

  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  make = {"sgd": accumulation_test.sgd, "adamw": accumulation_test.adamw_with_schedule}
  with strategy.scope():
    optimizer = with_gradient_accumulation(make[optimizer_name](), int(steps))
  model = training_loop.accumulate_train(strategy, accumulation_test.model_fn, optimizer,
                                         accumulation_test.loss_fn,
                                         accumulation_test.windows(3), int(steps))
  index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  np.savez(f"{output}.{index}.npz", *[v.numpy() for v in model.trainable_variables],
           iterations=optimizer.iterations.numpy(), micro_step=optimizer.micro_step.numpy())


def keras_fit() -> None:
  """Plain Keras `fit` under MultiWorkerMirroredStrategy (keras-team/keras#20585)."""
  import keras
  import numpy as np
  import tensorflow as tf

  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  with strategy.scope():
    model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
  x = np.ones((8, 3), np.float32)
  try:
    model.fit(tf.data.Dataset.from_tensor_slices((x, x[:, :2])).batch(4), epochs=1, verbose=0)
  except Exception as e:  # noqa: BLE001 - report what upstream raises
    print(f"KERAS_FIT_FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    os._exit(0)  # Do not wait on a peer that may be stuck in a collective.
  print("KERAS_FIT_OK", flush=True)


def embeddings(output: str, loss: str) -> None:
  """Two steps of the sentence-embedding test's encoder on its global batch, each worker's
  replica on its slice; writes the weight updates and the loss to OUTPUT.<worker>.npz."""
  import numpy as np
  import tensorflow as tf

  from tests.embeddings import sentence_encoder_test

  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  updates, last_loss = sentence_encoder_test.train_replicated(strategy, loss)
  index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  np.savez(f"{output}.{index}.npz", *updates, loss=last_loss)


def buckets(output: str) -> None:
  """The length-bucket test's tagger (tests/tasks/length_buckets_test.py) fine-tuned with its
  batches cut to their buckets, one replica per worker; writes the final weights to
  OUTPUT.<worker>.npz and the run directory to OUTPUT."""
  import numpy as np
  import tensorflow as tf

  from tests.tasks import length_buckets_test

  strategy = tf.distribute.MultiWorkerMirroredStrategy()  # Before any op.
  weights, result, _ = length_buckets_test.train_on(strategy, output)
  index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  np.savez(f"{output}.{index}.npz", *weights, steps=result["steps"])


if __name__ == "__main__":
  {"accumulate": accumulate, "keras_fit": keras_fit, "embeddings": embeddings,
   "buckets": buckets}[sys.argv[1]](*sys.argv[2:])
