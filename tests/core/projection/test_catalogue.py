"""The device catalogue: every device the issue names, found by name or alias, its peaks the app's GPU table's, the measured ceilings its record's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.machine.peak_estimates import gpu_peak
from core.projection.catalogue import CATALOGUE, H100_RECORD, UnknownDevice, ceiling, device_names, find_device

ROOT = Path(__file__).resolve().parents[3]
NAMED = ["H100-SXM", "H100-PCIe", "H200", "A100-80GB", "A100-40GB", "L4", "L40S", "A10", "T4", "V100", "RTX-4090", "RTX-3090"]
TPUS = ["TPU-v4", "TPU-v5e", "TPU-v5p"]


def test_the_catalogue_holds_every_device_the_issue_names_each_with_memory_bandwidth_and_a_source() -> None:
    assert set(NAMED + TPUS) <= set(device_names())
    for device in CATALOGUE:
        assert device.memory_bytes >= 16 * 10**9 and device.bandwidth_bytes_s >= 300e9 and device.source
        assert device.peak("off") and device.peak("off") >= 8e12
        assert all(device.peak_how[precision] for precision in ("off", "float16", "bfloat16"))


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("H100", "H100-SXM"),
        ("h100 sxm", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("a100-40gb", "A100-40GB"),
        ("l4", "L4"),
        ("L40S", "L40S"),
        ("tpu v5e", "TPU-v5e"),
        ("RTX 4090", "RTX-4090"),
    ],
)
def test_a_device_is_found_by_its_name_or_an_alias_whatever_the_case_spaces_and_dashes(given: str, name: str) -> None:
    assert find_device(given).name == name


def test_an_unknown_device_is_refused_with_every_known_name() -> None:
    with pytest.raises(UnknownDevice) as refused:
        find_device("GTX 480")
    assert "'GTX 480'" in str(refused.value) and all(name in str(refused.value) for name in NAMED + TPUS)
    with pytest.raises(UnknownDevice) as ambiguous:
        find_device("A100")  # two cards: the name must say which
    assert "it names A100-80GB and A100-40GB: say which" in str(ambiguous.value)
    with pytest.raises(UnknownDevice) as ambiguous:
        find_device("tpu v")
    assert ambiguous.value.candidates == ["TPU-v4", "TPU-v5e", "TPU-v5p"]
    assert "TPU-v4, TPU-v5e and TPU-v5p: say which" in str(ambiguous.value)
    assert "say which" not in str(refused.value)


def test_gpu_peaks_are_the_apps_gpu_table_tf32_for_float32_where_the_card_has_it_and_none_for_missing_units() -> None:
    h100 = find_device("H100")
    assert h100.peak("off") == pytest.approx(494.7e12) and h100.peak("bfloat16") == pytest.approx(989.4e12)
    assert find_device("L4").peak("off") == pytest.approx(gpu_peak("L4").tf32 * 1e12)  # type: ignore[union-attr]
    t4 = find_device("T4")
    assert t4.peak("off") == pytest.approx(8.1e12) and t4.peak("float16") == pytest.approx(65e12) and t4.peak("bfloat16") is None
    assert "no bfloat16" in t4.peak_how["bfloat16"]


def test_a_tpu_computes_float32_at_its_bfloat16_peak_and_has_no_float16() -> None:
    v5e = find_device("TPU-v5e")
    assert v5e.kind == "TPU" and v5e.peak("off") == v5e.peak("bfloat16") == pytest.approx(197e12) and v5e.peak("float16") is None
    assert "bfloat16 passes" in v5e.peak_how["off"]


def test_the_h100s_measured_ceilings_are_its_records_and_scale_an_unmeasured_cards_datasheet() -> None:
    record = json.loads((ROOT / H100_RECORD).read_text())["ceilings"]["ceilings"]
    h100 = find_device("H100")
    assert ceiling(h100, "off")[0] == record["float32 default"]["ceiling_flops"]
    assert ceiling(h100, "bfloat16")[0] == record["bfloat16 default"]["ceiling_flops"]
    assert h100.ceilings["off"].fraction == pytest.approx(record["float32 default"]["fraction_of_estimate"])
    flops, how = ceiling(find_device("A100-80GB"), "off")
    assert flops == pytest.approx(156e12 * record["float32 default"]["fraction_of_estimate"]) and "no measurement of this card" in how
    assert ceiling(find_device("T4"), "bfloat16")[0] is None
