"""The local disk cache of compiled kernels (`~/.cache/despina`, or `DESPINA_CACHE_DIR`).

Content-addressed: `cache_key` hashes the canonical IR, the specialization, the options, the
target and the versions of despina, LLVM (llvmlite), nvJitLink and the compiler's source, so
nothing stale is ever found. One entry is one file holding the cubin, the JSON metadata and every
stage's text, behind a header with their SHA-256 digest:

    DESPINA-CACHE 1\\n{"key": ..., "digest": ..., "sections": [["cubin", 5120], ...]}\\n<sections>

It is written to a temporary file in the same folder and renamed into place (`os.replace` is
atomic), so a reader sees a whole entry or none, whatever other processes do; a reader checks the
digest and discards an entry that does not match, which is then compiled again. No pickle.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions

MAGIC = b"DESPINA-CACHE 1\n"


@dataclass(frozen=True)
class Binary:
    """A compiled kernel: its name, cubin, metadata (JSON values) and the text of every stage."""

    name: str
    cubin: bytes
    metadata: dict[str, Any]
    asm: dict[str, str] = field(default_factory=dict)


def _sections(binary: Binary) -> list[tuple[str, bytes]]:
    meta = json.dumps({"name": binary.name, **binary.metadata}, sort_keys=True, default=str).encode()
    return [("cubin", binary.cubin), ("metadata", meta)] + [
        (f"asm.{stage}", text.encode()) for stage, text in sorted(binary.asm.items())]


def _digest(table: list[list[Any]], blobs: list[bytes], secret: bytes | None = None) -> str:
    # Keyed (HMAC-SHA-256) when a secret is given: write access to the folder then does not let
    # anyone plant an entry that readers holding the secret accept.
    h = hmac.new(secret, digestmod=hashlib.sha256) if secret else hashlib.sha256()
    h.update(json.dumps(table).encode())
    for blob in blobs:
        h.update(blob)
    return h.hexdigest()


def encode(key: str, binary: Binary, secret: bytes | None = None) -> bytes:
    """The bytes of a cache entry for `binary` stored under `key` (its digest keyed by `secret`, if any)."""
    sections = _sections(binary)
    table = [[name, len(blob)] for name, blob in sections]
    blobs = [blob for _, blob in sections]
    header = json.dumps({"key": key, "digest": _digest(table, blobs, secret), "sections": table}).encode()
    return MAGIC + header + b"\n" + b"".join(blobs)


def decode(key: str, data: bytes, secret: bytes | None = None) -> Binary | None:
    """The Binary of entry bytes `data` if they are whole, stored under `key` and match their digest
    (keyed by `secret`, if any)."""
    try:
        if not data.startswith(MAGIC):
            return None
        header_end = data.index(b"\n", len(MAGIC))
        header = json.loads(data[len(MAGIC):header_end])
        table = header["sections"]
        if header["key"] != key or sum(n for _, n in table) != len(data) - header_end - 1:
            return None
        blobs, offset = [], header_end + 1
        for _, n in table:
            blobs.append(data[offset:offset + n])
            offset += n
        if not hmac.compare_digest(_digest(table, blobs, secret).encode(), str(header["digest"]).encode()):
            return None
        parts = {name: blob for (name, _), blob in zip(table, blobs)}
        meta = json.loads(parts["metadata"])
        asm = {name[4:]: blob.decode() for name, blob in parts.items() if name.startswith("asm.")}
        return Binary(meta.pop("name"), parts["cubin"], meta, asm)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):  # json errors are ValueErrors
        return None


@dataclass(frozen=True)
class Listed:
    """One entry as `FileCache.listing` reads it: from the file's header and metadata only (the
    digest is checked when the entry is read with `get`)."""

    key: str
    path: Path
    nbytes: int
    mtime: float
    metadata: dict[str, Any]
    sizes: dict[str, int]


def _listed(path: Path) -> Listed | None:
    try:
        st = path.stat()
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            header = json.loads(f.readline(1 << 20))
            table = [(str(name), int(n)) for name, n in header["sections"]]
            offset = 0
            for name, n in table:
                if name == "metadata":
                    break
                offset += n
            f.seek(offset, os.SEEK_CUR)
            metadata = json.loads(f.read(dict(table)["metadata"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    sizes = {name[4:] if name.startswith("asm.") else name: n for name, n in table if name != "metadata"}
    return Listed(str(header["key"]), path, st.st_size, st.st_mtime, dict(metadata), sizes)


class FileCache:
    """Entries under `directory`, one file each, in a subfolder named by the key's first two digits.
    `stats` counts hits, misses, writes and corrupt entries discarded. With a `secret`, digests are
    HMAC-SHA-256 keyed by it, and an entry not written with the same secret reads as corrupt."""

    def __init__(self, directory: os.PathLike[str] | str, secret: bytes | None = None) -> None:
        self.directory = Path(directory)
        self.secret = secret
        self.stats: Counter[str] = Counter()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.cubin"

    def get(self, key: str) -> Binary | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self.stats["miss"] += 1
            return None
        binary = decode(key, data, self.secret)
        if binary is None:
            self.stats["corrupt"] += 1
            self._discard(path, data)
            return None
        self.stats["hit"] += 1
        return binary

    def put(self, key: str, binary: Binary) -> None:
        """Store `binary` under `key` atomically; a cache that cannot be written is skipped, not an error."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode(key, binary, self.secret))
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            self.stats["write_failed"] += 1
            return
        self.stats["write"] += 1

    def listing(self) -> list[Listed]:
        """Every entry in the folder (unreadable files left out), in no particular order."""
        found = []
        for path in self.directory.glob("??/*.cubin"):
            entry = _listed(path)
            if entry is not None and path.stem == entry.key:
                found.append(entry)
        return found

    def remove(self, key: str) -> bool:
        """Delete `key`'s entry; whether there was one."""
        try:
            self.path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def _discard(self, path: Path, seen: bytes) -> None:
        # Remove the bad entry, unless another process has replaced it meanwhile (the check and the
        # unlink are not atomic: losing that race costs one more compile, never a bad launch).
        try:
            if path.read_bytes() == seen:
                path.unlink()
        except OSError:
            pass


def cache_dir() -> Path:
    return Path(os.environ.get("DESPINA_CACHE_DIR") or Path.home() / ".cache" / "despina")


_CACHES: dict[Path, FileCache] = {}


def default_cache() -> FileCache:
    """The FileCache of `cache_dir()` (read from the environment at each call)."""
    directory = cache_dir()
    found = _CACHES.get(directory)
    if found is None:
        found = _CACHES[directory] = FileCache(directory)
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def _installed(folder: str) -> dict[str, str]:
    """{normalized distribution name: version} of the `.dist-info` folders in `folder` (one sys.path
    entry), from their names (`{name}-{version}.dist-info`, as wheels write them)."""
    try:
        entries = os.listdir(folder or os.curdir)
    except OSError:
        return {}
    found: dict[str, str] = {}
    for entry in entries:
        if entry.endswith(".dist-info"):
            name, _, version = entry[: -len(".dist-info")].partition("-")
            if version:
                found.setdefault(_normalized(name), version)
    return found


def _version(*names: str) -> str:
    """The installed version of the first of `names` found (as `importlib.metadata.version`, which
    serves what the `.dist-info` folders on sys.path do not name, but costs tens of ms to import),
    or "none"."""
    for name in names:
        for folder in sys.path:
            version = _installed(folder).get(_normalized(name))
            if version is not None:
                return version
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "none"


def _nvjitlink_version() -> str:
    """The version of the nvJitLink that linking will load: that of the NVIDIA wheel of cuda-bindings'
    CUDA major version when one is installed (cuda-pathfinder loads it before any other copy), read
    from its metadata, for importing cuda.bindings' nvJitLink imports cuda-pathfinder (tens of ms
    in a fresh process); else the library's own, loaded to ask it."""
    bindings = _version("cuda-bindings")
    major = bindings.split(".")[0]
    for name in ("nvidia-nvjitlink", f"nvidia-nvjitlink-cu{major}"):
        version = _version(name)
        if version.split(".")[0] == major:
            return version
    try:
        from cuda.bindings import nvjitlink

        return ".".join(map(str, nvjitlink.version()))
    except Exception:  # no nvJitLink: the key still differs from any key made with one
        return _version("nvidia-nvjitlink", "nvidia-nvjitlink-cu13", "nvidia-nvjitlink-cu12")


@functools.cache
def toolchain() -> dict[str, str]:
    """The versions a cubin depends on besides its input: despina, llvmlite (which fixes the LLVM
    version), nvJitLink, the ptxas that assembles kernels using setmaxnreg (`ptxas --version`, run once), and
    a digest of the compiler's source (so a changed backend, or a pass or IR class it runs, never reuses a
    cubin during development, when the version stays the same). Read from package metadata and files, once
    per process: nothing here imports LLVM or nvJitLink when their wheels are installed."""
    import despina
    from despina.compiler.backends.nvptx import ptxas

    return {"despina": despina.__version__, "llvmlite": _version("llvmlite"), "nvjitlink": _nvjitlink_version(),
            "ptxas": ptxas.identity(), "backend": backend_digest()}


def _sources(root: str) -> list[tuple[str, int, int]]:
    """(path relative to `root` with `/`, size, mtime_ns) of every `.py` file under `root`, sorted by path."""
    found = []
    for folder, _, names in os.walk(root):
        prefix = os.path.relpath(folder, root).replace(os.sep, "/")
        for name in names:
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                found.append((name if prefix == "." else f"{prefix}/{name}", st.st_size, st.st_mtime_ns))
    found.sort(key=lambda f: f[0].split("/"))
    return found


def backend_digest() -> str:
    """SHA-256 of the sources a compile from tile IR runs (`source_digest`): the whole compiler package, not
    only its backends. The backend runs passes of `compiler/passes` on its copy of a kernel (loop-nest
    flattening, descriptor expansion) and the IR's classes; keyed on `compiler/backends` alone, a changed
    `passes/flatten.py` was answered with the cubins of the code before it."""
    import despina.compiler as compiler

    return source_digest(os.path.dirname(os.path.abspath(str(compiler.__file__))), "backend")


@functools.cache
def frontend_digest() -> str:
    """SHA-256 of all of Despina's Python sources, the client's (frontend, language) and the compiler's:
    what a kernel's IR depends on besides the user's code, for the keys of work that skips tracing (a
    tuning's winner, `tuning_key`). Once per process (its `source_digest`s stat every file)."""
    import despina
    import despina.compiler as compiler

    roots = [os.path.dirname(os.path.abspath(str(m.__file__))) for m in (despina, compiler)]
    return hashlib.sha256("".join(source_digest(r, "frontend") for r in roots).encode()).hexdigest()


def source_digest(root: str, tag: str) -> str:
    """SHA-256 of the `.py` files under `root`: of one line per file, in path order, its path relative to
    `root` and the SHA-256 of its bytes as a wheel's RECORD writes it (urlsafe base64, unpadded).

    An installed wheel's RECORD holds those hashes, written by the installer: they are read from it,
    no source file is opened (a fresh process on a new host pays a millisecond, not the 17 ms of
    hashing every file, on an H100 host). Elsewhere (a checkout, an editable install) hashing the
    files costs a fresh process milliseconds, so the digest is kept in the cache folder
    (`toolchain/<stamp>.<tag>`) under a hash of the files' (path, size, mtime_ns) list: any edit, added
    or removed file names another entry, which is computed again. Both give the same digest for the
    same sources."""
    recorded = _recorded(root)
    if recorded is not None:
        return _sources_digest(recorded)
    files = _sources(root)
    stamp = hashlib.sha256(json.dumps([root, files]).encode()).hexdigest()
    kept = cache_dir() / "toolchain" / f"{stamp}.{tag}"
    try:
        digest = kept.read_text()
    except OSError:
        digest = ""
    if re.fullmatch(r"[0-9a-f]{64}", digest):
        return digest
    hashes = []
    for rel, _, _ in files:
        with open(os.path.join(root, *rel.split("/")), "rb") as f:
            hashes.append((rel, _record_hash(f.read())))
    digest = _sources_digest(hashes)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=kept.parent, prefix=f".{tag}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(digest)
            os.replace(tmp, kept)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # a cache folder that cannot be written: computed again next time
        pass
    return digest


def _record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _sources_digest(hashes: list[tuple[str, str]]) -> str:
    return hashlib.sha256("".join(f"{rel},{h}\n" for rel, h in hashes).encode()).hexdigest()


def _recorded(root: str) -> list[tuple[str, str]] | None:
    """(path relative to `root`, RECORD hash) of the `.py` files under `root`, in `_sources`' order, from
    the RECORD of the installed wheel that `root` is part of; None outside one (a checkout or an editable
    install, whose RECORD lists no source under `root`)."""
    root = os.path.abspath(root)
    site, parts = root, list[str]()
    for _ in range(4):  # despina/, despina/compiler/ (its digest), despina/compiler/backends/
        site, name = os.path.split(site)
        parts.insert(0, name)
        if name == "despina":
            break
    else:
        return None
    lines = _record_lines(site)
    if lines is None:
        return None
    prefix = "/".join(parts) + "/"
    found = []
    for line in lines:
        path, _, rest = line.partition(",")
        if path.startswith(prefix) and path.endswith(".py") and not path.startswith("despina/../"):
            algorithm, _, value = rest.partition(",")[0].partition("=")
            if algorithm != "sha256" or not value:
                return None
            found.append((path[len(prefix):], value))
    found.sort(key=lambda f: f[0].split("/"))
    return found or None


_RECORDS: dict[tuple[str, int, int], list[str]] = {}  # RECORD lines by (path, mtime_ns, size): read once a process


def _record_lines(site: str) -> list[str] | None:
    """The lines of the RECORD of the one `despina-*.dist-info` in `site`, None without one. Read once per
    process while the file is unchanged (the frontend digest and the backend's both read it)."""
    try:
        infos = [n for n in os.listdir(site) if n.startswith("despina-") and n.endswith(".dist-info")]
        if len(infos) != 1:
            return None
        path = os.path.join(site, infos[0], "RECORD")
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if key not in _RECORDS:
            with open(path, encoding="utf-8") as f:
                _RECORDS[key] = f.read().splitlines()
        return _RECORDS[key]
    except OSError:
        return None


def ir_hash(module: Module) -> str:
    """The canonical IR hash (`despina.compiler.ir.hashing.module_hash`)."""
    from despina.compiler.ir.hashing import module_hash

    return module_hash(module)


def cache_key(module: Module, options: CompileOptions, target: str, driver_version: int = 0) -> str:
    """The SHA-256 key of `module` compiled with `options` (every field: `CompileOptions.key`) for
    `target`, answered for a CUDA driver of `driver_version` (0: any; see `kernels.binary`)."""
    parts = {"ir": ir_hash(module), "specialization": module.attrs, "options": options.key(), "target": target,
             "driver_version": driver_version, "versions": toolchain()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()
