"""bench_serving/sass_count.py's parsing of nvdisasm -g output and its split of the walk by warp role
(the compile and disassembly themselves need nvcc and nvdisasm; the tool is run by hand)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench_serving"))
import sass_count  # noqa: E402

SASS = """
        //## File "/tmp/x/device_kernel.cu", line 12
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_1) ;
        //## File "/usr/include/cute/debug.hpp", line 5 inlined at "/tmp/x/device_kernel.cu", line 12
        /*0020*/                   S2R R0, SR_TID.X ;
        //## File "/tmp/x/device_kernel.cu", line 40
        /*0030*/                   MUFU.EX2 R3, R2 ;
        /*0a40*/              @P1  FFMA R4, R3, R3, R4 ;
"""


def test_parse_counts_the_kernels_own_lines_only():
    got = sass_count.parse(SASS)
    assert dict(got[12]) == {"LDC": 1, "BRA": 1}
    assert dict(got[40]) == {"MUFU": 1, "FFMA": 1}
    assert sum(sum(c.values()) for c in got.values()) == 4          # the inlined header's S2R is left out
    assert sass_count.totals(SASS) == {"LDC": 1, "BRA": 1, "S2R": 1, "MUFU": 1, "FFMA": 1}   # the whole kernel


def test_regions_split_the_walk_at_its_setmaxnreg_calls():
    lines = ["x"] * 10
    for i in (2, 5, 8):
        lines[i - 1] = "tl::warpgroup_reg_alloc<240>();"
    assert sass_count.regions(lines, "fwd") == [("consumers", 2, 4), ("WG_P", 5, 7), ("IO", 8, 10)]
    assert sass_count.regions(lines, "kkt") == [("kkt_solve", 1, 10)]


def test_regions_count_both_consumers_at_v_block_128():
    # V-block 128 has two consumer warpgroups, each with its own setmaxnreg before WG_P's and IO's
    lines = ["x"] * 12
    for i in (2, 4, 8, 10):
        lines[i - 1] = "tl::warpgroup_reg_alloc<176>();"
    assert sass_count.regions(lines, "fwd") == [("consumers", 2, 7), ("WG_P", 8, 9), ("IO", 10, 12)]


def test_spill_summary_counts_local_memory_instructions():
    import collections

    ops = collections.Counter({"STL": 3, "LDL": 2, "HGMMA": 8})
    assert sass_count.spill_summary(ops) == "STL 3, LDL 2"
    assert sass_count.spill_summary(collections.Counter({"FFMA": 1})) == "STL 0, LDL 0"


def test_counts_compile_with_the_kernels_own_fast_math_setting():
    """kkt_solve is built with --use_fast_math, the walk without: the count must compile each the same
    way, or its SASS is not the built kernel's."""
    import pytest

    pytest.importorskip("tilelang")
    assert sass_count.fast_math("kkt") is True
    assert sass_count.fast_math("fwd") is False
