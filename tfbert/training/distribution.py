"""Creates the `tf.distribute` strategy of a run: one device, mirrored, or multi-worker; and
the names of the precision policies (`DTYPES`) a run may train in.

Logical CPU devices let `MirroredStrategy` run with several replicas on one CPU (tests,
alignment runs). They must be configured before TensorFlow initializes its devices, so
`configure_cpu_devices` is the first thing a tool does.
"""

import os

import tensorflow as tf

from tfbert.runtime import validation

STRATEGIES = ("one_device", "mirrored", "multi_worker")
# The precision policies a run may train in (Keras' names); mixed_float16 adds loss scaling.
# `tfbert.tasks.precision` checks that this CPU computes each right.
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")


def configure_cpu_devices(count: int) -> None:
  """Splits the CPU into `count` logical devices (no-op for 1 or if already configured).

  Raises:
    RuntimeError: when TensorFlow was initialized with another device count.
  """
  cpu = tf.config.list_physical_devices("CPU")[0]
  if count <= 1:
    return
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count)
  except RuntimeError:
    existing = len(tf.config.list_logical_devices("CPU"))
    if existing != count:
      raise RuntimeError(f"TensorFlow is already initialized with {existing} logical CPU "
                         f"devices; {count} were asked for") from None


def create_strategy(name: str, num_devices: int = 1) -> tf.distribute.Strategy:
  """Returns the strategy `name` over `num_devices` local devices (CPUs unless GPUs exist).

  `multi_worker` reads the cluster from TF_CONFIG (one device per worker).

  Raises:
    ValueError: `name` is not one of `STRATEGIES`; `num_devices` is not an int >= 1 (for
      every strategy: 0 or -2 gave a mirrored strategy of 1 replica, and one_device over 0
      devices an IndexError; sweep 34, B107-B109); or fewer devices exist.
  """
  if name not in STRATEGIES:
    raise ValueError(f"distribution strategy must be one of {STRATEGIES}, got {name!r}")
  num_devices = validation.plain_int("num_devices", num_devices, minimum=1)
  if name == "multi_worker":
    if "TF_CONFIG" not in os.environ:
      raise ValueError("multi_worker needs TF_CONFIG naming the cluster and this worker")
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))][:num_devices]
  if len(devices) < num_devices:
    raise ValueError(f"{num_devices} devices asked for, {len(devices)} available "
                     "(set the number of logical CPU devices)")
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy(devices[0])
  if gpus:
    return tf.distribute.MirroredStrategy(devices)
  # Logical CPUs share memory: reducing on one device costs nothing extra, and unlike the
  # default collective ops it cannot collide with another strategy's collective instance
  # keys in the same process ("Shape mismatch in the collective instance ...").
  return tf.distribute.MirroredStrategy(devices,
                                        cross_device_ops=tf.distribute.ReductionToOneDevice())


def worker_info(strategy: tf.distribute.Strategy) -> tuple[int, int, bool]:
  """(number of workers, this worker's index, is chief) of a strategy."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.cluster_spec().as_dict():
    return 1, 0, True
  num_workers = resolver.cluster_spec().num_tasks("worker")
  index = resolver.task_id or 0
  return num_workers, index, index == 0


class LocalBatches:
  """One worker's dataset handed to its local replicas, from a checkpointable iterator.

  `next(batches)` is one `PerReplica` value: local replica r gets the r-th of the next
  `num_replicas_in_sync / num_workers` elements of `dataset`, the assignment
  `distribute_datasets_from_function` makes (its `MultiDeviceIterator` deals elements to
  the devices in turn), so a replica sees the same batches either way. The difference is
  the position: `iterator` is a plain `tf.data` iterator, which `tf.train.Checkpoint`
  saves (file offsets, shuffle and prefetch buffers) and restores, while a distributed
  iterator is not trackable (tensorflow/tensorflow#56372). A resumed run then continues
  where the checkpoint was taken, without re-reading the records it consumed.

  Works inside a `tf.function` (`next` is traced once per local replica, in replica
  order) and eagerly.

  Attributes:
    iterator: the `tf.data` iterator (checkpoint it).
  """

  def __init__(self, strategy: tf.distribute.Strategy, dataset: tf.data.Dataset):
    self.strategy = strategy
    self.iterator = iter(dataset)

  def __iter__(self) -> "LocalBatches":
    return self

  def __next__(self):
    return self.strategy.experimental_distribute_values_from_function(
        lambda context: next(self.iterator))
