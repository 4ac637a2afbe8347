"""Tile-IR passes, each a function from module to module; `pipeline.PIPELINE` lists them in order."""

from .canonicalize import canonicalize
from .cse import cse
from .dce import dce
from .fold import fold
from .inline import inline
from .pipeline import PIPELINE, run_pipeline

__all__ = ["PIPELINE", "canonicalize", "cse", "dce", "fold", "inline", "run_pipeline"]
