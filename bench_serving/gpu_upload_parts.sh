#!/usr/bin/env bash
# Split the .gpu pack (../shared/gpu/pack-site.sh → .gpu/site.tar.xz + prelude.sh) into upload parts
# that fit beside this checkout's tree in one `run` call each, and print the calls.
#
#   bash bench_serving/gpu_upload_parts.sh [LAST_CALL_CARRY ...]
#
# One call carries at most 64 MiB: the tree (tracked files and untracked ones git does not ignore)
# plus what `carry` names. The tree grows with every session's results (31.6 MiB in session 36,
# 40.4 in session 49), so a fixed part size stops fitting; this measures it. Parts go to .gpu-p/
# (ignored). Each call copies its part out of the carried folder into .gpu/ (a file carried into
# .gpu-p/ is gone in the next call that carries into it, session 24), and the last call joins them.
# LAST_CALL_CARRY: paths the last call will also carry (e.g. .gpu-p/tlc49-*.tar.xz), so that its
# part leaves room for them. A machine keeps .gpu/ between calls only while it stays warm (30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu/site.tar.xz ] && [ -f .gpu/prelude.sh ] || { echo "no .gpu/site.tar.xz: run ../shared/gpu/pack-site.sh first" >&2; exit 1; }
size() { stat -c %s "$@" | awk '{s += $1} END {print s + 0}'; }
# the tree in whole 4-KiB blocks per file: session 49's first call, with the byte count (40.4 MiB)
# plus a 23.1-MiB part, was refused as over 64 MiB; the block count is 44.1 MiB
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -c --block-size=1 2>/dev/null | tail -n 1 | cut -f1)
limit=$((64 * 1024 * 1024))
margin=$((1024 * 1024))                  # what the count may still miss (directory entries, a changed file)
extra=0; [ $# -gt 0 ] && extra=$(size "$@")
room=$((limit - tree - margin - $(size .gpu/prelude.sh)))
pack=$(size .gpu/site.tar.xz)
[ $room -gt $((4 * 1024 * 1024)) ] || { echo "the tree ($tree bytes) leaves no room for upload parts" >&2; exit 1; }
# full parts of `room` bytes, then a last part small enough to leave room for LAST_CALL_CARRY
[ $extra -lt $((room - 1024 * 1024)) ] || { echo "LAST_CALL_CARRY ($((extra >> 20)) MiB) leaves no room for a part beside the tree" >&2; exit 1; }
rm -rf .gpu-p/part.* && mkdir -p .gpu-p && cp .gpu/prelude.sh .gpu-p/prelude.sh
offset=0 i=0
while [ $((pack - offset)) -gt $((room - extra)) ]; do
  take=$room; [ $take -lt $((pack - offset)) ] || take=$((pack - offset - 1))    # something stays for the last
  dd if=.gpu/site.tar.xz of=.gpu-p/part.$i bs=1M iflag=skip_bytes,count_bytes skip=$offset count=$take status=none
  offset=$((offset + take)) i=$((i + 1))
done
dd if=.gpu/site.tar.xz of=.gpu-p/part.$i bs=1M iflag=skip_bytes skip=$offset status=none
parts=($(ls .gpu-p/part.* | sort -V))
printf 'tree %d MiB, room %d MiB a call, pack %d MiB in %d parts\n' $((tree >> 20)) $((room >> 20)) $((pack >> 20)) ${#parts[@]}
last=$(( ${#parts[@]} - 1 ))
for i in "${!parts[@]}"; do
  p=${parts[$i]}
  carry="\"$p\""; cmd="mkdir -p .gpu && cp $p .gpu/part$i"
  [ $i = 0 ] && { carry="$carry, \".gpu-p/prelude.sh\""; cmd="$cmd && cp .gpu-p/prelude.sh .gpu/"; }
  if [ $i = $last ]; then
    for f in "$@"; do carry="$carry, \"$f\""; done
    cmd="$cmd && cat \$(ls .gpu/part* | sort -V) > .gpu/site.tar.xz && rm .gpu/part* && <the call's command>"
  fi
  echo "call $((i + 1)): carry [$carry]  command: $cmd"
done
