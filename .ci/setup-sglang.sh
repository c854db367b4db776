#!/usr/bin/env bash
# Build the SGLang test venv from nothing: `bash .ci/setup-sglang.sh [VENV]` (default .venv-sglang).
#
# SGLang 0.5.23 pins torch 2.14.1 and CUDA-only kernels; its plugin system, server-args parser and
# GDN backend module import fine on CPU torch 2.13.0 with the few pure-Python deps below, so we
# install sglang with --no-deps and add only what `import sglang.srt.layers.attention.linear.
# gdn_backend` needs. torchvision is an import-only stub (sglang.srt.configs imports it; the real
# wheel would drag in a CUDA torch). Idempotent: a finished venv is recognised by a stamp file.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-sglang}"
STAMP="$VENV/.qla-sglang-ready"
# Bump when the list below changes so existing venvs are rebuilt in place.
RECIPE="4"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$RECIPE" ]]; then
    # Re-point the editable install only if the venv was built for another checkout.
    if ! "$VENV/bin/python" -c 'import os, sys, qla_serve
sys.exit(os.path.dirname(os.path.dirname(os.path.abspath(qla_serve.__file__))) != os.getcwd())' 2>/dev/null; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e ".[test]"
    fi
    echo "setup-sglang: $VENV ready"
    exit 0
fi

[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)

"${PIP[@]}" torch==2.13.0
"${PIP[@]}" "transformers==5.19.0" "pytest>=8" numpy tqdm
# sglang and the modules its import chain touches. --no-deps where a package would pull a CUDA
# torch (sglang, compressed-tensors) or a tree we do not import.
"${PIP[@]}" --no-deps sglang==0.5.23 triton apache-tvm-ffi compressed-tensors==0.18.0 gguf openai \
    fastapi opentelemetry-api
"${PIP[@]}" msgspec einops orjson psutil pybase64 requests pillow starlette pyzmq aiohttp dill \
    sentencepiece IPython loguru sniffio partial_json_parser uvicorn
"${PIP[@]}" --no-deps -e ".[test]"

# Import-only torchvision stub: `import sglang.srt.configs` imports transformers' image utilities
# and sglang's own vision configs, which only need these names to exist at import time. The real
# wheel would replace CPU torch 2.13 with a CUDA build. Nothing here works if called.
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$PY" - "$SITE" <<'PYEOF'
import pathlib, shutil, sys

root = pathlib.Path(sys.argv[1]) / "torchvision"
shutil.rmtree(root, ignore_errors=True)
HEAD = '"""Import-only torchvision stand-in for qla-serve\'s SGLang CPU test venv."""\n'
STUB = HEAD + (
    "def _stub(*args, **kwargs):\n"
    "    raise RuntimeError('torchvision is an import-only stub in this venv')\n"
)
files = {
    "__init__.py": HEAD + "__version__ = '0.0.0+stub'\nfrom . import io, transforms  # noqa: F401\n",
    "io.py": STUB + "import enum\nclass ImageReadMode(enum.Enum):\n    UNCHANGED = 0\n    RGB = 3\n"
             "decode_image = read_image = read_video = _stub\n",
    "transforms/__init__.py": HEAD + "from . import functional, v2  # noqa: F401\n"
             "from .functional import InterpolationMode  # noqa: F401\n",
    "transforms/functional.py": STUB + "import enum\nclass InterpolationMode(enum.Enum):\n"
             "    NEAREST = 'nearest'\n    NEAREST_EXACT = 'nearest-exact'\n    BILINEAR = 'bilinear'\n"
             "    BICUBIC = 'bicubic'\n    BOX = 'box'\n    HAMMING = 'hamming'\n    LANCZOS = 'lanczos'\n"
             "pil_to_tensor = to_tensor = resize = normalize = _stub\n",
    "transforms/v2/__init__.py": HEAD + "from . import functional  # noqa: F401\n",
    "transforms/v2/functional.py": STUB + "resize = normalize = pad = center_crop = grayscale_to_rgb = _stub\n",
}
for rel, text in files.items():
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
PYEOF

"$PY" - <<'PYEOF'
import sglang.srt.plugins  # noqa: F401
import sglang.srt.server_args  # noqa: F401
import sglang.srt.layers.attention.linear.gdn_backend  # noqa: F401
import qla_serve  # noqa: F401
PYEOF
echo "$RECIPE" > "$STAMP"
echo "setup-sglang: $VENV built"
