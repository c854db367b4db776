"""Build a tiny Qwen3-Next-style model on local disk: config, random weights, a trained tokenizer.

No downloads. Shapes (ARCHITECTURE §4): hidden 256, 4 layers = 3 Gated DeltaNet + 1 full
attention, linear heads 2 (q/k) / 4 (v), K = V = 128, conv width 4, MoE with 4 experts top-2 (a
dense-MLP Qwen3-Next trips vLLM's MoE setup), vocab 2048 with a ByteLevel BPE tokenizer trained
by ``tokenizers`` on a synthetic corpus. Everything is seeded: the same files on every machine.

    python bench_serving/tiny_model.py OUT_DIR [--seed 0] [--force]

The LM head is drawn wider than the other weights so that greedy choices have clear margins:
two GDN implementations that agree to bf16 noise then give identical greedy tokens, while a real
error (wrong state row, wrong layout) still changes them.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKER = "qla_tiny_model.json"   # written last: its presence means the build completed
VERSION = 3


def model_config_kwargs() -> dict:
    return dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        full_attention_interval=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        partial_rotary_factor=0.25,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=256,
        shared_expert_intermediate_size=256,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        dtype="bfloat16",
    )


# Larger shapes for GPU checks (serve with --load-format dummy, or build random weights).
PRESETS = {
    "tiny": {},
    # Qwen3-Next-80B per-layer shapes: hidden 2048, GDN 16/32 heads K=V=128, full attention every
    # 4th layer (16 q / 2 kv heads, head_dim 256), MoE top-10 with 512-wide experts. Reduced:
    # 8 layers instead of 48 and 64 experts instead of 512 (memory and load time).
    "qwen3-next-80b-8l": dict(
        hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2,
        num_attention_heads=16, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=32,
        num_experts=64, num_experts_per_tok=10, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, max_position_embeddings=32768),
}
# The serving benchmark (run_h200.sh): all 512 experts (top-10, 512 wide) as in the real model;
# depth reduced to 8 layers (6 GDN + 2 full attention; 48 in the real model: 512 experts x 48
# layers is ~155 GB of bf16 weights, more than one H200). The per-layer step is the real one, so
# the GDN share of a step is the real model's up to the embedding / LM head.
PRESETS["qwen3-next-80b-8l-e512"] = {**PRESETS["qwen3-next-80b-8l"], "num_experts": 512,
                                     "max_position_embeddings": 65536}
# One rank of the model at TP 8 (no communication): GDN 2/8 heads, attention 2 q / 1 kv heads,
# MoE experts and shared expert split 8 ways (512 -> 64 wide), hidden 2048 as in the full model.
PRESETS["qwen3-next-80b-8l-e512-tp8rank"] = {
    **PRESETS["qwen3-next-80b-8l-e512"], "linear_num_key_heads": 2, "linear_num_value_heads": 8,
    "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 704,
    "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}


def synthetic_corpus(seed: int, n_lines: int = 4000) -> list[str]:
    """Seeded pseudo-English: syllable words, punctuation, digits (no external text)."""
    rng = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
              "st", "tr", "pl", "ch", "sh", "th", "qu", "gr", "br"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"]
    codas = ["", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck"]
    words = []
    for _ in range(3000):
        words.append("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                             for _ in range(rng.choice([1, 1, 2, 2, 3]))))
    lines = []
    for _ in range(n_lines):
        n = rng.randint(5, 30)
        sent = " ".join(rng.choice(words) for _ in range(n))
        if rng.random() < 0.3:
            sent += f" {rng.randint(0, 99999)}"
        lines.append(sent.capitalize() + rng.choice([".", ".", "?", "!", ";"]))
    return lines


def build_tokenizer(out: Path, seed: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None, model_max_length=8192)
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(str(out))


def build_config(out: Path, preset: str) -> None:
    from transformers import Qwen3NextConfig

    cfg = Qwen3NextConfig(**{**model_config_kwargs(), **PRESETS[preset]})
    cfg.architectures = ["Qwen3NextForCausalLM"]
    cfg.save_pretrained(str(out))


def build_weights(out: Path, seed: int, preset: str = "tiny") -> None:
    import torch
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3NextConfig(**{**model_config_kwargs(), **PRESETS[preset]})
    cfg.architectures = ["Qwen3NextForCausalLM"]
    model = Qwen3NextForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        # Decisive greedy margins (see module docstring): logits std ≈ 0.5·sqrt(hidden).
        model.lm_head.weight.normal_(0.0, 0.5)
        # A strong token identity in the residual stream keeps each layer's share moderate.
        model.model.embed_tokens.weight.normal_(0.0, 1.0)
        for layer in model.model.layers:
            # GDN layers must matter: with the default init their core output (~1e-5) sits far
            # below the gated RMSNorm's sqrt(eps), so the norm never lifts it and a broken
            # state would go unnoticed. Wider input projections and conv make q/k/v O(1).
            lin = getattr(layer, "linear_attn", None)
            if lin is not None:
                lin.in_proj_qkvz.weight.normal_(0.0, 0.1)
                lin.in_proj_ba.weight.normal_(0.0, 0.1)
                lin.conv1d.weight.normal_(0.0, 0.5)
            # All experts equal: with normalised top-k weights the MoE output no longer depends
            # on which experts the router picks. A random router flips its choice on bf16 noise,
            # which would turn one-ulp differences between two correct GDN kernels into O(1)
            # differences downstream; the MoE stays (vLLM's Qwen3-Next needs it), its chaos goes.
            experts = getattr(layer.mlp, "experts", None)
            if experts is not None:
                for name, p in experts.named_parameters():
                    if p.dim() == 3:        # fused [E, ...] expert tensors (transformers ≥ 5)
                        p.copy_(p[:1].clone().expand_as(p))
                params = [m for m in experts.children()] if isinstance(experts, torch.nn.ModuleList) else []
                for e in params[1:]:
                    e.load_state_dict(params[0].state_dict())
    model.save_pretrained(str(out), safe_serialization=True)


def build(out: Path, seed: int = 0, force: bool = False, preset: str = "tiny", weights: bool = True) -> Path:
    """Build (or reuse) the model folder; ``weights=False`` writes config + tokenizer only
    (for ``vllm serve --load-format dummy``)."""
    out = Path(out)
    marker = out / MARKER
    want = {"version": VERSION, "seed": seed, "preset": preset, "weights": weights}
    if marker.exists() and not force:
        meta = json.loads(marker.read_text())
        if all(meta.get(k) == v for k, v in want.items()):
            return out
    out.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    build_tokenizer(out, seed)
    if weights:
        build_weights(out, seed, preset)
    else:
        build_config(out, preset)
    marker.write_text(json.dumps({**want, "config": {**model_config_kwargs(), **PRESETS[preset]}}, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rebuild even if OUT holds this build")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--no-weights", action="store_true", help="config + tokenizer only (--load-format dummy)")
    args = ap.parse_args(argv)
    path = build(args.out, args.seed, args.force, args.preset, not args.no_weights)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
