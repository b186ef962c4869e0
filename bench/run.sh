#!/bin/sh
# make bench: runs every benchmark script in bench/ (not run*.sh, nor the
# lib*.sh they source). Each prints its figures next to a peer measured in
# the same run; none of them asserts a time. Record what you measure in
# bench/RESULTS.md with the date and machine.
set -u
cd "$(dirname "$0")/.."
status=0
found=0
for b in bench/*.sh; do
	case "$(basename "$b")" in run*.sh | lib*.sh) continue ;; esac
	found=1
	echo "== $b"
	sh "$b" || { echo "$b: failed (exit $?)"; status=1; }
done
[ "$found" = 1 ] || echo "bench: no benchmarks yet"
exit $status
