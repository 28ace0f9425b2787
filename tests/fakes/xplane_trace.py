"""Hand-made profiler traces (XSpace files): a GPU's planes cannot be captured on this machine.

The real captures are tested from real runs (tests/core/hooks/test_trace_summary.py);
these stand in for what a GPU run would write, and give dialogs a trace with known figures.
"""

from __future__ import annotations

from pathlib import Path

from core.hooks.trace_summary import xplane_module

Event = tuple[str, int, int, str]  # name, offset (ps), duration (ps), the TensorFlow op that launched it ("" for none)


def write_trace(folder: Path, planes: list[tuple[str, dict[str, list[Event]]]]) -> Path:
    """A capture under `folder/plugins/profile/<time>/` of planes (name, {line name: events}); returns `…/plugins/profile`."""
    space = xplane_module().XSpace()
    for plane_name, lines in planes:
        plane = space.planes.add(name=plane_name)
        plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "tf_op"
        for line_id, (line_name, events) in enumerate(lines.items()):
            line = plane.lines.add(id=line_id, name=line_name)
            for event_name, offset, duration, tf_op in events:
                meta_id = next((k for k, m in plane.event_metadata.items() if m.name == event_name), len(plane.event_metadata) + 1)
                plane.event_metadata[meta_id].id, plane.event_metadata[meta_id].name = meta_id, event_name
                event = line.events.add(metadata_id=meta_id, offset_ps=offset, duration_ps=duration)
                if tf_op:
                    ref = next((k for k, m in plane.stat_metadata.items() if m.name == tf_op), len(plane.stat_metadata) + 1)
                    plane.stat_metadata[ref].id, plane.stat_metadata[ref].name = ref, tf_op
                    event.stats.add(metadata_id=1, ref_value=ref)
    capture = folder / "plugins" / "profile" / "2026_01_01_00_00_00"
    capture.mkdir(parents=True)
    (capture / "host.xplane.pb").write_bytes(space.SerializeToString())
    return folder / "plugins" / "profile"
