#!/usr/bin/env bash
# Pack only the TileLang cache entries a device call will look up, so that `.gpu` (45 MiB), the
# slimmed tree and the kernels fit one `run` (64 MiB in all). A cache dir built over several
# sessions holds every experiment's kernels (session 52's: 697 entries, 17 MB packed; its whole GPU
# test file needs 378 of them, 8.2 MB).
#
#   bash bench_serving/gpu_cache_subset.sh CACHE_DIR OUT.tar.xz -- CMD [ARGS ...]
#
# CMD runs with TILELANG_CACHE_DIR=CACHE_DIR (normally one or more `gpu_prebuild.py` commands
# through `bash -c`, each in the package copy whose kernels the call runs; it compiles what is
# missing). An entry counts as looked up when CMD read its manifest.json: every manifest's access
# time is first set to 2000-01-01, and on a relatime mount (the CPU machine's /tmp) a read then
# moves it forward. The tar holds those entries under 0.1.15/… as common.sh unpacks them.
set -euo pipefail
[ $# -ge 4 ] && [ "$3" = "--" ] || { echo "usage: $0 CACHE_DIR OUT.tar.xz -- CMD [ARGS ...]" >&2; exit 2; }
cache="$(cd "$1" && pwd)" out="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
shift 3
kernels=$(cd "$cache" && ls -d */*/kernels 2>/dev/null | head -n 1)
[ -n "$kernels" ] || { echo "no */*/kernels under $cache" >&2; exit 1; }
mark=$(mktemp) list=$(mktemp)
trap 'rm -f "$mark" "$list"' EXIT
find "$cache/$kernels" -mindepth 2 -maxdepth 2 -name manifest.json -exec touch -a -d 2000-01-01 {} +
touch -d "@$(( $(date +%s) - 1 ))" "$mark"     # a second back: reads in the same clock tick still count
TILELANG_CACHE_DIR="$cache" "$@"
(cd "$cache" && find "$kernels" -mindepth 2 -maxdepth 2 -name manifest.json -neweram "$mark" -printf '%h\n' | sort > "$list")
n=$(wc -l < "$list")
[ "$n" -gt 0 ] || { echo "no entry was looked up (is the mount noatime?)" >&2; exit 1; }
(cd "$cache" && tar -cJf "$out" -T "$list")
echo "$n entries looked up, packed into $out ($(du -h "$out" | cut -f1))"
