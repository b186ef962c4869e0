#!/bin/sh
# tests/gpu/check.sh [STAGE...]: the GPU checks in one run bounded in time,
# for a GPU machine lent by the hour or a cluster node: needs neither make,
# prove nor the build's libraries. Run it in a source tree with a CUDA build
# (make gpu-pack builds all it runs), or in a copy of the sources holding
# the pack .gpu-pack/gptkit-gpu.tar.xz that make gpu-pack made on a build
# machine: it unpacks it in place first, and refuses a pack built from other
# sources.
#
# Stages, in this order (default: all of them; probe always runs):
#   probe      the GPU, driver, toolkit, compute-sanitizer and PyTorch; every
#              packed program loads (the pack's libraries first on the library
#              path; cuBLAS and NCCL looked for in the CUDA toolkit and in
#              PyTorch's nvidia packages); gpt-train --version runs
#   ops        test-cuda-ops (every op against the CPU backend, fp32, bf16,
#              fp16), test-cuda-cast, test-cuda-qgemm
#   kernels    bench/gpu/ops.sh: every op's time and rate at the seed
#              models' shapes (build/bench/gpu-ops), PyTorch's attention at
#              the same shapes next to it
#   attnprof   bench/gpu/attnprof.sh: the attention kernels once each under
#              Nsight Compute's full set (occupancy, pipes, stall reasons);
#              the full report and its raw metrics land in the logs
#              (ATTNPROF_ONLY and ATTNPROF_KERNELS for other kernels)
#   attnsrc    bench/gpu/attnsrc.sh: one attention kernel (ATTNSRC_KERNEL,
#              default the forward without dropout; ATTNSRC_ONLY the ops
#              that run it) under Nsight Compute's
#              warp-state sampling, instruction by instruction: the hottest
#              SASS and its stall reasons; the whole table in the logs
#   comm       test-comm-stage (shm collectives on device buffers),
#              test-comm-nccl
#   layouts    t4060: dp2, mp2, pp2, sharding2 stage 3, offload, overlapped
#              buckets and resume on one GPU, against one rank
#   infer      t4061: gpt-infer --device cuda against the CPU
#   generate   bench/gpu/infer.sh: gpt-infer's generation speed on the GPU
#              (GPT-2 124M shapes, batch 1 and 8; fp32, bf16, fp16, int8)
#              next to PyTorch's on the same GPU
#   bench      bench/gpu/train.sh's rows named by CHECK_BENCH, its ONLY
#              (default "124M bf16 (12x768, B32": GPT-2 124M, bf16, B=32,
#              T=1024), next to PyTorch on the same GPU
#   llmc       bench/gpu/llmc.sh: llm.c's GPT-2 trainer at the 124M rows'
#              shapes, where LLMC_DIR names an llm.c checkout (skipped
#              otherwise: nothing downloads)
#   memory     the 345M and 1.3B seed configs' rows (the 1.3B with recompute,
#              again with the optimizer state offloaded, its step in chunks
#              and in one, and in bf16, its master weights split), 6 steps each,
#              without PyTorch: their peak memory and tokens/s
#   profile    the bench stage's rows for 3 steps under Nsight Compute
#              (ncu): the GPU time of a step kernel by kernel (each row
#              after a step outside ncu, whose attention forms it takes)
#   sanitizer  t4062: compute-sanitizer memcheck, racecheck and synccheck
#
# CHECK_SECONDS (default 480) bounds the whole run: a stage starts only when
# the least time it needs is left, and is stopped when the time runs out.
# The summary, a line per test program with its TAP counts and seconds, is
# printed last and written to $OUT/summary.txt (OUT, default check-out in
# the tree), with every log in $OUT/logs.tar.gz. Exit 0 when nothing that
# ran failed or ran out of time. CHECK_BIN (default build/tests/gpu) is where
# the test programs are; with GPT_EMU_BIN (see t4060) and CHECK_BIN=build/emu
# the stages up to infer run under the CPU emulation of tests/gpu/emu,
# save kernels (skipped: its figures would mean nothing there).
#
#   tests/gpu/check.sh --digest    the digest of the sources make gpu-pack records
set -u
cd "$(dirname "$0")/../.." || exit 66
ROOT=$PWD
PACK=.gpu-pack/gptkit-gpu.tar.xz

digest () {
	{
		cat Makefile
		find lib cmd tests/gpu tests/unit tests/helper bench/gpu -type f \
			\( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \) | LC_ALL=C sort | xargs cat
	} | sha256sum | cut -c1-32
}
if [ "${1:-}" = --digest ]; then
	digest
	exit 0
fi

ALL="probe ops kernels attnprof attnsrc comm layouts infer generate bench llmc memory profile sanitizer"
STAGES=${*:-$ALL}
for s in $STAGES; do
	case " $ALL " in *" $s "*) ;; *)
		echo "check: no stage '$s' (stages: $ALL)" >&2
		exit 64
		;;
	esac
done
BUDGET=${CHECK_SECONDS:-480}
START=$(date +%s)
OUT=${OUT:-$ROOT/check-out}
TB=${CHECK_BIN:-build/tests/gpu}
mkdir -p "$OUT" || exit 74
L=$(mktemp -d) || exit 74
trap 'rm -rf "$L"' EXIT
SUM=$L/summary.txt
failed=0

# seconds left, 0 once the budget is spent (a stage stopped at its limit
# may end a second or two past it on a loaded machine)
left () {
	l=$((BUDGET - $(date +%s) + START))
	echo $((l > 0 ? l : 0))
}
say () { echo "$*" | tee -a "$SUM"; }
line () { say "$(printf '%-16s %-5s' "$1" "$2") $3"; } # NAME RESULT TEXT
log () { echo "$*" >>"$L/probe.log"; }

# the pack's programs run where this tree has no CUDA build of its own
PACKED=1
[ -f build/lib/cuda/nccl.cu.o ] && PACKED=0

# unpack PACK in place (seconds: every run, so that what runs is the pack's)
unpack () {
	if command -v xz >/dev/null 2>&1; then
		xz -dc "$PACK" | tar -xf -
	else
		python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(**({"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}))' "$PACK"
	fi
}

# the directory holding library $1, from where the CUDA toolkit and
# PyTorch's nvidia-* packages keep them
find_lib () {
	for d in ${CUDA_HOME:-/usr/local/cuda}/lib64 /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib \
		/usr/lib/x86_64-linux-gnu /usr/lib64; do
		[ -e "$d/$1" ] && { echo "$d"; return 0; }
	done
	f=$(find /opt /usr/local/lib /usr/lib/python3* -name "$1" 2>/dev/null | head -n 1)
	[ -n "$f" ] && dirname "$f"
}

# the libraries some program here does not find
not_found () {
	for p in bin/gpt-* "$TB"/test-* build/bench/gpu-ops tests/helper/test-tool; do
		case $p in *.o | *.d) continue ;; esac
		[ -x "$p" ] && ldd "$p" 2>&1
	done | awk '/not found/ { print $1 }' | sort -u
}

probe () {
	{
		echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -srm)"
		nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
		command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 1
		for c in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer; do
			command -v "$c" >/dev/null 2>&1 && { "$c" --version | head -n 1; break; }
		done
		env -u LD_LIBRARY_PATH python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -n 1
	} >>"$L/probe.log" 2>&1
	if [ $PACKED = 0 ]; then
		log "this tree's own CUDA build runs"
	elif [ -f "$PACK" ]; then
		unpack 2>>"$L/probe.log" ||
			{ line probe FAIL "the pack $PACK does not unpack (it takes xz, or python3's tarfile)"; return 1; }
		cat .gpu-pack/BUILD >>"$L/probe.log"
		if [ "$(cat .gpu-pack/SOURCES)" != "$(digest)" ]; then
			line probe FAIL "the pack was built from other sources than this tree's: make gpu-pack again"
			return 1
		fi
		LD_LIBRARY_PATH=$ROOT/.gpu-pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	[ -x bin/gpt-train ] || { line probe FAIL "no bin/gpt-train: make CUDA=1 gpu-pack, here or on a build machine"; return 1; }
	export LD_LIBRARY_PATH
	for m in $(not_found); do
		d=$(find_lib "$m")
		[ -n "$d" ] || continue
		log "found $m in $d"
		LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
	done
	log "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	miss=$(not_found)
	if [ -n "$miss" ]; then
		line probe FAIL "not found: $(echo "$miss" | tr '\n' ' ')(LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
		return 1
	fi
	v=$(bin/gpt-train --version 2>&1) || { line probe FAIL "bin/gpt-train --version: $v"; return 1; }
	log "$v"
	v=$(echo "$v" | head -n 1)
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	if [ "$gpus" = 0 ] && [ -z "${GPT_EMU_BIN:-}" ]; then
		line probe SKIP "no GPU (nvidia-smi lists none); the programs load: $v"
		return 2
	fi
	if [ "$gpus" = 0 ]; then
		line probe ok "no GPU: the CPU emulation of tests/gpu/emu (GPT_EMU_BIN); $v"
	else
		line probe ok "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1) x$gpus; $v"
	fi
}

# fits NAME MIN: at least MIN seconds are left (t: how many), else a SKIP line
fits () {
	t=$(left)
	[ "$t" -ge "$2" ] && return 0
	line "$1" SKIP "${t}s left, it needs ${2}s"
	return 1
}

# run NAME MIN CMD...: a TAP program under what is left of the time; one
# summary line with its counts
run () {
	name=$1 min=$2
	shift 2
	fits "$name" "$min" || return
	s=$(date +%s)
	timeout -k 10 "$t" "$@" >"$L/$name.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - s))
	# plan, ok, skipped, not ok
	# shellcheck disable=SC2046
	set -- $(awk '/^1\.\.[0-9]+/ && !plan { sub(/^1\.\./, ""); plan = $1 + 0; seen = 1 }
		/^ok / { ok++; if (tolower($0) ~ /# skip/) sk++ }
		/^not ok / { nok++ }
		END { printf "%s %d %d %d\n", seen ? plan : "-", ok, sk, nok }' "$L/$name.log")
	plan=$1 ok=$2 sk=$3 nok=$4
	of=" of $plan"
	[ "$plan" = - ] && of= # a test-lib script prints its plan last
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		r=STOP d="out of time after $((ok + nok))$of tests, $nok failed"
	elif [ "$plan" = 0 ]; then
		r=SKIP d=$(sed -n 's/^1\.\.0 # SKIP *//p' "$L/$name.log" | head -n 1)
	elif [ $rc = 0 ] && [ "$nok" = 0 ] && [ "$plan" = "$ok" ]; then
		r=ok d="$ok/$plan"
		[ "$sk" = 0 ] || d="$d ($sk skipped)"
	else
		r=FAIL d="$nok$of failed, $((ok + nok)) ran, exit $rc"
		if [ "$nok" = 0 ]; then
			tail -n 3 "$L/$name.log"
		else
			grep '^not ok' "$L/$name.log" | head -n 5
		fi | sed 's/^/    /' >"$L/fails"
	fi
	line "$name" "$r" "$d, ${secs}s"
	if [ "$r" = FAIL ]; then
		tee -a "$SUM" <"$L/fails"
		failed=1
	fi
	[ "$r" = STOP ] && failed=1
}

want () { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }

# table NAME MIN CMD...: a benchmark under what is left of the time, its
# table in the summary
table () {
	name=$1 min=$2
	shift 2
	if [ -n "${GPT_EMU_BIN:-}" ]; then
		line "$name" SKIP "not under the CPU emulation"
		return
	fi
	fits "$name" "$min" || return
	s=$(date +%s)
	timeout -k 10 "$t" "$@" >"$L/$name.log" 2>&1
	rc=$?
	r=ok
	[ $rc = 0 ] || { r=FAIL; failed=1; }
	line "$name" $r "$(($(date +%s) - s))s, exit $rc:"
	tee -a "$SUM" <"$L/$name.log"
}

# bench NAME MIN ROWS [VAR=VALUE...]: bench/gpu/train.sh's rows ROWS (its
# ONLY) with those settings
bench () {
	name=$1 min=$2 rows=$3
	shift 3
	table "$name" "$min" env "$@" ONLY="$rows" sh bench/gpu/train.sh
}

gpu=1
probe
case $? in
0) ;;
2) gpu=0 ;;
*) failed=1 gpu=0 ;;
esac
# PyTorch with the library path it was installed for
export PYTHON="env -u LD_LIBRARY_PATH python3"

if [ $gpu = 1 ]; then
	if want ops; then
		run test-cuda-ops 30 "$TB/test-cuda-ops"
		run test-cuda-cast 5 "$TB/test-cuda-cast"
		run test-cuda-qgemm 10 "$TB/test-cuda-qgemm"
	fi
	want kernels && table kernels 20 sh bench/gpu/ops.sh
	want attnprof && table attnprof 40 env ATTNPROF_DIR="$L/attnprof" sh bench/gpu/attnprof.sh
	want attnsrc && table attnsrc 25 env ATTNSRC_DIR="$L/attnsrc" sh bench/gpu/attnsrc.sh
	if want comm; then
		run test-comm-stage 15 "$TB/test-comm-stage"
		run test-comm-nccl 15 "$TB/test-comm-nccl"
	fi
	want layouts && run t4060 40 sh tests/gpu/t4060-train-gpu-layouts.sh
	want infer && run t4061 30 sh tests/gpu/t4061-infer-cuda.sh
	want generate && table generate 40 sh bench/gpu/infer.sh
	BENCH=${CHECK_BENCH:-124M bf16 (12x768, B32}
	want bench && bench bench 120 "$BENCH"
	if want llmc; then
		if [ -n "${LLMC_DIR:-}" ]; then
			table llmc 60 sh bench/gpu/llmc.sh
		else
			line llmc SKIP "LLMC_DIR names no llm.c checkout"
		fi
	fi
	want memory && bench memory 40 "345M seed|1.3B seed" NO_TORCH=1 STEPS=6
	want profile && bench profile 60 "$BENCH" NCU=1
	want sanitizer && run t4062 60 sh tests/gpu/t4062-compute-sanitizer.sh
fi

cp "$SUM" "$OUT/summary.txt"
tar -czf "$OUT/logs.tar.gz" -C "$L" . 2>/dev/null
echo "== check: $(($(date +%s) - START))s of ${BUDGET}s; logs in $OUT/logs.tar.gz"
cat "$SUM"
exit $failed
