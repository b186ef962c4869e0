#!/bin/sh
# make fuzz: runs each harness build/fuzz/fuzz-NAME for SECONDS on a copy of
# its seed corpus (tests/fuzz/corpus/NAME, copied to build/fuzz/corpus/NAME
# so that what the fuzzer finds stays out of the source tree), then prints
# one row per harness: executions, coverage (libFuzzer's cov: and ft:
# counters), corpus size, and crashes (crash-, leak-, timeout- and oom-
# files in build/fuzz/artifacts/NAME/). A dictionary tests/fuzz/NAME.dict is
# used when there is one. Exit status 1 when anything crashed.
#
#   sh tests/fuzz/run.sh [-t SECONDS] NAME...
set -eu
cd "$(dirname "$0")/../.."

secs=60
if [ "${1:-}" = "-t" ]; then
	secs=$2
	shift 2
fi
[ $# -gt 0 ] || { echo "usage: run.sh [-t SECONDS] NAME..." >&2; exit 64; }

export OMP_NUM_THREADS=1
# scratch files in memory (checkpoints are fsynced, which costs on a disk),
# in a directory of this run: a harness that crashes leaves its files
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	TMPDIR=$(mktemp -d /dev/shm/gptkit-fuzzrun.XXXXXX)
	export TMPDIR
	trap 'rm -rf "$TMPDIR"' EXIT
fi
# A leak is a finding; so is UB (the harnesses are built with recover off).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

bad=0
rows=
for name in "$@"; do
	bin=build/fuzz/fuzz-$name
	[ -x "$bin" ] || { echo "run.sh: $bin is not built; run 'make fuzz-build'" >&2; exit 66; }
	work=build/fuzz/corpus/$name art=build/fuzz/artifacts/$name log=build/fuzz/$name.log
	mkdir -p "$work" "$art"
	[ -d "tests/fuzz/corpus/$name" ] && cp -p "tests/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true
	echo "fuzz: $name for ${secs}s (log: $log)" >&2
	set +e
	dict=
	[ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=25 -rss_limit_mb=2560 \
		-max_len=65536 -artifact_prefix="$art/" $dict "$work" >"$log" 2>&1
	status=$?
	set -e
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)
	cov=$(printf '%s\n' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(printf '%s\n' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	units=$(find "$work" -type f | wc -l)
	crashes=$(find "$art" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
	if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
		bad=1
		echo "fuzz: $name: exit status $status; see $log and $art/" >&2
	fi
	rows="$rows$(printf '%-12s %12s %8s %8s %8s %8s' "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$units" "$crashes")
"
done
printf '%-12s %12s %8s %8s %8s %8s\n' harness executions cov ft corpus crashes
printf '%s' "$rows"
exit $bad
