"""The lexical baseline: TF-IDF cosine similarity between an agent state and each option's words.

It is an honest floor, not a competitor: any decision model worth delegating to should beat it. The
per-option-set work (tokenising names and descriptions, IDF, norms) is cached, because a sweep asks
thousands of questions over the same 69 or 129 tools and only the state changes between requests.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import orjson

__all__ = ["OptionIndex", "lexical_probabilities", "query_text", "softmax", "tokenize"]

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SECTION = re.compile(r"^(TASK|HISTORY|CURRENT OBSERVATION):", re.MULTILINE)
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "i", "in", "is", "it"}
    | {"its", "me", "my", "of", "on", "or", "our", "please", "the", "this", "to", "was", "we", "with", "you"}
    | {"your"}
)

# Softmax temperature over cosine similarities in [0, 1]. Small enough that a clear lexical match
# dominates, large enough that near-ties keep comparable probabilities (calibration stays honest).
DEFAULT_TEMPERATURE = 0.1


def _stem(word: str) -> str:
    """A few suffix rules, enough that "orders" meets "order", "cancelled" meets "cancel" and "updated"
    meets "update" while "status" and "address" stay whole; a baseline needs no more than that."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiousz":
        return word[:-1]
    return word


# Word -> stem ("" for a stopword). States repeat the same few hundred words, so this stays small; it is
# emptied if an unusual workload ever grows it past the bound.
_STEMS: dict[str, str] = {}
_STEMS_KEPT = 200_000


def _learn(word: str) -> str:
    if len(_STEMS) >= _STEMS_KEPT:
        _STEMS.clear()
    stem = "" if word in _STOPWORDS else _stem(word)
    _STEMS[word] = stem
    return stem


def tokenize(text: str) -> list[str]:
    """Lower-case stemmed words without stopwords; snake_case and camelCase identifiers split into words."""
    stems = _STEMS
    words = _WORD.findall(_CAMEL.sub(" ", text).lower())  # "_" is not a word character: snake_case splits
    return [t for t in (stems[w] if w in stems else _learn(w) for w in words) if t]


def query_text(state: object) -> str:
    """The part of a state the scorer reads: TASK plus CURRENT OBSERVATION, else the whole state.

    HISTORY is left out on purpose: it names tools already called, which would pull the baseline
    towards repeating the last call.
    """
    if not isinstance(state, str):
        return orjson.dumps(state).decode()
    marks = list(_SECTION.finditer(state))
    if not marks:
        return state
    sections: dict[str, str] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(state)
        sections[mark.group(1)] = state[mark.end() : end]
    kept = [sections.get("TASK", ""), sections.get("CURRENT OBSERVATION", "")]
    text = "\n".join(part for part in kept if part.strip())
    return text or state


@dataclass(frozen=True, eq=False)
class OptionIndex:
    """TF-IDF vectors of one option set, ready to be scored against any number of states.

    ``weights`` holds one unit-normalised TF-IDF row per option over the option set's own vocabulary,
    so scoring a state is one small matrix-vector product; words no option uses cannot change a cosine
    ranking and are dropped from the state.
    """

    labels: tuple[str, ...]
    columns: Mapping[str, int]
    idf: Sequence[float]
    term_rows: np.ndarray
    """One row per vocabulary term: its weight in each option (the transposed TF-IDF matrix)."""

    @classmethod
    def build(cls, labels: Sequence[str], descriptions: Sequence[str | None]) -> OptionIndex:
        """Index options by their name's words plus their description."""
        docs = [
            Counter(tokenize(f"{label} {desc or ''}"))
            for label, desc in zip(labels, descriptions, strict=True)
        ]
        df: Counter[str] = Counter()
        for doc in docs:
            df.update(doc.keys())
        columns = {term: col for col, term in enumerate(sorted(df))}
        idf = np.array([math.log((1 + len(docs)) / (1 + df[t])) + 1.0 for t in columns])
        weights = np.zeros((len(docs), len(columns)))
        for row, doc in enumerate(docs):
            for term, tf in doc.items():
                weights[row, columns[term]] = 1.0 + math.log(tf)
        weights *= idf
        norms = np.linalg.norm(weights, axis=1, keepdims=True)
        weights /= np.where(norms > 0, norms, 1.0)
        return cls(
            labels=tuple(labels), columns=columns, idf=idf.tolist(), term_rows=np.ascontiguousarray(weights.T)
        )

    def similarities(self, text: str) -> np.ndarray:
        """Cosine similarity of ``text`` with every option, in option order."""
        columns, idf = self.columns, self.idf
        counts = Counter(columns[t] for t in tokenize(text) if t in columns)
        if not counts:
            return np.zeros(len(self.labels))
        q = [(1.0 + math.log(tf)) * idf[col] for col, tf in counts.items()]
        norm = math.sqrt(sum(w * w for w in q))
        result: np.ndarray = np.dot(np.array(q) / norm, self.term_rows[list(counts)])
        return result


@lru_cache(maxsize=256)
def _cached_index(labels: tuple[str, ...], descriptions: tuple[str | None, ...]) -> OptionIndex:
    return OptionIndex.build(labels, descriptions)


def softmax(scores: np.ndarray, temperature: float) -> list[float]:
    """Probabilities from scores; stable (max-shifted), summing to 1 up to rounding."""
    exps = np.exp((scores - scores.max()) / temperature)
    result: list[float] = (exps / exps.sum()).tolist()
    return result


def lexical_probabilities(
    state: object,
    labels: Sequence[str],
    descriptions: Sequence[str | None],
    *,
    temperature: float = DEFAULT_TEMPERATURE,
) -> list[float]:
    """Probability of each option for ``state``, in option order; ties keep equal probabilities."""
    index = _cached_index(tuple(labels), tuple(descriptions))
    return softmax(index.similarities(query_text(state)), temperature)
