"""Save several pyqtgraph plots, stacked top to bottom, as one PNG or SVG file.

pyqtgraph 0.14's SVG exporter fails on the closed paths ("... Z") that Qt 6.11's
SVG generator writes (pyqtgraph/pyqtgraph#3495, fixed upstream after 0.14.0).
`_install_closed_path_fix` rewrites each "Z" as a line back to the sub-path's
start before pyqtgraph parses the path: the same outline, in a form it reads.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter, SVGExporter
from PySide6.QtGui import QColor, QImage, QPainter

MIN_PNG_WIDTH = 800


def save_plots(items: Sequence[pg.PlotItem], path: str | Path) -> Path:
    """Write `items` to `path` (PNG unless the suffix is .svg); returns the path written."""
    path = Path(path)
    if path.suffix.lower() == ".svg":
        _install_closed_path_fix()
        documents = [SVGExporter(item).export(toBytes=True).decode("utf-8") for item in items]
        path.write_text(stack_svgs(documents), encoding="utf-8")
        return path
    if path.suffix.lower() != ".png":
        path = path.with_suffix(".png")
    images = []
    for item in items:
        exporter = ImageExporter(item)
        exporter.parameters()["width"] = max(MIN_PNG_WIDTH, int(item.sceneBoundingRect().width()))
        images.append(exporter.export(toBytes=True))
    if not stack_images(images).save(str(path)):
        raise OSError(f"Could not write {path}: check that the folder exists and is writable.")
    return path


def stack_images(images: Sequence[QImage]) -> QImage:
    """The images one below the other on white."""
    width = max(image.width() for image in images)
    stacked = QImage(width, sum(image.height() for image in images), QImage.Format.Format_ARGB32)
    stacked.fill(QColor("white"))
    painter = QPainter(stacked)
    top = 0
    for image in images:
        painter.drawImage(0, top, image)
        top += image.height()
    painter.end()
    return stacked


def stack_svgs(documents: Sequence[str]) -> str:
    """One SVG document holding several, one below the other (ids made unique, no nested <svg>)."""
    parts, top, width = [], 0, 0
    for index, document in enumerate(documents):
        match = re.search(r'viewBox\s*=\s*"0 0 (\d+) (\d+)"', document)
        w, h = (int(match.group(1)), int(match.group(2))) if match else (800, 400)
        body = document[document.index(">", document.index("<svg")) + 1 : document.rindex("</svg>")]
        body = re.sub(r"<title>.*?</title>|<desc>.*?</desc>", "", body, flags=re.S)
        body = body.replace('width="100%" height="100%"', f'width="{w}" height="{h}"')
        prefix = f"plot{index}_"
        body = re.sub(r'id="([^"]+)"', rf'id="{prefix}\1"', body)
        body = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", body)
        body = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}\1"', body)
        parts.append(f'<g transform="translate(0,{top})">{body}</g>')
        top += h
        width = max(width, w)
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" version="1.2" '
        f'baseProfile="tiny" width="{width}" height="{top}" viewBox="0 0 {width} {top}">\n'
        "<title>Device Lab plots</title>\n" + "\n".join(parts) + "</svg>\n"
    )


def close_paths_as_lines(d: str) -> str:
    """SVG path data with each close-path command replaced by a line to the sub-path's start."""
    tokens, start = [], None
    for token in d.split():
        if token in ("Z", "z"):
            if start is not None:
                tokens.append("L" + start)
            continue
        if token[0] == "M":
            start = token[1:]
        tokens.append(token)
    return " ".join(tokens)


def _install_closed_path_fix() -> None:
    module = sys.modules[SVGExporter.__module__]
    original = module.correctCoordinates
    if getattr(original, "_closes_paths", False):
        return

    def correct_coordinates(node, defs, item, options):
        for path in node.getElementsByTagName("path"):
            d = path.getAttribute("d")
            if "Z" in d or "z" in d:
                path.setAttribute("d", close_paths_as_lines(d))
        return original(node, defs, item, options)

    correct_coordinates._closes_paths = True  # type: ignore[attr-defined]  # the mark that it is patched once
    module.correctCoordinates = correct_coordinates  # type: ignore[attr-defined]  # pyqtgraph's private SVG helper
