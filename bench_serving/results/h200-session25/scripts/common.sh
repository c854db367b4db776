# Session 25: sourced by every call script after the uploads (which unpacked the kernel cache).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
mkdir -p "$TILELANG_CACHE_DIR"
echo "cached kernels: $(ls $TILELANG_CACHE_DIR/0.1.15/linux-x86_64/kernels 2>/dev/null | wc -l)"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
