"""A lookup layer whose vocabulary is a file path (as tf.keras 2 saves it) opens with trust, not as "a lambda" (issue 38, item 15).

Keras reads a vocabulary file outside the model only for a trusted file; its refusal once read "the model holds
Python code (a lambda)". A real .h5 saved by the real tf.keras 2 (`tf-keras`, in a child Python with its own Keras).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.workloads.model_file import ModelFileError
from core.workloads.user_workload import open_user_workload

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
WORDS = ("cat", "dog", "bird")
TF_KERAS_SAVER = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tf_keras as k

vocabulary, path = sys.argv[1], sys.argv[2]
text = k.Input((1,), dtype="string", name="text")
ids = k.layers.StringLookup(vocabulary=vocabulary)(text)
pooled = k.layers.Flatten()(k.layers.Embedding(8, 4)(ids))
k.Model(text, k.layers.Dense(2)(pooled)).save(path)
"""


@pytest.fixture
def lookup_h5(tmp_path) -> tuple[Path, Path]:
    """(the .h5, its vocabulary file): a StringLookup reading its words from the file, saved by tf.keras 2."""
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    path = tmp_path / "lookup.h5"
    done = subprocess.run([sys.executable, "-c", TF_KERAS_SAVER, str(vocabulary), str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return path, vocabulary


def test_untrusted_it_asks_for_trust_naming_the_vocabulary_file_not_a_lambda_and_trusted_it_opens(lookup_h5):
    path, vocabulary = lookup_h5
    with pytest.raises(ModelFileError) as refused:
        open_user_workload(path)
    assert refused.value.needs_trust and "lambda" not in refused.value.reason
    assert "StringLookup" in refused.value.reason and str(vocabulary) in refused.value.reason and "--trust" in refused.value.reason
    [text] = open_user_workload(path, trust=True).describe()["inputs"]
    assert text["name"] == "text" and tuple(text["words"]) == WORDS and "StringLookup" in text["vocab_source"]


def test_a_missing_vocabulary_file_is_one_line_naming_it(lookup_h5, tmp_path):
    path, vocabulary = lookup_h5
    vocabulary.unlink()
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    args = ["run", "--model", str(path), "--trust", "--steps", "2", "--no-verdict"]
    out = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: ") and f"{vocabulary}, which does not exist here" in line, line
    assert "Traceback" not in out.stderr and out.stdout == ""
