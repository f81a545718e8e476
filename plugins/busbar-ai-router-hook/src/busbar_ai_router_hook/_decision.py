"""The decision engine: a local embedding model scores the state against each candidate.

Model: WordLlama ``l2_supercat`` (256 dimensions), whose weights and tokenizer ship inside the
``wordllama`` wheel: loaded once per process from the package directory with no network access
(WordLlama's own ``load()`` would try to download the tokenizer; it is never called). No torch.

Per instance, at ``configure``: each candidate's *prototype* is the normalized mean of the
normalized embeddings of its description and each of its examples. Per request: the state's
embedding is the normalized ``0.75 * current message + 0.25 * history`` (history only when there is
one); each candidate's *score* is the cosine similarity to its prototype, and the probabilities are
``softmax(scores / temperature)`` (``busbar hooks calibrate`` fits the temperature on labelled cases).

``MODEL_ID`` names the model in decisions and the explain object.
"""
from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

__all__ = ["MODEL_ID", "DecisionEngine", "load_model"]

MODEL_ID = "wordllama/l2_supercat_256"
_LOCK = threading.Lock()
_MODEL: Any = None


def load_model() -> Any:
    """The process-wide WordLlama inference object (loaded on first use, from the wheel's files)."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            import wordllama
            from safetensors import safe_open
            from tokenizers import Tokenizer
            from wordllama.inference import WordLlamaInference

            root = Path(wordllama.__file__).parent
            tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
            with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np", device="cpu") as f:
                embedding = f.get_tensor("embedding.weight")
            _MODEL = WordLlamaInference(embedding, tokenizer, binary=False)
        return _MODEL


class DecisionEngine:
    """Prototypes of one candidate set; :meth:`scores` and :meth:`probabilities` per request."""

    def __init__(self, candidates: list[tuple[str, str, tuple[str, ...]]]):
        import numpy as np

        self._np = np
        self.model = load_model()
        self.names = [name for name, _, _ in candidates]
        protos = []
        for _, description, examples in candidates:
            vecs = self.model.embed([description, *examples], norm=True)
            mean = vecs.mean(axis=0)
            protos.append(mean / (np.linalg.norm(mean) or 1.0))
        self.prototypes = np.stack(protos).astype(np.float32)

    def scores(self, current: str, history: str) -> dict[str, float]:
        """Cosine similarity of the state to each candidate's prototype, by candidate name."""
        np = self._np
        texts = [current or history or " "] + ([history] if history and current else [])
        vecs = self.model.embed(texts, norm=True)
        vec = vecs[0] if len(vecs) == 1 else 0.75 * vecs[0] + 0.25 * vecs[1]
        vec = vec / (np.linalg.norm(vec) or 1.0)
        sims = self.prototypes @ vec.astype(np.float32)
        return {n: float(s) for n, s in zip(self.names, sims)}

    @staticmethod
    def probabilities(scores: dict[str, float], temperature: float) -> dict[str, float]:
        """``softmax(scores / temperature)``, by name, summing to 1."""
        top = max(scores.values())
        exp = {n: math.exp((s - top) / temperature) for n, s in scores.items()}
        z = sum(exp.values())
        return {n: e / z for n, e in exp.items()}
