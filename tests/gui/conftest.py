"""GUI fixtures: a fresh settings and history folder per test, and the real main window."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

DETECTION_TIMEOUT_MS = 120_000
RUN_TIMEOUT_MS = 180_000


@pytest.fixture(autouse=True)
def isolated_folders(tmp_path, monkeypatch):
    """Each test gets its own history and settings: nothing leaks between tests or into the user's."""
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DEVICE_LAB_SETTINGS_DIR", str(tmp_path / "settings"))
    return tmp_path


@pytest.fixture
def diagnose_runs() -> bool:
    """Whether the window diagnoses each completed run (Run > Diagnose each completed run).

    Off here: the probe runs take longer than most test runs. Tests of the verdict override this fixture.
    """
    return False


def opened_main_window(diagnose: bool, size: tuple[int, int] | None = None) -> Iterator:
    """The main window with the settings of this test's folder, diagnosing runs or not, shown (at `size`) and detecting
    devices; closed (waiting for its threads) when the generator ends."""
    from gui.main_window import MainWindow
    from gui.settings import KEY_DIAGNOSE, effective_runtime_settings, open_settings

    settings = open_settings()
    settings.setValue(KEY_DIAGNOSE, diagnose)
    runtime, note = effective_runtime_settings(settings)
    main_window = MainWindow(settings, runtime, note)
    if size is not None:
        main_window.resize(*size)
    main_window.show()
    main_window.start()
    yield main_window
    main_window.close()
    main_window.deleteLater()


@pytest.fixture
def window(qtbot, diagnose_runs) -> Iterator:
    """The main window, shown and detecting devices; closed (waiting for its threads) afterwards."""
    yield from opened_main_window(diagnose_runs)


@pytest.fixture
def ready_window(window, qtbot):
    """The main window once devices are listed and Start is enabled."""
    qtbot.waitUntil(window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
    return window


@pytest.fixture(scope="module")
def module_folders(tmp_path_factory):
    """One history and settings folder for a module whose tests share one window (`main_window`)."""
    return tmp_path_factory.mktemp("module-window")


@pytest.fixture
def shared_folders(isolated_folders, module_folders, monkeypatch):
    """The module's window keeps one history and settings folder: a module whose tests share it asks for this."""
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(module_folders / "data"))
    monkeypatch.setenv("DEVICE_LAB_SETTINGS_DIR", str(module_folders / "settings"))


@pytest.fixture(scope="module")
def main_window(qapp, module_folders) -> Iterator:
    """One main window at 1400x900 for a whole module, in its folders."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEVICE_LAB_DATA_DIR", str(module_folders / "data"))
        patch.setenv("DEVICE_LAB_SETTINGS_DIR", str(module_folders / "settings"))
        yield from opened_main_window(diagnose=False, size=(1400, 900))
