"""The console command: info, demo, warm-up planning."""
from __future__ import annotations

import json

import pytest

from qla_serve.cli import main
from qla_serve.warmup import variants_for


def test_info_names_backends_and_reasons(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "prefill: -> reference" in text
    assert "tilelang   needs a CUDA device, got cpu" in text
    assert "torch 2." in text


def test_info_json(capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dispatch (K=V=128)"]["prefill"]["reference"] == "ok"
    assert info["versions"]["torch"]


def test_demo_checks_against_oracle(capsys):
    assert main(["demo", "--requests", "5", "--max-len", "150", "--budget", "96", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "| backend" in text


def test_warmup_variants_from_config():
    qwen3_next = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                  "linear_value_head_dim": 128}
    assert variants_for(qwen3_next, tp_sizes=[1, 2, 8]) == [(16, 32), (8, 16), (2, 4)]
    assert variants_for({"text_config": {"linear_num_key_heads": 16, "linear_num_value_heads": 64}}) == [(16, 64)]
    with pytest.raises(ValueError, match="linear_num_key_heads"):
        variants_for({"hidden_size": 8})
    with pytest.raises(ValueError, match="tp=3"):
        variants_for(qwen3_next, tp_sizes=[3])


def test_bad_heads_argument():
    with pytest.raises(SystemExit):
        main(["demo", "--heads", "3/4"])
