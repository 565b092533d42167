"""Running an onnxruntime-genai generator to its end, as the genai tests compare it with eager."""

from __future__ import annotations

from typing import Any

import numpy as np


def logits_to_the_end(generator: Any) -> list[np.ndarray]:
    """Generate until ``generator`` is done; the logits each new token was chosen from (the first: the prompt's)."""
    logits = [generator.get_logits().copy()]
    while True:
        generator.generate_next_token()
        if generator.is_done():
            return logits
        logits.append(generator.get_logits().copy())
