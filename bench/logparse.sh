#!/bin/sh
# bench/logparse.sh: how many MB of training log gpt-logparse parses per second
# on one core. Generates a log of FleetX step lines (with the usual noise
# lines between them) of about SIZE_MB (default 512) once, then times rows
# to /dev/null and --summary (needs GNU time, /usr/bin/time).
#
#   sh bench/logparse.sh [SIZE_MB]
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/gpt-logparse
size_mb=${1:-512}
dir=${TMPDIR:-/tmp}/gptkit-bench-logparse
log=$dir/big-$size_mb.log
mkdir -p "$dir"
if [ ! -s "$log" ]; then
	# ~260 bytes a step line, one noise line every 20 steps.
	awk -v n=$((size_mb * 1024 * 1024 / 262)) 'BEGIN {
		for (i = 1; i <= n; i++) {
			if (i % 20 == 0)
				printf "[2026-11-21 10:%02d:%02d,%03d] [    INFO] - saving dataloader state, consumed samples %d\n", (i / 60000) % 60, (i / 1000) % 60, i % 1000, i * 8
			printf "[2026-11-21 10:%02d:%02d,%03d] [    INFO] - global step %d, epoch: 0, batch: %d, loss: %.9f, avg_reader_cost: 0.00013 sec, avg_batch_cost: %.5f sec, speed: 9.31 step/s, ips_total: %d tokens/s, ips: %d tokens/s, learning rate: %.5e\n", (i / 60000) % 60, (i / 1000) % 60, i % 1000, i, i - 1, 11 - i * 1e-6, 0.1 + (i % 7) * 0.001, 76000 + i % 5000, 9500 + i % 600, i * 1e-9
		}
	}' >"$log"
fi
bytes=$(wc -c <"$log")
echo "log: $log ($bytes bytes)"
# Wall time suffers when other jobs share the core, so the CPU time the
# process itself used (user + sys) is reported beside it.
for mode in rows summary; do
	case $mode in rows) args= ;; summary) args=--summary ;; esac
	pin=
	command -v taskset >/dev/null 2>&1 && pin="taskset -c 0"
	/usr/bin/time -f "%e %U %S" -o "$dir/time" $pin "$bin" $args "$log" >/dev/null 2>&1
	read -r wall user sys <"$dir/time"
	echo "$mode: $(echo "$bytes $wall $user $sys" | awk '{ cpu = $3 + $4;
		printf "wall %.2f s (%.0f MB/s), cpu %.2f s (%.0f MB/s per cpu second)",
			$2, $1 / 1e6 / $2, cpu, $1 / 1e6 / cpu }')"
done

# The peer: the awk one-liner people write for these logs (step, loss, lr,
# step time, tokens/s per card and total), timed the same way.
/usr/bin/time -f "%e %U %S" -o "$dir/time" $pin awk -F', ' '/global step / {
	split($1, a, "global step "); split($4, l, ": "); split($6, t, ": ");
	split($8, tt, ": "); split($9, c, ": "); split($10, r, ": ");
	print a[2], l[2], r[2], t[2] + 0, c[2] + 0, tt[2] + 0 }' "$log" >/dev/null 2>&1
read -r wall user sys <"$dir/time"
echo "peer awk rows: $(echo "$bytes $wall $user $sys" | awk '{ cpu = $3 + $4;
	printf "wall %.2f s (%.0f MB/s), cpu %.2f s (%.0f MB/s per cpu second)",
		$2, $1 / 1e6 / $2, cpu, $1 / 1e6 / cpu }')"
