"""The cache tiers: an in-process LRU (memory.py) and Redis shared by every daemon (redis_tier.py).

Both hold `Entry` objects (entry.py); Redis holds them as self-describing, digest-checked blobs.
"""

from .entry import STAGES, CorruptEntry, Entry
from .memory import MemoryCache
