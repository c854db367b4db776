"""Hides the .gpu-vllm pack's FlashInfer from SGLang in qla-serve's SGLang adapter test on the H200.

SGLang 0.5.23 imports FlashInfer names inside ``try: ... except ImportError`` at import time; the
pack's FlashInfer 0.6.14 is not the release SGLang was built against. Raising ImportError here gives
SGLang the same import path as on a machine without FlashInfer (what the CPU tests exercise).
"""
raise ImportError("flashinfer is hidden for qla-serve's SGLang adapter test (tests/sglang/run_gpu.sh)")
