"""The centre of multilingual-e5-small's vectors (lib/memory/search/e5.py takes each vector relative to it).

    .venv/bin/python bench/centre.py

multilingual-e5-small puts any two texts at cosine 0.75 to 0.9: its vectors share one large
component (on a LoCoMo conversation the 64 nearest by hamming distance of the sign bits held
36% of the 64 nearest by cosine; around this centre, about half). The centre is the mean passage
embedding of up to 600 sentences of this repository's README and guide (docs/, where most of the
README's text moved; Ash's own text; any varied text gives nearly the same mean: 0.92 cosine to
the mean of a chat conversation's turns). Written to
lib/memory/search/data/multilingual-e5-small.centre.npy. The committed file was made from the README of
2026-11-23; a new one changes every stored vector's meaning (`ash memory reindex`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import click  # noqa: E402
import numpy as np  # noqa: E402

from lib.memory.search import e5  # noqa: E402

SENTENCES = 600


def readme_sentences(text: str) -> list[str]:
    plain = re.sub(r"[`|#*]", " ", text)
    found = [s.strip() for s in re.split(r"(?<=[.!?])\s+", plain)]
    return [s for s in found if 30 < len(s) < 300][:SENTENCES]


@click.command()
def main() -> None:
    """Embed README and guide sentences with multilingual-e5-small and save their mean as its centre."""
    pages = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts)]
    sentences = readme_sentences("\n".join(page.read_text(encoding="utf-8") for page in pages))
    centre = e5.raw_embed(sentences).mean(axis=0).astype(np.float32)
    np.save(e5.CENTRE_PATH, centre)
    click.echo(f"{e5.CENTRE_PATH}: mean of {len(sentences)} sentences, norm {np.linalg.norm(centre):.3f}")


if __name__ == "__main__":
    main()
