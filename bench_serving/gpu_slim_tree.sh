#!/usr/bin/env bash
# Make the tree a device call sends small, and put it back: every `run` sends the checkout's tracked
# files, and ~97 % of them are committed results (45.9 of 47.3 MiB in session 51), which left 18 MiB
# a call beside them: `.gpu` (45 MiB) took three upload calls. With them out, `.gpu` and ~15 MB of
# prebuilt kernels go up in ONE call.
#
#   bash bench_serving/gpu_slim_tree.sh out [KEEP ...]   # move bench_serving/results/* aside, except KEEP
#   bash bench_serving/gpu_slim_tree.sh back             # put them back (git status clean again)
#
# KEEP: folders under bench_serving/results/ a call reads (default: the call scripts' common.sh and
# the error record err_compare.py compares against; name the session's own folder too). They go to
# .gpu-slim/ (git-ignored, so never sent); git sees them as deleted until `back`: never commit in between.
set -euo pipefail
cd "$(dirname "$0")/.."
R=bench_serving/results S=.gpu-slim
case "${1:-}" in
out)
  shift
  [ ! -e $S ] || { echo "$S exists: run 'back' first" >&2; exit 1; }
  keep=(h200-session26/scripts h200-session43/b-tests "$@")
  mkdir -p $S
  git ls-files -z $R | tar --null -T - -cf - | tar -xf - -C $S         # a copy first: nothing is lost if a step fails
  git ls-files -z $R | xargs -0 rm -f
  for k in "${keep[@]}"; do (cd $S && git -C "$OLDPWD" ls-files -z "$R/$k" | tar --null -T - -cf -) | tar -xf -; done
  find $R -type d -empty -delete
  echo "tree now $(( $(git ls-files -co --exclude-standard -z | xargs -0 du -c --block-size=1 2>/dev/null | tail -n 1 | cut -f1) >> 10 )) KiB"
  ;;
back)
  [ -d $S ] || { echo "no $S: nothing to put back" >&2; exit 1; }
  (cd $S && tar -cf - .) | tar -xf - && rm -rf $S
  git status --short | head
  ;;
*) echo "usage: $0 out [KEEP ...] | back" >&2; exit 2 ;;
esac
