"""The tutorials' performance figures: each tutorial's kernel under Despina, the same file under Triton
(its imports changed), and PyTorch's own operation, across sizes; written as SVG, with the numbers and
the machine in JSON, to docs/tutorials/figures/ (the tutorial pages show them once they exist).

    python benchmarks/tutorial_figures.py [--only 01-vector-add ...] [--out DIR]   # a GPU host with torch, triton
    python benchmarks/tutorial_figures.py --dry-run                              # any machine: the plumbing

Every point is timed by `triton.testing.do_bench` (median) after one run whose output is checked against
PyTorch's. A point that fails is kept in the JSON as its error and left out of the figure. `--dry-run`
runs Despina's kernels in the interpreter at tiny sizes with NumPy arrays, checks them against NumPy and
draws the figures into a temporary folder that it deletes: no timing is written.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLES = ROOT / "examples"
FIGURES = ROOT / "docs" / "tutorials" / "figures"
sys.path.insert(0, str(HERE))

import tutorial_cases  # noqa: E402
import tutorial_plot  # noqa: E402


def load(example: str, flavor: str, workdir: Path) -> ModuleType:
    """examples/<example>.py as Despina runs it, or with Triton's imports in place of Despina's."""
    source = (EXAMPLES / f"{example}.py").read_text()
    if flavor == "triton":
        source = source.replace("import despina\n", "import triton as despina\n")
        source = source.replace("despina.language", "triton.language")
    path = workdir / f"{flavor}_{example}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def measure(run: Callable[[], Any], dry_run: bool) -> float | None:
    """Milliseconds per run (the median of do_bench); None in a dry run, which times nothing."""
    if dry_run:
        return None
    import triton.testing

    return float(triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median"))


def point(case: tutorial_cases.Case, unit: str, columns: dict[str, Callable[[], Any]], dry_run: bool) -> dict[str, Any]:
    """One size: each column run once and checked, then timed; its value in the figure's unit, or its error."""
    values: dict[str, Any] = {}
    for name, run in columns.items():
        try:
            out = run()
            if name != "torch":
                case.check(out)
            ms = measure(run, dry_run)
            values[name] = None if ms is None else case.work / (ms * 1e-3) / tutorial_cases.UNITS[unit]
        except Exception as exc:  # one failing point is reported, and the figure goes on
            detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            values[name] = f"error: {type(exc).__name__}: {detail[:300]}"
    return values


def run_tutorial(tutorial: tutorial_cases.Tutorial, backend: tutorial_cases.Backend, flavors: list[str],
                 workdir: Path, dry_run: bool) -> dict[str, Any]:
    modules = {f: {e: load(e, f, workdir) for e in tutorial.examples} for f in flavors}
    kernels = {f: tutorial.kernels(modules[f], f, backend) for f in flavors}
    rows = []
    for size in tutorial.dry_sizes if dry_run else tutorial.sizes:
        case = tutorial.case(backend, size)
        columns = {f: (lambda f=f: case.launch(kernels[f])) for f in flavors}
        if case.torch is not None:
            columns["torch"] = case.torch
        rows.append({"size": size, **point(case, tutorial.unit, columns, dry_run)})
        shown = {k: f"{v:.1f} {tutorial.unit}" if isinstance(v, float) else "checked" if v is None else v
                 for k, v in rows[-1].items() if k != "size"}
        print(f"{tutorial.name} {size}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    return {"tutorial": tutorial.name, "title": tutorial.title, "x": tutorial.x_label, "unit": tutorial.unit,
            "rows": rows}


def machine() -> dict[str, Any]:
    import torch
    import triton

    import despina

    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "despina": despina.__version__, "python": platform.python_version(), "host": platform.node(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def write(result: dict[str, Any], out: Path) -> Path:
    series = {name: [r.get(name) if isinstance(r.get(name), float) else None for r in result["rows"]]
              for name in ("despina", "triton", "torch")}
    svg = tutorial_plot.line_chart(result["title"], result["x"], result["unit"],
                                   [r["size"] for r in result["rows"]], series)
    (out / f"{result['tutorial']}.json").write_text(json.dumps(result, indent=2) + "\n")
    path = out / f"{result['tutorial']}.svg"
    path.write_text(svg)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", metavar="TUTORIAL", help="e.g. 01-vector-add (default: all eight)")
    parser.add_argument("--out", type=Path, default=FIGURES, help=f"where figures go (default: {FIGURES})")
    parser.add_argument("--dry-run", action="store_true",
                        help="the interpreter at tiny sizes, checked against NumPy, figures drawn and deleted")
    args = parser.parse_args(argv)
    names = [t.name for t in tutorial_cases.TUTORIALS]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        parser.error(f"unknown tutorial(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    if args.dry_run:
        os.environ["DESPINA_INTERPRET"] = "1"
        backend: tutorial_cases.Backend = tutorial_cases.NumpyBackend()
        flavors, about = ["despina"], {"dry_run": True}
    else:
        backend, flavors, about = tutorial_cases.TorchBackend(), ["despina", "triton"], machine()
        print("machine: " + ", ".join(f"{k} {v}" for k, v in about.items()))
    sys.path.insert(0, str(EXAMPLES))
    with tempfile.TemporaryDirectory(prefix="despina-figures-") as tmp:
        out = Path(tmp) / "figures" if args.dry_run else args.out
        out.mkdir(parents=True, exist_ok=True)
        for tutorial in tutorial_cases.TUTORIALS:
            if args.only and tutorial.name not in args.only:
                continue
            result = run_tutorial(tutorial, backend, flavors, Path(tmp), args.dry_run)
            path = write({**result, "machine": about}, out)
            failed = [k for r in result["rows"] for k, v in r.items() if isinstance(v, str) and k != "size"]
            print(f"{tutorial.name}: {'drawn and discarded' if args.dry_run else f'wrote {path}'}"
                  + (f"; {len(failed)} point(s) failed, see the JSON" if failed else ""))
            if args.dry_run and failed:
                print(json.dumps(result["rows"], indent=1))
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
