"""bench_serving/gpu_cache_subset.sh packs exactly the cache entries its command looked up."""
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench_serving" / "gpu_cache_subset.sh"


def _fake_cache(root: Path, names) -> Path:
    kernels = root / "0.1.15" / "linux-x86_64" / "kernels"
    for name in names:
        (kernels / name).mkdir(parents=True)
        (kernels / name / "manifest.json").write_text("{}")
        (kernels / name / "executable.so").write_bytes(b"\0" * 16)
    return kernels


def _atime_moves(path: Path) -> bool:
    """Whether a read moves this mount's access times forward (relatime does, once atime ≤ mtime)."""
    os.utime(path, (946684800, path.stat().st_mtime))       # atime 2000-01-01
    path.read_bytes()
    return path.stat().st_atime > 946684800


def test_packs_only_the_entries_looked_up(tmp_path):
    kernels = _fake_cache(tmp_path / "cache", ["aaa", "bbb", "ccc"])
    if not _atime_moves(kernels / "aaa" / "manifest.json"):
        pytest.skip("this mount does not update access times (noatime): the script cannot work here")
    out = tmp_path / "subset.tar.xz"
    # the command reads two manifests through TILELANG_CACHE_DIR, as a prebuild's cache lookups do
    cmd = 'cat "$TILELANG_CACHE_DIR"/0.1.15/linux-x86_64/kernels/{aaa,ccc}/manifest.json > /dev/null'
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "cache"), str(out), "--", "bash", "-c", cmd],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "2 entries looked up" in done.stdout
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
    base = "0.1.15/linux-x86_64/kernels"
    assert {f"{base}/aaa/manifest.json", f"{base}/aaa/executable.so", f"{base}/ccc/manifest.json"} <= names
    assert not any("/bbb" in n for n in names)


def test_refuses_when_nothing_was_looked_up(tmp_path):
    _fake_cache(tmp_path / "cache", ["aaa"])
    out = tmp_path / "subset.tar.xz"
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "cache"), str(out), "--", "true"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "no entry was looked up" in done.stderr
    assert not out.exists()
