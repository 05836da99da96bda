"""The `tf.data` options every tfbert input pipeline ends with (`released_promptly`).

tf.data's autotuning starts a model thread with each iterator (`RootDataset`'s
`tf_data_model`), which re-tunes the pipeline at growing intervals: 10 ms at first,
doubling up to 60 s. When a Python object holding the iterator is freed late, as garbage
of a finished run collected by Python's cycle collector, the iterator's destructor waits
for that thread to end. In TensorFlow 2.20 it then waited out the thread's current interval
instead of waking it, while holding Python's global interpreter lock, so the whole process
stood still. Measured on a 1-layer classifier run in this repository (tests'
`classifier_run_test` settings): the run finished, its objects were held for 120 s, and the
`gc.collect()` that freed them took 20.0 s. With autotuning off for the run's batches, it
took 0.3 s. In the test suite the stalls were 20-84 s each, several per worker, spent by
whichever test happened to trigger the collection. A notebook running two fine-tunings in
a row pays the same.

With `autotune.enabled` off, no model thread is started. `num_parallel_calls=AUTOTUNE` then
runs as many calls as the machine has cores (at most 16), and `prefetch(AUTOTUNE)` sizes its
buffer with the prefetch's own tuner. tfbert's pipelines do little work per batch beside a
training step (BENCHMARKS.md, input pipeline), so they lose nothing that matters.
"""

import tensorflow as tf


def released_promptly(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset` with tf.data's autotuning model thread off (module docstring): its iterators
  are freed at once, whenever that happens. The iterator's checkpoint keys are unchanged
  (an options node forwards its input's iterator)."""
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


def autotunes(dataset: tf.data.Dataset) -> bool:
  """Whether iterators of `dataset` start the autotuning model thread."""
  return dataset.options().autotune.enabled is not False
