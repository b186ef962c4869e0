#!/bin/sh
# Soak: a long training on 4 CPU ranks under gpt-launch while a random worker
# is killed with SIGKILL every few minutes; gpt-launch restarts the group
# from the last checkpoint each time. At the end the final weights must equal
# those of an unbroken run of the same number of steps, bit for bit (same
# layout), and the script prints the restarts survived, the steps redone and
# the wall time lost. Not part of `make test`: it runs for about twice
# SOAK_MINUTES (the faulty run, then the unbroken one).
#
#   tests/soak/soak.sh                      30 minutes, a kill about every 3
#   SOAK_MINUTES=2 tests/soak/soak.sh       the short form
#
# Settings (environment):
#   SOAK_MINUTES       length of the faulty run (default 30)
#   SOAK_KILL_EVERY    mean seconds between kills (default: a tenth of the run);
#                      each gap is drawn uniformly from half to one and a half times it
#   SOAK_SAVE_SECONDS  seconds of training between checkpoints (default: a sixth
#                      of SOAK_KILL_EVERY, 1 to 30)
#   SOAK_RANKS         workers (default 4)
#   SOAK_SEED          seed of the kill times and ranks (default: from the clock)
#   SOAK_ARGS          more gpt-train arguments, e.g. "-o Model.hidden_size=128"
#   SOAK_DIR           work directory (default: a new one under TMPDIR, removed
#                      on success unless SOAK_KEEP=1)
# Exit status: 0 when the weights match, 1 when they do not or a run failed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$ROOT/bin:$ROOT/tests/helper:$PATH"
export PATH NO_COLOR=1 LC_ALL=C GPT_PROGRESS=0

MINUTES=${SOAK_MINUTES:-30}
RANKS=${SOAK_RANKS:-4}
SEED=${SOAK_SEED:-$(($(date +%s) % 100000 + $$))}
EXTRA=${SOAK_ARGS:-}
KEEP=${SOAK_KEEP:-0}
KILL_EVERY=${SOAK_KILL_EVERY:-$(awk -v m="$MINUTES" 'BEGIN { printf "%d", (m * 6 < 5 ? 5 : m * 6) }')}
SAVE_SECONDS=${SOAK_SAVE_SECONDS:-$(awk -v k="$KILL_EVERY" 'BEGIN { s = k / 6; printf "%.1f", (s < 1 ? 1 : (s > 30 ? 30 : s)) }')}

say () { echo "soak: $*"; }
die () { echo "soak: FAIL: $*" >&2; exit 1; }

for p in gpt-launch gpt-train gpt-preprocess test-tool; do
	command -v $p >/dev/null || die "$p is not built; run make first"
done
if [ -n "${SOAK_DIR:-}" ]; then
	W=$SOAK_DIR
	mkdir -p "$W" || die "cannot create $W"
else
	W=$(mktemp -d "${TMPDIR:-/tmp}/gptkit-soak.XXXXXX") || die "cannot create a work directory"
fi
cd "$W" || die "cannot enter $W"
now () { date +%s; }

# train_args OUT STEPS SAVE_STEPS: the training, the same for every run
train_args () {
	echo "-c $ROOT/configs/tiny_cpu_bytes.yaml -o Data.Train.dataset.input_dir=$W/data/lic" \
		"-o Data.Train.dataset.split=15,2,0 -o Global.micro_batch_size=1" \
		"-o Engine.eval_freq=0 -o Engine.test_iters=0 -o Engine.logging_freq=1" \
		"-o Engine.save_load.save_epoch=0 -o Engine.save_load.save_steps=$3" \
		"-o Engine.max_steps=$2 -o Optimizer.lr.decay_steps=$2 -o Engine.num_train_epochs=1000000" \
		"-o Engine.save_load.output_dir=$W/$1 $EXTRA"
}

# prune OUT: keep the checkpoint `latest` names and the one before it, and
# the unfinished saves of processes that still run; a long soak would fill
# the disk otherwise
prune () {
	[ -f "$1/latest" ] || return 0
	keep=$(cat "$1/latest")
	ls "$1" | grep '^step_' | sort | awk -v k="$keep" '$0 < k { a[n++] = $0 } END { for (i = 0; i < n - 1; i++) print a[i] }' |
		while read -r b; do rm -rf "${1:?}/$b"; done
	for d in "$1"/.step_*.tmp.*; do
		[ -e "$d" ] || continue
		kill -0 "${d##*.}" 2>/dev/null || rm -rf "$d"
	done
}

# last_step LOG: the last global step logged
last_step () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*/\1/p' "$1" 2>/dev/null | tail -n 1
}

say "work directory $W, seed $SEED"
mkdir -p data && gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* >/dev/null 2>&1 ||
	die "gpt-preprocess failed"

# ---- calibration: the step rate of this machine, to size the run ----
gpt-launch --nproc-per-node "$RANKS" --log-dir calib.log -- gpt-train $(train_args calib 60 1000000) >/dev/null 2>&1 ||
	die "the calibration run failed; see $W/calib.log"
RATE=$(sed -n 's/.* - global step \([0-9]*\),.*avg_batch_cost: \([0-9.]*\) sec.*/\1 \2/p' calib.log/workerlog.0 |
	awk '$1 > 10 { s += $2; n++ } END { if (n && s > 0) printf "%.2f", n / s; else print 0 }')
awk -v r="$RATE" 'BEGIN { exit !(r > 0) }' || die "no step rate from the calibration run"
STEPS=$(awk -v r="$RATE" -v m="$MINUTES" 'BEGIN { s = int(r * m * 60); print s < 20 ? 20 : s }')
SAVE=$(awk -v r="$RATE" -v s="$SAVE_SECONDS" 'BEGIN { v = int(r * s); print v < 1 ? 1 : v }')
say "$RANKS ranks, $STEPS steps (about $MINUTES min at $RATE steps/s), a checkpoint every $SAVE steps," \
	"a SIGKILL about every $KILL_EVERY s"

# ---- the faulty run ----
# kill times and ranks, drawn up front from the seed
awk -v seed="$SEED" -v k="$KILL_EVERY" -v n="$RANKS" 'BEGIN {
	srand(seed); for (i = 0; i < 10000; i++) printf "%d %d\n", k * (0.5 + rand()), int(rand() * n) }' >plan
mkdir pids
t0=$(now)
{ gpt-launch --nproc-per-node "$RANKS" --max-restarts 1000000 --log-dir soak.log -- \
	sh -c "echo \$\$ >pids/\$GPT_RESTART_COUNT.\$GPT_RANK; exec gpt-train $(train_args soak "$STEPS" "$SAVE")" \
	>/dev/null 2>launch.err & }
launcher=$!
kills=0
exec 3<plan
while read -r gap rank <&3; do
	due=$(($(now) + gap))
	while kill -0 $launcher 2>/dev/null && [ "$(now)" -lt "$due" ]; do
		prune soak
		sleep 1
	done
	kill -0 $launcher 2>/dev/null || break
	# the current attempt's worker; during a restart, wait for the new one
	while kill -0 $launcher 2>/dev/null; do
		attempt=$(ls pids | sed 's/\..*//' | sort -n | tail -n 1)
		pid=$(cat "pids/$attempt.$rank" 2>/dev/null)
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && break
		sleep 0.2
	done
	kill -0 $launcher 2>/dev/null || break
	step=$(last_step "soak.log/workerlog.$rank")
	kill -KILL "$pid" 2>/dev/null || continue
	kills=$((kills + 1))
	say "+$(($(now) - t0)) s: SIGKILL to rank $rank (pid $pid) at about global step ${step:-0}"
done
exec 3<&-
code=0
wait $launcher || code=$?
t_soak=$(($(now) - t0))
prune soak
[ "$code" = 0 ] || { cat launch.err >&2; die "gpt-launch exited $code; see $W/soak.log"; }
restarts=$(grep -c "restarting the group" launch.err)
# steps redone: for each attempt after the first, the last step the previous
# one logged minus the step this one resumed from (0 without a checkpoint)
redone=$(awk '
	/ - resumed from .* at global step / { r = $NF }
	/ - training [0-9]+ parameters for / { if (n++) s += last - r; r = 0 }
	/ - global step [0-9]+, epoch/ { v = $0; sub(/.* - global step /, "", v); sub(/,.*/, "", v); last = v + 0 }
	END { print s + 0 }' soak.log/workerlog.0)

# ---- the unbroken run ----
t1=$(now)
{ gpt-launch --nproc-per-node "$RANKS" --log-dir ref.log -- gpt-train $(train_args ref "$STEPS" "$SAVE") \
	>/dev/null 2>ref.err & }
ref=$!
while kill -0 $ref 2>/dev/null; do
	prune ref
	sleep 1
done
code=0
wait $ref || code=$?
t_ref=$(($(now) - t1))
[ "$code" = 0 ] || die "the unbroken run failed (exit $code); see $W/ref.log"

# ---- the verdict ----
final=step_$(printf %08d "$STEPS")
say "restarts survived: $restarts (of $kills kills)"
say "steps redone: $redone"
say "wall time: $t_soak s with the kills, $t_ref s unbroken: $((t_soak - t_ref)) s lost"
[ "$(cat soak/latest 2>/dev/null)" = "$final" ] || die "the faulty run's latest is not $final"
diff=$(test-tool ckpt-diff "ref/$final" "soak/$final") || die "cannot compare the final checkpoints"
loss_a=$(sed -n "s/.* - global step $STEPS, .* loss: \([0-9.]*\),.*/\1/p" soak.log/workerlog.0 | tail -n 1)
loss_b=$(sed -n "s/.* - global step $STEPS, .* loss: \([0-9.]*\),.*/\1/p" ref.log/workerlog.0 | tail -n 1)
say "final loss: $loss_a with the kills, $loss_b unbroken; $diff"
case $diff in
"max-abs-diff 0 "*) ;;
*) die "the final weights differ from the unbroken run's ($diff); see $W" ;;
esac
[ "$loss_a" = "$loss_b" ] || die "the final losses differ; see $W"
[ "$restarts" -ge 1 ] || say "warning: no kill landed; make SOAK_KILL_EVERY shorter than the run"
say "PASS: the final weights at global step $STEPS equal the unbroken run's"
if [ "$KEEP" != 1 ] && [ -z "${SOAK_DIR:-}" ]; then
	cd / && rm -rf "$W"
fi
