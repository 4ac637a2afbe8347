"""The daemon's Prometheus metrics, on a registry of its own (so several services can share a process).

`GET /metrics` exposes them; `CompileService.stats()` reads the same numbers.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TIERS = ("memory", "disk", "redis", "compiled")
IMAGE_FORMATS = ("cubin", "ptx")
TUNING_TIERS = ("memory", "disk", "redis", "tuned", "compiled")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("despina_requests", "Requests to the core service, by method.", ["method"], registry=r)
        self.answers = Counter("despina_cache_answers", "Compile requests answered, by the tier that answered.", ["tier"], registry=r)
        self.compiles = Counter("despina_compiles", "Compilations run in a worker, by outcome.", ["outcome"], registry=r)
        self.compile_seconds = Histogram(
            "despina_compile_seconds", "Time of one compilation in a worker.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r,
        )
        self.in_flight = Gauge("despina_compiles_in_flight", "Compilations running now.", registry=r)
        self.errors = Counter("despina_errors", "Requests that failed, by status code.", ["code"], registry=r)
        self.redis_errors = Counter("despina_redis_errors", "Redis calls that failed (the daemon went on without Redis).", ["op"], registry=r)
        self.redis_up = Gauge("despina_redis_up", "1 while the last Redis call succeeded.", registry=r)
        self.corrupt = Counter("despina_cache_corrupt", "Cache entries that failed their digest check and were dropped, by tier.",
                               ["tier"], registry=r)
        self.images = Counter("despina_images", "Compile answers by the image the client loads: a cubin, or PTX for a driver"
                              " older than the toolchain.", ["format"], registry=r)
        self.disk_entries = Gauge("despina_disk_entries", "Kernels in the disk tier.", registry=r)
        self.disk_bytes = Gauge("despina_disk_bytes", "Bytes in the disk tier.", registry=r)
        self.disk_evictions = Counter("despina_disk_evictions", "Disk-tier files deleted as least recently used.", registry=r)
        self.disk_errors = Counter("despina_disk_errors", "Disk-tier reads or writes that failed (the daemon went on without them).",
                                   ["op"], registry=r)
        self.worker_wait_seconds = Histogram(
            "despina_worker_wait_seconds", "Time a compile or an IR check waited for a free compile worker.",
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r,
        )
        self.workers_extra = Counter("despina_workers_extra", "Extra compile workers started because every worker was busy "
                                     "with slow compiles while requests waited.", registry=r)
        self.workers_replaced = Counter("despina_workers_replaced", "Compile workers that crashed or timed out and were replaced.", registry=r)
        self.executes = Counter("despina_executes", "Execute requests by outcome: refused (turned away before the GPU"
                                " ran anything: a bad argument, no GPU on this host, a compile error), and for those that"
                                " reached the GPU worker ok, error (the launch refused, the worker alive), fault, timeout,"
                                " crash.", ["outcome"], registry=r)
        self.gpu_workers = Counter("despina_gpu_workers_started", "GPU worker processes started for Execute.", registry=r)
        self.execute_seconds = Histogram(
            "despina_execute_seconds", "Time of one kernel on the GPU (launch to synchronize).",
            buckets=(1e-4, 1e-3, 0.01, 0.1, 1, 10, 60), registry=r,
        )
        self.tunings = Counter("despina_tunings", "Tuning requests answered, by where the record came from: memory, disk,"
                               " redis, tuned (measured for this request) or compiled (the client measures).", ["tier"],
                               registry=r)
        self.benchmarks = Counter("despina_benchmarks", "Configs measured on the GPU for a tuning, by outcome: ok, or"
                                  " dropped (a fault, a launch refused, a time-out).", ["outcome"], registry=r)
        for tier in TIERS:
            self.answers.labels(tier)
        for tier in TUNING_TIERS:
            self.tunings.labels(tier)
        for outcome in ("ok", "dropped"):
            self.benchmarks.labels(outcome)
        for tier in ("disk", "redis"):
            self.corrupt.labels(tier)
        for image in IMAGE_FORMATS:
            self.images.labels(image)
        for outcome in ("ok", "refused", "error", "fault", "timeout", "crash"):
            self.executes.labels(outcome)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """One sample's current value (0 when it has not been recorded)."""
        v = self.registry.get_sample_value(name, labels or None)
        return v or 0.0


def _samples(counter: Any) -> list[Any]:
    return [s for mf in counter.collect() for s in mf.samples if s.name.endswith("_total")]


def total(counter: Any) -> float:
    """The sum of a counter's samples over all its labels."""
    return sum(s.value for s in _samples(counter))


def by_label(counter: Any, label: str) -> dict[str, int]:
    """A counter's samples by the value of `label`."""
    return {s.labels[label]: int(s.value) for s in _samples(counter)}


def counts(m: Metrics) -> dict[str, Any]:
    """The counters /v1/stats shows, read from those /metrics exposes."""
    return {
        "requests": int(total(m.requests)),
        "hits": {t: int(m.value("despina_cache_answers_total", tier=t)) for t in TIERS},
        "compiles": int(m.value("despina_compiles_total", outcome="ok")),
        "benchmarks": int(m.value("despina_benchmarks_total", outcome="ok")),
        "compile_errors": int(sum(m.value("despina_compiles_total", outcome=x) for x in ("error", "timeout", "crash"))),
        "in_flight": int(m.value("despina_compiles_in_flight")),
        "redis_errors": int(total(m.redis_errors)),
        "errors": by_label(m.errors, "code"),
        "executes": by_label(m.executes, "outcome"),
    }
