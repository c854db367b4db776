# Session 26 (kept for 27): sourced by every call script. Unpacks the kernel cache carried in THIS call (session
# 25: a cache unpacked by an earlier call was gone in the next) and installs the checkout.
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
mkdir -p "$TILELANG_CACHE_DIR"
for f in .gpu-p/tlc*.tar.xz; do
  [ -f "$f" ] && tar -xJf "$f" -C "$TILELANG_CACHE_DIR" && echo "unpacked $f"
done
echo "cached kernels: $(ls $TILELANG_CACHE_DIR/0.1.15/linux-x86_64/kernels 2>/dev/null | wc -l)"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
finish() {   # a call returns at most 8 files: everything else goes into one tar
  (cd $OUT && tar -czf all.tar.gz --exclude=all.tar.gz --exclude='site-*' . 2>/dev/null)
}
