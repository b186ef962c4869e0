#!/bin/sh
# make bench-gpu: runs the GPU benchmarks in bench/gpu/ where a GPU exists.
set -u
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "bench-gpu: skipped: no GPU on this machine"
	exit 0
fi
status=0
found=0
for b in bench/gpu/*.sh; do
	[ -e "$b" ] || continue
	found=1
	echo "== $b"
	sh "$b" || { echo "$b: failed (exit $?)"; status=1; }
done
[ "$found" = 1 ] || echo "bench-gpu: no GPU benchmarks yet"
exit $status
