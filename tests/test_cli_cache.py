"""`despina cache ls|show|rm|clear|stats` on a cache folder and on a real daemon (its REST API)."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from despina.cli import main
from despina.runtime.cache import Binary, FileCache

A, B, C = "a1" * 32, "b2" * 32, "a1c3" * 16


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["cache", *argv])
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    files = FileCache(tmp_path)
    now = time.time()
    for key, name, target, age in ((A, "add_kernel", "sm_90", 10 * 86400), (B, "softmax", "sm_80", 60),
                                   (C, "add_kernel", "sm_80", 3600)):
        files.put(key, Binary(name, b"\x7fELF" * 256, {"target": target, "num_warps": 4, "num_stages": 3},
                              {"ptx": ".version 8.0"}))
        os.utime(files.path(key), (now - age, now - age))
    return tmp_path


def test_folder_ls_filters_and_table(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "ls", "--dir", str(folder))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["KEY", "NAME", "TARGET", "WARPS", "STAGES", "HITS", "SIZE", "LAST",
                                              "USED", "CREATED", "TIERS"]
    assert [line.split()[0] for line in lines[1:]] == [B[:16], C[:16], A[:16]]  # most recently used first
    assert lines[1].split()[1:7] == ["softmax", "sm_80", "4", "3", "0", "1.0"]
    code, out, _ = cli(capsys, "ls", "--dir", str(folder), "--json", "--name", "add_*", "--target", "sm_80")
    (item,) = json.loads(out)
    assert item["key"] == C and item["options"] == {"num_warps": 4, "num_stages": 3} and item["sizes"]["cubin"] == 1024
    assert item["last_used"].endswith("Z") and "T" in item["created"] and item["tiers"] == ["folder"]
    code, out, _ = cli(capsys, "ls", "--dir", str(folder), "--json", "--since", "2h")
    assert [i["key"] for i in json.loads(out)] == [B, C]


def test_folder_show_rm_clear_stats(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "show", "--dir", str(folder), B[:10])
    assert code == 0 and json.loads(out)["metadata"]["name"] == "softmax"
    code, _, err = cli(capsys, "show", "--dir", str(folder), "a1a1a1a1")  # A only: C starts a1c3
    assert code == 0
    code, _, err = cli(capsys, "show", "--dir", str(folder), "a1")
    assert code == 2 and err.strip() == ("despina cache show: error: 'a1' is neither a key (64 hex digits) nor a "
                                         "prefix of 8 or more")
    code, out, err = cli(capsys, "stats", "--dir", str(folder))
    total = sum(FileCache(folder).path(k).stat().st_size for k in (A, B, C)) / 1024
    assert code == 0 and out.strip() == f"{folder}: 3 kernels, {total:.1f} KiB (by target: sm_80: 2, sm_90: 1)", out
    code, out, _ = cli(capsys, "clear", "--dir", str(folder), "--older-than", "1d")
    assert code == 0 and out.strip() == "deleted 1 kernel not used since 1d" and not FileCache(folder).path(A).exists()
    code, out, _ = cli(capsys, "rm", "--dir", str(folder), B)
    assert code == 0 and out.strip() == f"deleted {B} from folder"
    code, _, err = cli(capsys, "rm", "--dir", str(folder), B)
    assert code == 1 and "no kernel" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli(capsys, "clear", "--dir", str(folder), "--all", "--json")
    assert json.loads(out) == {"deleted": [C]} and FileCache(folder).listing() == []


@pytest.mark.parametrize("argv,expected", [
    (["ls", "--since", "yesterday"], "--since: 'yesterday' is neither an age"),
    (["ls", "--since", "99999999d"], "more than 100 years"),
    (["ls", "--limit", "-4"], "--limit must be 1 to 10000, got -4"),
    (["ls", "--limit", "many"], "argument --limit: invalid int value"),
    (["clear"], "one of the arguments --older-than --all is required"),
    (["clear", "--older-than", "soon"], "--older-than: 'soon' is neither an age"),
    (["rm", "zz" * 32], "is neither a key"),
    (["ls", "--server", "grpc://host:50051"], "give the daemon's HTTP address"),
    (["ls", "--dir", "/nonexistent/folder"], "--dir /nonexistent/folder: no such folder"),
    (["ls", "--server", "http://127.0.0.1:1"], "cannot reach the daemon at http://127.0.0.1:1"),
])
def test_bad_arguments_are_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    code, _, err = cli(capsys, *argv, *([] if "--dir" in argv or "--server" in argv else ["--dir", str(tmp_path)]))
    assert code in (1, 2) and expected in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1, err


# ---- on a daemon -------------------------------------------------------------------------------------------


def test_daemon_ls_show_rm_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from server.conftest import Daemon, unique
    from server.kernels import vector_add_ir

    d = Daemon(tmp_path, token="t0ken")
    try:
        keys = []
        for name, target in (("add_kernel", "sm_90"), ("mul_kernel", "sm_80"), ("add_kernel", "sm_80")):
            body = {"ir": base64.b64encode(vector_add_ir(name=name, salt=unique())).decode(), "target": target}
            keys.append(httpx.post(d.http + "/v1/compile", json=body, headers=d.headers(), timeout=30).json()["key"])
        httpx.post(d.http + "/v1/compile", json=body, headers=d.headers(), timeout=30)  # a second hit for the last
        server = ["--server", d.http, "--token", "t0ken"]
        code, out, _ = cli(capsys, "ls", *server)
        rows = [line.split() for line in out.splitlines()[1:]]
        assert code == 0 and [r[0] for r in rows] == [k[:16] for k in reversed(keys)]
        assert rows[0][1:6] == ["add_kernel", "sm_80", "4", "3", "2"] and rows[0][-1] == "memory,disk"
        code, out, _ = cli(capsys, "ls", *server, "--json", "--name", "add_*", "--target", "sm_90")
        assert [i["key"] for i in json.loads(out)] == [keys[0]]
        code, out, _ = cli(capsys, "show", *server, keys[1][:12])
        shown = json.loads(out)
        assert shown["metadata"]["name"] == "mul_kernel" and shown["hits"] == 1 and shown["options"]["num_warps"] == 4
        code, out, _ = cli(capsys, "rm", *server, keys[1])
        assert code == 0 and out.strip() == f"deleted {keys[1]} from memory, disk"
        code, out, _ = cli(capsys, "stats", *server)
        assert json.loads(out)["memory_entries"] == 2
        code, _, err = cli(capsys, "clear", "--server", d.http, "--token", "wrong", "--all")
        assert code == 1 and err.startswith("despina cache clear: error: UNAUTHENTICATED")
        code, out, _ = cli(capsys, "clear", *server, "--all")
        assert code == 0 and out.strip() == "deleted 2 kernels"
        assert httpx.get(d.http + "/v1/kernels", headers=d.headers()).json() == []
    finally:
        d.stop()
