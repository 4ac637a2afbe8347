"""The disk cache: content-addressed keys, atomic entries, digests checked on every read."""

from __future__ import annotations

import base64
import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.runtime import cache, kernels
from despina.runtime.cache import Binary, FileCache

KEY = "ab" + "0" * 62
OPTIONS = CompileOptions()


@despina.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def module(block: int = 128, n: int = 64) -> Module:
    x = np.zeros(n, np.float32)
    spec = copy.specialize(copy.bind((x, x, n), {"BLOCK": block}), CompileOptions())
    return copy.ir(spec, CompileOptions())


def binary(seed: int, size: int = 1000) -> Binary:
    """A self-describing binary: its metadata holds its cubin's digest."""
    cubin = random.Random(seed).randbytes(size)
    return Binary("copy", cubin, {"shared": seed, "sha": hashlib.sha256(cubin).hexdigest()},
                  {"ptx": f"// ptx {seed}\n" * 50, "llir": "; llir"})


def test_entry_round_trip(tmp_path: Path) -> None:
    c = FileCache(tmp_path)
    assert c.get(KEY) is None
    c.put(KEY, binary(1))
    assert c.get(KEY) == binary(1)
    assert c.path(KEY).parent.name == KEY[:2] and c.stats == Counter(miss=1, write=1, hit=1)
    assert [p.name for p in c.path(KEY).parent.iterdir()] == [c.path(KEY).name]  # no temporary file left


def test_entry_holds_no_pickle(tmp_path: Path) -> None:
    c = FileCache(tmp_path)
    c.put(KEY, binary(1))
    data = c.path(KEY).read_bytes()
    assert data.startswith(cache.MAGIC) and b"// ptx 1" in data and b"\x80\x04" not in data[:32]


@pytest.mark.parametrize("where", [0.0, 0.01, 0.2, 0.5, 0.8, 0.999])
def test_a_flipped_byte_anywhere_discards_the_entry(tmp_path: Path, where: float) -> None:
    c = FileCache(tmp_path)
    c.put(KEY, binary(1))
    path = c.path(KEY)
    data = bytearray(path.read_bytes())
    data[int(where * len(data))] ^= 0x40
    path.write_bytes(bytes(data))
    assert c.get(KEY) is None
    assert c.stats["corrupt"] == 1 and not path.exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "extended", "other key"])
def test_damaged_entries_are_discarded(tmp_path: Path, damage: str) -> None:
    c = FileCache(tmp_path)
    c.put(KEY, binary(1))
    path = c.path(KEY)
    data = path.read_bytes()
    other = KEY[:-1] + "1"
    if damage == "other key":
        path.write_bytes(cache.encode(other, binary(1)))
    else:
        path.write_bytes({"truncated": data[:-10], "empty": b"", "extended": data + b"x"}[damage])
    assert c.get(KEY) is None and c.stats["corrupt"] == 1


def test_an_abandoned_temporary_file_is_never_read(tmp_path: Path) -> None:
    c = FileCache(tmp_path)
    c.path(KEY).parent.mkdir(parents=True)
    (c.path(KEY).parent / f".{KEY[:16]}.crashed.tmp").write_bytes(cache.encode(KEY, binary(1))[:100])
    assert c.get(KEY) is None and c.stats["miss"] == 1


def test_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = FileCache(blocker)
    c.put(KEY, binary(1))
    assert c.stats["write_failed"] == 1 and c.get(KEY) is None


def _hammer(directory: str, seed: int, rounds: int) -> tuple[int, int, int]:
    """Write and read one key many times; count entries read, inconsistent entries, corrupt files."""
    c = FileCache(directory)
    read = inconsistent = 0
    for i in range(rounds):
        c.put(KEY, binary(seed * 1000 + i, size=random.Random(i).randint(1, 300_000)))
        for _ in range(3):
            got = c.get(KEY)
            if got is not None:
                read += 1
                inconsistent += hashlib.sha256(got.cubin).hexdigest() != got.metadata["sha"]
    return read, inconsistent, c.stats["corrupt"]


def test_concurrent_processes_never_see_a_torn_entry(tmp_path: Path) -> None:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    rounds = 40
    with context.Pool(8) as pool:
        results = pool.starmap(_hammer, [(str(tmp_path), seed, rounds) for seed in range(8)])
    assert all(inconsistent == 0 and corrupt == 0 for _, inconsistent, corrupt in results)
    assert all(read == 3 * rounds for read, _, _ in results)  # an entry is always there once written
    assert FileCache(tmp_path).get(KEY) is not None
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_key_is_content_addressed() -> None:
    a = cache.cache_key(module(), OPTIONS, "sm_90")
    assert a == cache.cache_key(module(), OPTIONS, "sm_90")  # same kernel traced again
    assert len(a) == 64 and int(a, 16) >= 0
    others = {
        cache.cache_key(module(block=256), OPTIONS, "sm_90"),
        cache.cache_key(module(n=65), OPTIONS, "sm_90"),  # n % 16 != 0: another specialization
        cache.cache_key(module(), OPTIONS.replace(num_warps=8), "sm_90"),
        cache.cache_key(module(), OPTIONS.replace(num_stages=2), "sm_90"),
        cache.cache_key(module(), OPTIONS.replace(maxnreg=64), "sm_90"),
        cache.cache_key(module(), OPTIONS.replace(enable_fp_fusion=False), "sm_90"),
        cache.cache_key(module(), OPTIONS, "sm_90a"),
        cache.cache_key(module(), OPTIONS, "sm_90", driver_version=12080),
    }
    assert a not in others and len(others) == 8


def test_key_depends_on_the_toolchain(monkeypatch: pytest.MonkeyPatch) -> None:
    a = cache.cache_key(module(), OPTIONS, "sm_90")
    versions = cache.toolchain()
    monkeypatch.setattr(cache, "toolchain", lambda: {**versions, "nvjitlink": "99.0"})
    assert cache.cache_key(module(), OPTIONS, "sm_90") != a
    monkeypatch.setattr(cache, "toolchain", lambda: {**versions, "ptxas": "99.0.0"})
    assert cache.cache_key(module(), OPTIONS, "sm_90") != a
    assert set(versions) == {"despina", "llvmlite", "nvjitlink", "ptxas", "backend"}
    assert versions["despina"] == despina.__version__


def test_toolchain_loads_neither_llvm_nor_nvjitlink() -> None:
    """The versions come from package metadata: a fresh process computing a key imports no llvmlite,
    cuda-bindings or cuda-pathfinder (tens of ms each), and the nvJitLink version is the library's."""
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
    major = cache._version("cuda-bindings").split(".")[0]
    if all(cache._version(name).split(".")[0] != major for name in ("nvidia-nvjitlink", f"nvidia-nvjitlink-cu{major}")):
        pytest.skip("nvJitLink does not come from a wheel here: its version is read from the library")
    code = ("import sys, json\n"
            "from despina.runtime import cache\n"
            "versions = cache.toolchain()\n"
            "print(json.dumps([versions, [m for m in sys.modules if m.startswith(('llvmlite', 'cuda'))]]))\n")
    versions, loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                 check=True).stdout)
    assert loaded == []
    assert versions == cache.toolchain()
    assert (versions["nvjitlink"] + ".").startswith(".".join(map(str, nvjitlink.version())) + ".")


def test_the_backend_digest_is_kept_and_follows_the_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import despina.compiler as compiler

    root = tmp_path / "compiler"
    (root / "backends" / "nvptx").mkdir(parents=True)
    (root / "passes").mkdir()
    (root / "__init__.py").write_text("")
    (root / "backends" / "nvptx" / "lower.py").write_text("RULES = {}\n")
    (root / "backends" / "nvptx" / "notes.txt").write_text("not source")
    (root / "passes" / "flatten.py").write_text("STEP = 1\n")
    monkeypatch.setattr(compiler, "__file__", str(root / "__init__.py"))
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    sources = ("__init__.py", "backends/nvptx/lower.py", "passes/flatten.py")

    def hashed() -> str:
        lines = [f"{rel},{_record_hash((root / rel).read_bytes())}\n" for rel in sources]
        return hashlib.sha256("".join(lines).encode()).hexdigest()

    first = cache.backend_digest()
    kept, = (tmp_path / "cache" / "toolchain").glob("*.backend")
    assert first == hashed() and kept.read_text() == first
    kept.write_text("a" * 64)  # what the next process finds for the same files: read, not hashed again
    assert cache.backend_digest() == "a" * 64
    kept.write_text("garbage")
    assert cache.backend_digest() == first and kept.read_text() == first
    (root / "backends" / "nvptx" / "lower.py").write_text("RULES = {'add': 1}\n")  # an edit (editable install)
    second = cache.backend_digest()
    assert second == hashed() != first and len(list(kept.parent.glob("*.backend"))) == 2
    (root / "passes" / "flatten.py").write_text("STEP = 2\n")  # a pass the backend runs on its copy of a kernel
    third = cache.backend_digest()
    assert third == hashed() not in (first, second)
    (root / "backends" / "nvptx" / "extra.py").write_text("")
    assert cache.backend_digest() not in (first, second, third)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "a-file" / "cache"))  # cannot be written: computed
    assert cache.backend_digest() == cache.backend_digest() != second


def _record_hash(data: bytes) -> str:
    """A file's hash as a wheel's RECORD writes it (PEP 376: urlsafe base64 of the SHA-256, unpadded)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_an_installed_wheel_s_digest_is_read_from_its_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In site-packages the installer's RECORD gives every source file's hash: the digest is made from it
    (no file read, nothing kept), and is the one the same files give where there is no RECORD."""
    import despina.compiler as compiler

    site = tmp_path / "site-packages"
    root = site / "despina" / "compiler"
    (root / "backends" / "nvptx").mkdir(parents=True)
    sources = {"__init__.py": b"", "backends/nvptx/lower.py": b"RULES = {}\n", "backends/nvptx/z.py": b"Z = 1\n"}
    for rel, data in sources.items():
        (root / rel).write_bytes(data)
    monkeypatch.setattr(compiler, "__file__", str(root / "__init__.py"))
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    walked = cache.backend_digest()  # no RECORD yet: the files hashed, the digest kept
    (tmp_path / "cache" / "toolchain").rename(tmp_path / "kept")
    info = site / "despina-1.0.dist-info"
    info.mkdir()
    record = ["despina/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"]
    record += [f"despina/compiler/{rel},sha256={_record_hash(data)},{len(data)}" for rel, data in sources.items()]
    record += ["despina-1.0.dist-info/RECORD,,", "despina/compiler/backends/nvptx/table.json,sha256=x,2"]
    (info / "RECORD").write_text("\n".join(reversed(record)) + "\n")
    assert cache.backend_digest() == walked
    assert not (tmp_path / "cache" / "toolchain").exists()  # nothing hashed, nothing kept
    (root / "backends" / "nvptx" / "z.py").write_bytes(b"Z = 2\n")  # the files are not read: RECORD is what was installed
    assert cache.backend_digest() == walked
    (info / "RECORD").write_text("\n".join(record[:2]) + "\n")  # another wheel's sources: another digest
    assert cache.backend_digest() != walked
    (info / "RECORD").write_text("despina/compiler/__init__.py,md5=abc,0\n")  # no sha256: the files
    assert cache.backend_digest() not in (walked, "")
    (info / "RECORD").unlink()
    (root / "backends" / "nvptx" / "z.py").write_bytes(b"Z = 1\n")
    assert cache.backend_digest() == walked


@pytest.mark.parametrize("name", ["numpy", "pytest", "despina", "llvmlite", "cuda-bindings", "nvidia-nvjitlink",
                                  "NumPy", "no-such-distribution"])
def test_versions_are_the_installed_ones(name: str) -> None:
    from importlib import metadata

    try:
        expected = metadata.version(name)
    except metadata.PackageNotFoundError:
        expected = "none"
    assert cache._version(name) == expected


def test_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    assert cache.default_cache().directory == tmp_path
    monkeypatch.delenv("DESPINA_CACHE_DIR")
    assert cache.cache_dir() == Path.home() / ".cache" / "despina"


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """A counting stand-in for the backend, and an empty cache."""
    calls: list[str] = []

    def compile_module(m: Module, options: CompileOptions, target: str) -> Binary:
        calls.append(target)
        return binary(7)

    monkeypatch.setattr(kernels, "compile_binary", compile_module)
    monkeypatch.setattr(kernels, "prestart", lambda target=None: None)  # no LLVM worker for a stand-in
    monkeypatch.setattr(kernels, "_MEMORY", {})
    monkeypatch.setattr(kernels, "STATS", Counter())
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    return calls


def test_lookup_order_memory_disk_compile(compiles: list[str]) -> None:
    m = module()
    for _ in range(2):
        assert kernels.binary(m, OPTIONS, "sm_90") == binary(7)
    kernels._MEMORY.clear()  # a new process
    assert kernels.binary(m, OPTIONS, "sm_90") == binary(7)
    assert compiles == ["sm_90"] and kernels.STATS == Counter(compile=1, memory=1, disk=1)


def test_corrupted_entry_is_recompiled_never_loaded(compiles: list[str]) -> None:
    m = module()
    kernels.binary(m, OPTIONS, "sm_90")
    path = cache.default_cache().path(cache.cache_key(m, OPTIONS, "sm_90"))
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside the cubin
    path.write_bytes(bytes(data))
    kernels._MEMORY.clear()
    assert kernels.binary(m, OPTIONS, "sm_90") == binary(7)
    assert compiles == ["sm_90", "sm_90"] and cache.default_cache().stats["corrupt"] == 1
    assert cache.decode(path.name[:-6], path.read_bytes()) == binary(7)  # and the entry is whole again
    assert os.path.getsize(path) == len(data)


def test_a_configured_daemon_compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from despina import remote

    asked: list[tuple[int, str]] = []

    def compile_remote(m: Module, options: Any, target: str) -> remote.RemoteKernel:
        asked.append((options.num_warps, target))
        return remote.RemoteKernel(b"cubin", "// ptx", {"name": "copy", "shared": 0, "service": {"tier": "redis"}})

    monkeypatch.setattr(kernels, "_MEMORY", {})
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(remote, "server", lambda: "grpc://gpu-host:50051")
    monkeypatch.setattr(remote, "compile_remote", compile_remote)
    got = kernels.binary(module(), OPTIONS, "sm_90")
    assert asked == [(4, "sm_90")]
    assert got == Binary("copy", b"cubin", {"shared": 0, "service": {"tier": "redis"}}, {"ptx": "// ptx"})
    kernels._MEMORY.clear()
    assert kernels.binary(module(), OPTIONS, "sm_90") == got and len(asked) == 1  # kept on local disk


def test_a_miss_starts_the_llvm_worker_before_compiling(compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    stand_in = kernels.compile_binary

    def compile_module(m: Module, options: CompileOptions, target: str) -> Binary:
        events.append(f"compile {target}")
        return stand_in(m, options, target)

    monkeypatch.setattr(kernels, "prestart", lambda target=None: events.append(f"prestart {target}"))
    monkeypatch.setattr(kernels, "compile_binary", compile_module)
    m = module()
    kernels.binary(m, OPTIONS, "sm_90a")
    kernels.binary(m, OPTIONS, "sm_90a")  # memory
    kernels._MEMORY.clear()
    kernels.binary(m, OPTIONS, "sm_90a")  # disk: no worker needed
    assert events == ["prestart sm_90a", "compile sm_90a"]


def test_prestart_is_for_in_process_compiles_only(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llvmlite")
    from despina import remote
    from despina.compiler.backends.nvptx import isolate

    started: list[str | None] = []
    monkeypatch.setattr(isolate, "prestart", started.append)
    monkeypatch.setattr(remote, "server", lambda: "grpc://gpu-host:50051")
    kernels.prestart("sm_90")
    assert started == []
    monkeypatch.setattr(remote, "server", lambda: None)
    kernels.prestart("sm_90")
    assert started == ["sm_90"]


def test_the_frontend_digest_covers_the_client_and_the_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import despina
    import despina.compiler as compiler

    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    roots = [str(Path(m.__file__).resolve().parent) for m in (despina, compiler)]
    expected = hashlib.sha256("".join(cache.source_digest(r, "frontend") for r in roots).encode()).hexdigest()
    cache.frontend_digest.cache_clear()
    try:
        assert cache.frontend_digest() == expected
        assert len(list((tmp_path / "cache" / "toolchain").glob("*.frontend"))) == 2
    finally:
        cache.frontend_digest.cache_clear()
