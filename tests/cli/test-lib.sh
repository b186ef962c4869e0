# test-lib.sh: a small TAP harness for the CLI tests, in the manner of git's.
#
#   . "$(dirname "$0")/test-lib.sh"
#   test_expect_success 'what it shows' '
#       gpt-train -c cfg.yaml --print-config >out &&
#       grep hidden_size out
#   '
#   test_expect_success TORCH 'needs a prerequisite' '...'
#   test_expect_success TORCH,VOCAB 'needs both' '...'
#   test_done
#
# Each script runs in its own scratch directory (removed at the end unless a
# test failed or GPT_TEST_KEEP is set). Bodies run in a subshell with set -e;
# their output goes to a log that is shown as TAP comments when they fail.
# The programs in bin/ and tests/helper/test-tool are on PATH.

GPT_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GPT_TEST_NAME=$(basename "$0" .sh)
PATH="$GPT_ROOT/bin:$GPT_ROOT/tests/helper:$PATH"
export GPT_ROOT PATH
unset GPT_RANK GPT_WORLD_SIZE GPT_LOCAL_RANK GPT_MASTER RANK WORLD_SIZE LOCAL_RANK \
	SLURM_PROCID SLURM_NTASKS OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
export NO_COLOR=1 LC_ALL=C GPT_PROGRESS=0
# One OpenMP thread per test: prove runs tests side by side, and OpenMP
# barriers on an oversubscribed machine are an order of magnitude slower.
# Results do not depend on the thread count (the unit tests check that).
export OMP_NUM_THREADS="${GPT_TEST_THREADS:-1}"
# Tests preload shims (faultfs.so, slowfsync.so) with LD_PRELOAD; in a
# SANITIZE=1 build the shim then comes before ASan's runtime, which ASan
# refuses to start with unless told verify_asan_link_order=0.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

GPT_TRASH=$(mktemp -d "${TMPDIR:-/tmp}/gptkit-$GPT_TEST_NAME.XXXXXX") || exit 1
cd "$GPT_TRASH" || exit 1

test_count=0
test_failures=0
test_prereqs=" "

test_set_prereq () { test_prereqs="$test_prereqs$1 "; }
test_have_prereq () { case "$test_prereqs" in *" $1 "*) return 0;; esac; return 1; }

# Standard prerequisites.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && test_set_prereq GPU
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 && test_set_prereq TORCH
command -v node >/dev/null 2>&1 && test_set_prereq NODE
[ "$(id -u)" != 0 ] && test_set_prereq NOT_ROOT
test -f "$GPT_ROOT/share/gpt2/encoder.json" && test -f "$GPT_ROOT/share/gpt2/vocab.bpe" &&
	test_set_prereq VOCAB

# test_prereq_hint_ P: how to get prerequisite P where the skip line should say
test_prereq_hint_ () {
	case "$1" in
	VOCAB) echo ": no share/gpt2, the GPT-2 vocabulary that 'make deps' provides";;
	esac
}

test_run_ () {
	( set -e; eval "$1" ) >"$GPT_TRASH/.test-output" 2>&1 </dev/null
}

test_expect_success () {
	prereq=
	if [ $# = 3 ]; then prereq=$1; shift; fi
	test_count=$((test_count + 1))
	for p in $(echo "$prereq" | tr ',' ' '); do
		if ! test_have_prereq "$p"; then
			echo "ok $test_count # skip $1 (missing $p$(test_prereq_hint_ "$p"))"
			return 0
		fi
	done
	# Not inside "if": a shell ignores set -e in a condition, subshells included.
	test_run_ "$2"
	if [ $? = 0 ]; then
		echo "ok $test_count - $1"
	else
		test_failures=$((test_failures + 1))
		echo "not ok $test_count - $1"
		sed -e 's/^/#    /' <<-EOT
		$2
		EOT
		echo "#  output:"
		sed -e 's/^/#    /' "$GPT_TRASH/.test-output"
	fi
}

# test_expect_code CODE CMD...: run CMD, expect exit status CODE.
test_expect_code () {
	want=$1; shift
	got=0
	"$@" || got=$?
	if [ "$got" = "$want" ]; then return 0; fi
	echo "test_expect_code: '$*' exited $got, want $want" >&2
	return 1
}

# test_cmp EXPECTED ACTUAL
test_cmp () { diff -u "$1" "$2"; }

# test_grep PATTERN FILE: grep that shows the file when it does not match.
test_grep () {
	if grep -E -e "$1" "$2" >/dev/null; then return 0; fi
	echo "test_grep: no line matches '$1' in $2:" >&2
	cat "$2" >&2
	return 1
}

# test_wait_line FILE PATTERN: waits until a line of FILE matches (at most 30 s).
test_wait_line () {
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ $n -lt 600 ] || { echo "timed out waiting for '$2' in $1" >&2; return 1; }
		sleep 0.05
	done
}

# test_rank_pids PATTERN RANK: the processes of this test whose command line
# matches PATTERN (pgrep -f) and whose GPT_RANK is RANK. Only those running
# in the current directory count: the same test may be running at the same
# time from another checkout, and its ranks are not this test's to kill.
test_rank_pids () {
	here=$(pwd -P)
	for p in $(pgrep -f "$1"); do
		[ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$here" ] &&
			grep -qz "^GPT_RANK=$2\$" "/proc/$p/environ" 2>/dev/null && echo "$p"
	done
	:
}

# test_line_count OP N FILE
test_line_count () {
	n=$(wc -l <"$3" | tr -d ' ')
	if [ "$n" "$1" "$2" ]; then return 0; fi
	echo "test_line_count: $3 has $n lines, want $1 $2" >&2
	return 1
}

# "step loss" of each training line of a gpt-train log
train_losses () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p' "$1"
}

# same_train_losses LOG LOG [TOL]: $STEPS training lines each, the same steps,
# losses within a relative TOL (default 1e-5)
same_train_losses () {
	train_losses "$1" >l1 && train_losses "$2" >l2 &&
	test_line_count = "$STEPS" l1 && test_line_count = "$STEPS" l2 &&
	paste l1 l2 | awk -v tol="${3:-1e-5}" '{ d = $2 - $4; if (d < 0) d = -d; r = d / $2;
		if ($1 != $3 || r > tol) { print "step " $1 ": " $2 " vs " $4 " (rel " r ")"; bad = 1 } }
		END { exit bad }'
}

test_done () {
	echo "1..$test_count"
	cd /
	if [ "$test_failures" = 0 ] && [ -z "${GPT_TEST_KEEP:-}" ]; then
		rm -rf "$GPT_TRASH"
	else
		echo "# scratch directory kept: $GPT_TRASH"
	fi
	[ "$test_failures" = 0 ]
	exit $?
}
