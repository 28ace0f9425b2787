"""Help > Quick start (F1): how to use the window, step by step, rendered from the Markdown below.

Pick a device and a model, Start, read the plots, compare, read the verdict, find
fast settings. Installing and the command line are the README's business; the
guide ends with where to find it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from core.workloads.models import MODELS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

GUIDE = """\
# Device Lab: quick start

How fast does this model train on each device, strategy and setting you have, and why?

## 1. Pick what to train, and where

- The **run form** on the left: **Model** (a sample model: {models}; or your own
  `.keras`, `.h5` or `.py` file), **Data set**, **Strategy** (one device, Mirrored over
  several, multi-worker processes, TPU) and **Device**.
- **Batch size** is the global batch (split over the replicas); **Steps** or epochs say how
  long; **Steps per call** runs several steps in one compiled call (less overhead between
  steps).
- The **Devices** tab lists what TensorFlow can use: CPUs, GPUs and TPUs with their memory,
  and notes on what is missing and how to get it. **Devices ▸ Device settings…** splits the
  CPU into logical devices or limits GPU memory (after a restart).

## 2. Start, and read the plots

- **Start** (Ctrl+R) trains in the background; **Stop** (Esc) ends the run after the step in
  flight. Every run, finished, stopped or failed, is saved in the **History** tab.
- The **Training** tab plots loss (top) and step time (bottom) against the step. Orange
  diamonds are warm-up steps (tracing, compiling): they are kept out of the figures and
  out of the y range. The faint line is the raw value, the bold one smoothed (**Smoothing**).
- The line above the plots gives the newest run's samples/s (steady state, warm-up
  excluded), median step time, warm-up time and last loss.
- The **Runs** list: each run is labelled with its history number (#12) and what sets it
  apart from the other runs shown (learning rate, hooks…). Untick a run to hide it.

## 3. Compare devices and strategies

- In the **Compare** tab, tick the targets (or type more, e.g.
  `GPU:1; mirrored:GPU:0,GPU:1; multi-worker:2`) and press **Compare**: the job from the run
  form runs on each target, with the same data and steps, in interleaved rounds (**Rounds**, 6
  by default: every round runs each target once, in a new random order, so a load that comes
  and goes hits all alike). A speed-up's 95% interval comes from the rounds; one that holds 1
  is marked ≈ (no difference beyond noise), and one round claims nothing.
- The table gives samples/s, step times, the speed-up against the baseline (orange bar;
  choose it under **Baseline** or right-click a row), scaling efficiency and % of peak.
- Read the **⚠ lines** under the table: they say when the runs are not a fair comparison
  (different settings or hooks, logical devices sharing the same cores, too few steps).
- **Scaling sweep** runs the job on 1, 2, … N devices. In **History**, select runs and press
  **Compare selected** to put them side by side without running them again.

## 4. Read the verdict

- Under the progress bar, a finished run shows its figures and its verdict: what limits
  its speed (computation, the input pipeline, or the time between steps; "unknown" when
  the run was too noisy to judge), the evidence measured against this machine's own
  ceilings, and what to try next.

## 5. Find fast settings

- The **Sweep** tab trains the job over the settings you choose (batch size, steps per call,
  precision, XLA…) and shows samples/s for each; **Use these settings** copies the best
  into the run form.
- The largest batch that fits and an automatic tuning of the settings start from the
  tuning box; their trials are not saved in the history (a sweep's points are).

## 6. Logging and profiling

- **Logging & profiling** in the run form writes TensorBoard logs (off the training thread:
  they cost the run almost nothing) and profiles steps A–B; **Open in TensorBoard** shows
  them. The hooks a run had on are saved with it and named in its label.

## Keys

Ctrl+R start · Esc stop · F5 detect devices again · Ctrl+S save the plots ·
Ctrl+L log · Ctrl+, device settings · F1 this guide

Installing, the command line (`python main.py run …`), the design and the benchmarks:
see the README{readme}.
"""


def guide_text() -> str:
    """The quick start as Markdown, pointing at the README where the source tree has one."""
    titles = [spec.title for spec in MODELS.values()]
    models = ", ".join(titles[:-1]) + " or " + titles[-1]
    return GUIDE.format(readme=f" ({README})" if README.is_file() else "", models=models)


class HelpDialog(QDialog):
    """The quick start in a scrollable, link-following text view."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("helpDialog")
        self.setWindowTitle("Device Lab quick start")
        self.browser = QTextBrowser()
        self.browser.setObjectName("helpBrowser")
        self.browser.setOpenExternalLinks(True)
        self.browser.setMarkdown(guide_text())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close the quick start (Esc).")
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser, 1)
        layout.addWidget(buttons)
        self.resize(self.fontMetrics().averageCharWidth() * 100, self.fontMetrics().height() * 40)
