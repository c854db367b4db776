"""bench_serving/err_compare.py: two records of the GPU tests' oracle errors, matched case by case."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench_serving"))
import err_compare  # noqa: E402


def _record(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_ratios_per_case_and_the_unmatched_cases(tmp_path, capsys):
    new = _record(tmp_path / "new.jsonl", [
        {"case": "a", "o_err": 2e-3, "state_err": 1e-3},
        {"case": "b", "o_err": 1e-3, "state_err": 4e-3},
        {"case": "only-new", "o_err": 1e-3, "state_err": 1e-3},
        {"case": "combine", "starts_err": 1e-6, "worst_row_err": 2e-6},     # no o/state: not compared
    ])
    ref1 = _record(tmp_path / "ref1.jsonl", [{"case": "a", "o_err": 1e-3, "state_err": 1e-3},
                                              {"case": "b", "o_err": 9e-9, "state_err": 9e-9}])
    ref2 = _record(tmp_path / "ref2.jsonl", [{"case": "b", "o_err": 2e-3, "state_err": 2e-3},   # the later record wins
                                              {"case": "only-ref", "o_err": 1e-3, "state_err": 1e-3}])
    assert err_compare.main([new, ref1, ref2]) == 0
    out = capsys.readouterr().out
    assert "×2.00   state 1.000e-03 ×1.00" in out                     # a: o doubled, state equal
    assert "×0.50   state 4.000e-03 ×2.00" in out                     # b, against ref2's record
    assert "o: ×0.50–2.00, median ×1.25 over 2 cases" in out
    assert "errors bit-equal to the reference: 0 of 2 cases" in out
    assert "only in the new record (2): combine, only-new" in out
    assert "only in the reference (1): only-ref" in out


def test_bit_equal_errors_are_counted(tmp_path, capsys):
    rec = [{"case": "a", "o_err": 1.25e-3, "state_err": 2e-3}, {"case": "b", "o_err": 1e-3, "state_err": 1e-3}]
    new = _record(tmp_path / "new.jsonl", rec[:1] + [{"case": "b", "o_err": 1e-3, "state_err": 1.0000001e-3}])
    assert err_compare.main([new, _record(tmp_path / "ref.jsonl", rec)]) == 0
    assert "errors bit-equal to the reference: 1 of 2 cases" in capsys.readouterr().out


def test_usage_without_a_reference(capsys):
    assert err_compare.main(["x.jsonl"]) == 2
    assert "NEW.jsonl REF.jsonl" in capsys.readouterr().out
