"""Real-looking inputs for the OCR models: words rendered in dark ink on light paper, with Qt.

Why: an OCR network judged on noise (or on stroke patterns it cannot read) answers near its
decision boundary, where any rounding flips the class: the PP-OCR direction classifier is 47-56%
right on drawn strokes, 95% right on rendered words, and quantization is judged on the latter.
Rendering uses the project's own Qt (offscreen, through the `qapp` fixture's application) and the
machine's fonts; a picture without ink means no font was found, which fails loudly rather than
testing on blank pages. Deterministic per seed; nothing is fetched.
"""

from __future__ import annotations

import numpy as np

WORDS = ("the quick brown fox jumps over lazy dog invoice total amount paid date number street city order "
         "item price receipt payment account balance march april ticket station").split()
DET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
DET_STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def _render(height: int, width: int, rng, lines: list[tuple[int, int, str]]) -> np.ndarray:
    """A [height, width] float32 page in [0, 1] with `lines` of (baseline y, pixel size, text)."""
    from PySide6.QtGui import QColor, QFont, QImage, QPainter

    img = QImage(width, height, QImage.Format.Format_Grayscale8)
    img.fill(int(rng.integers(200, 250)))
    painter = QPainter(img)
    for y, size, text in lines:
        font = QFont(["DejaVu Sans", "DejaVu Serif", "Sans Serif"][int(rng.integers(3))])
        font.setPixelSize(size)
        painter.setFont(font)
        ink = int(rng.integers(0, 70))
        painter.setPen(QColor(ink, ink, ink))
        painter.drawText(int(rng.integers(1, 6)), y, text)
    painter.end()
    raw = np.frombuffer(img.constBits(), np.uint8).reshape(height, img.bytesPerLine())[:, :width]
    page = raw.astype(np.float32) / 255 + rng.normal(0, 0.01, (height, width)).astype(np.float32)
    if (page < 0.5).mean() < 0.005:
        raise RuntimeError("no text was rendered: Qt found no font on this machine (install fonts-dejavu-core)")
    return np.clip(page, 0, 1)


def _words(rng, count: int) -> str:
    return " ".join(rng.choice(WORDS, count))


def text_line(seed: int, height: int = 48, width: int = 192, upside_down: bool = False) -> np.ndarray:
    """[3, height, width] in [0, 1]: one line of words (a text-line crop), turned 180 degrees if asked."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(height // 2, height * 3 // 4))
    gray = _render(height, width, rng, [(int(height * 0.5 + size * 0.36), size, _words(rng, 5))])
    if upside_down:
        gray = gray[::-1, ::-1]
    return np.stack([gray] * 3).astype(np.float32)


def text_page(height: int, width: int, seed: int = 0) -> np.ndarray:
    """[3, height, width] in [0, 1]: lines of words on a page."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(11, 17))
    lines = [(y, size, _words(rng, 12)) for y in range(size + 2, height - 2, int(size * 1.6))]
    return np.stack([_render(height, width, rng, lines)] * 3).astype(np.float32)


def detector_input(height: int, width: int, seed: int = 0) -> np.ndarray:
    """[1, 3, H, W] for PP-OCR's detector (ImageNet mean/std)."""
    return ((text_page(height, width, seed) - DET_MEAN) / DET_STD)[None].astype(np.float32)


def rapidocr_page(size: int, seed: int = 0) -> np.ndarray:
    """[1, 3, size, size] a page as rapidocr feeds PP-OCRv4's detector: x / 255, then (x - 0.5) / 0.5
    (its config.yaml Det mean/std; sides multiples of 32)."""
    return ((text_page(size, size, seed) - 0.5) / 0.5)[None].astype(np.float32)


def classifier_batch(count: int, seed: int = 0) -> np.ndarray:
    """[count, 3, 48, 192] text-line crops for PP-OCR's direction classifier ((x - 0.5) / 0.5), every
    other one upside down."""
    lines = [text_line(seed * 10_000 + i, upside_down=i % 2 == 1) for i in range(count)]
    return ((np.stack(lines) - 0.5) / 0.5).astype(np.float32)
