"""bench_serving/host_profile.py on the CPU (kernels stubbed): every host part is measured, the CP
tables appear exactly for the rows the plan splits, and the JSON names what ran."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_host_profile_cpu(tmp_path):
    sys.path.insert(0, str(ROOT / "bench_serving"))
    import host_profile

    out = tmp_path / "host.json"
    assert host_profile.main(["--heads", "2/8", "--mixes", "1x8192,16x512", "--calls", "2", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["stubbed"] is True and rep["device"] == "cpu"
    long, short = rep["rows"]
    for row in rep["rows"]:
        assert all(row[k] > 0 for k in ("plan", "stage", "api", "glue")) and "launches" not in row
        assert isinstance(row["prepare"], float)    # a difference of two timings: may round to ≤ 0
    # 2/8: one 8K sequence is split (V-block 64, P = 8: session 25's sweep measured 0.080 ms GPU there
    # against 0.091 at 128 / P = 8, the pick before the width rule asked the cost model), 16×512 is not
    assert long["cp_parts"] == [8] and long["block_v"] == 64 and short["cp_parts"] is None
