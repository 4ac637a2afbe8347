"""The cache tiers: an in-process LRU (memory.py), a folder on the daemon's disk (disk.py) and Redis
shared by every daemon (redis_tier.py).

All hold `Entry` objects (entry.py); Redis holds them as self-describing, digest-checked blobs, the
disk as the client's own digest-checked cache files (despina.runtime.cache).
"""

from .entry import STAGES, CorruptEntry, Entry
from .memory import MemoryCache
