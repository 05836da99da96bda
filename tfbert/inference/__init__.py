"""Raw text in, answers out, in Python: one loader for every model directory, and the task
calls (`encode`, `classify`, `tag`, `answer`, `fill_mask`) the task models offer.

  text_settings  the vocabulary, casing and sequence lengths a model reads text with
  raw_text       each task's raw-text call, through its export's raw-text signature
  loading        `tfbert.load`: any model directory or file -> a task model with its text
  exported       a SavedModel export behind the same calls
  saving         `tfbert.save`: a model as .keras, Hugging Face, sentence-transformers,
                 Google or an export

Nothing is imported here: the model classes import `text_inputs` and the rest imports them.
"""
