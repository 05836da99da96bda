"""The README's "Python in five lines" snippets run as written, and do what their comments
say: the shipped MiniLM's similarity of the two sentences is sentence-transformers'
published 0.6660, and the classifier fine-tuned from Python labels new text."""

import contextlib
import io
import os
import re

import numpy as np
import pytest

from tests.helpers import ROOT

SECTION = "## Python in five lines"


def _snippets() -> list[str]:
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  section = text[text.index(SECTION):]
  section = section[:section.index("\n## ", len(SECTION))]
  return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_section_has_the_two_snippets_each_of_a_few_lines():
  snippets = _snippets()
  assert len(snippets) == 2
  assert len([line for line in snippets[0].splitlines() if line.strip()]) <= 5


def _run(snippet: str) -> tuple[dict, str]:
  namespace: dict = {}
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102  The README's code.
  return namespace, printed.getvalue()


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_the_embedding_snippet_prints_the_published_similarity():
  namespace, printed = _run(_snippets()[0])
  similarity = namespace["model"].similarity(namespace["embeddings"], namespace["embeddings"])
  np.testing.assert_allclose(similarity, [[1.0, 0.6660], [0.6660, 1.0]], atol=6e-5)
  assert "0.666" in printed


@pytest.mark.slow  # ~10 s: 12 MiniLM training steps at S 32.
def test_the_fine_tuning_snippet_learns_its_labels_and_classifies_new_text():
  namespace, printed = _run(_snippets()[1])
  classifier = namespace["classifier"]
  assert [r["label"] for r in classifier.classify(namespace["texts"])] == namespace["labels"]
  assert "'label': 'positive'" in printed
