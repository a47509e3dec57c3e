"""Real-looking audio for silero-vad: formant-synthesised syllables between stretches of noise.

Why: a voice-activity model judged on noise or a bare chirp answers ~0.001 everywhere, where any
rounding is a large relative error (cosine 0.93 on such outputs for an int8 model that is fine on
speech), and nothing tells whether speech would still be detected. Syllables are made the way a
formant synthesiser makes vowels: harmonics of a gliding pitch (110-190 Hz) weighted by a
spectral envelope with three formant peaks that move from vowel to vowel, under a syllable
envelope, with a burst of high-passed noise (a consonant) before each; noise and silence around.
Deterministic per seed; numpy only.
"""

from __future__ import annotations

import numpy as np

SR = 16000
VOWELS = ((730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410))
BANDWIDTHS = (90.0, 110.0, 170.0)


def _envelope(freqs: np.ndarray, formants: np.ndarray) -> np.ndarray:
    """Spectral weight of each harmonic frequency: three resonance peaks and a -12 dB/octave tilt."""
    peaks = sum(1.0 / (1.0 + ((freqs - formants[i]) / bw) ** 2) for i, bw in enumerate(BANDWIDTHS))
    return peaks * (100.0 / np.maximum(freqs, 100.0))


def speech(seconds: float = 2.0, seed: int = 0, syllable: float = 0.22) -> np.ndarray:
    """Float32 mono audio at 16 kHz in [-1, 1]: 25% noise only, then syllables, then noise again."""
    rng = np.random.default_rng(seed)
    n = int(SR * seconds)
    t = np.arange(n) / SR
    start, end = 0.25 * seconds, 0.8 * seconds
    f0 = 150 + 40 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6)) + 3 * rng.standard_normal(n).cumsum() / np.sqrt(n)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    count = int(np.ceil((end - start) / syllable)) + 2
    targets = np.array([VOWELS[i] for i in rng.integers(len(VOWELS), size=count)], np.float64)
    position = np.clip((t - start) / syllable, 0, count - 1.001)
    index = position.astype(int)
    frac = np.clip((position - index) * 3, 0, 1)[:, None]  # glide into each vowel over the first third
    formants = targets[np.maximum(index - 1, 0)] * (1 - frac) + targets[index] * frac
    voiced = np.zeros(n)
    for k in range(1, 40):
        freqs = k * f0
        voiced += np.where(freqs < SR / 2 - 500, _envelope(freqs, formants.T), 0.0) * np.sin(k * phase)
    within = (position - index)
    shape = np.sin(np.pi * np.clip((within - 0.1) / 0.85, 0, 1)) ** 0.7  # each syllable swells and fades
    burst = np.diff(rng.standard_normal(n + 1)) * np.exp(-((within - 0.05) / 0.03) ** 2)  # a consonant
    inside = (t >= start) & (t < end)
    signal = np.where(inside, voiced / np.abs(voiced).max() * shape * 0.6 + 0.15 * burst, 0.0)
    signal += 0.01 * rng.standard_normal(n)  # room noise everywhere
    return np.clip(signal, -1, 1).astype(np.float32)
