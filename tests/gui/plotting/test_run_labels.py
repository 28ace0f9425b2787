"""Runs told apart: each run in the legend and the run list by its history number and what differs from the others."""

from __future__ import annotations

from gui.plotting.plots import PlotsWidget

LABEL = "MLP · digits · default · batch 64"


def config(learning_rate: float, hooks: dict[str, str] | None = None) -> dict:
    """A stored run's config, as RunConfig.to_dict() writes it (the keys the labels read)."""
    return {"learning_rate": learning_rate, "optimizer": "adam", "precision": "off", "xla": False, "steps_per_call": 1,
            "steps": 300, "epochs": None, "seed": 0, "extra": {"hooks": hooks} if hooks else {}}  # fmt: skip


def shown_labels(plots: PlotsWidget) -> tuple[list[str], list[str]]:
    legend = [label.text for _, label in plots.loss_plot.getPlotItem().legend.items]
    run_list = [plots.run_list.item(row).text().splitlines()[0] for row in range(plots.run_list.count())]
    return legend, run_list


def test_labels_give_the_history_number_and_only_what_differs(qtbot):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    for key in ("a", "b"):
        plots.add_run(key, LABEL, [1.0, 0.9, 0.8], [0.2, 0.01, 0.01], 1, 64)
    assert shown_labels(plots) == ([LABEL, LABEL], [LABEL, LABEL]), "nothing known yet: the form's label"

    plots.describe_run("a", 12, config(0.1, {"tensorboard": "/tmp/tb"}))
    plots.describe_run("b", 13, config(0.01))
    legend, run_list = shown_labels(plots)
    assert run_list == [f"#12 {LABEL} · lr 0.1, TensorBoard", f"#13 {LABEL} · lr 0.01, no hooks"]
    assert legend == ["#12 · lr 0.1, TensorBoard", "#13 · lr 0.01, no hooks"], "the legend: number and differences"

    # A live run (no number yet) whose form label already names its hook: the hook is not named twice.
    plots.add_run("c", f"{LABEL} · TensorBoard", [1.0, 0.7], [0.2, 0.01], 1, 64)
    plots.describe_run("c", None, config(0.1, {"tensorboard": "/tmp/tb", "profile": "3-5"}))
    legend, run_list = shown_labels(plots)
    assert run_list[2] == f"{LABEL} · TensorBoard · lr 0.1, profiled 3-5" and legend[2] == "TensorBoard · lr 0.1, profiled 3-5"

    plots.remove_run("b")  # what differs is worked out again over the runs still shown
    legend, run_list = shown_labels(plots)
    assert run_list == [f"#12 {LABEL} · TensorBoard", f"{LABEL} · TensorBoard · profiled 3-5"]
    assert legend == ["#12 · TensorBoard", "TensorBoard · profiled 3-5"]
