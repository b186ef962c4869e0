#!/bin/sh
# GPU training speed and memory of gptkit (Global.device: gpu, one process)
# next to PyTorch on the same GPU in the same run (bench/gpu/torch_gpt_cuda.py:
# the same GPT-2 with scaled_dot_product_attention, torch.compile, autocast,
# fused AdamW; block checkpointing where gptkit recomputes).
#
# Rows: GPT-2 124M at T=1024 in bf16 (B=32, again with dropout 0.1 on both
# sides, again with Model.fused_linear's GELU epilogues, again with the
# classifier in blocks of 4096 rows, again with the bias gradients from
# cuBLASLt's epilogue and again with its GEMM algorithms timed, these three
# gptkit alone, and B=64) and fp32
# (B=8); the 345M seed
# config (configs/pretrain_gpt_345M_single_card.yaml: fp16, batch 8, seq
# 1024; issue target: under 25 GB); the 1.3B seed config with recompute
# (configs/pretrain_gpt_1.3B_single_card.yaml; target: under 20 GB), also
# with the optimizer state offloaded to the host (sharding_offload; again with
# its step in one chunk, GPT_OFFLOAD_CHUNK), in bf16, and at sharding_stage 3
# (fp16 parameters kept only as the fp32 master).
#
# Prints tokens/s (mean step time after two warm-up steps, from gpt-train's
# log lines), MFU: (6N + 6LCT) FLOPs per token over the device's dense bf16
# peak (PEAK_TFLOPS, default 989, an H100 SXM), and peak memory: gptkit's
# from nvidia-smi every 200 ms (the whole process, CUDA context included),
# PyTorch's from its allocator (torch.cuda.max_memory_reserved; the context
# adds about 0.5 GB). Without PyTorch on the machine the torch columns say
# "-". Record each run in bench/RESULTS.md with the date, device and command.
#   STEPS=12 ONLY="124M bf16" sh bench/gpu/train.sh
# ONLY keeps the rows whose names contain it, or one of its |-separated
# parts; NO_TORCH=1 leaves PyTorch out (the seed configs' memory, quickly):
#   NO_TORCH=1 STEPS=6 ONLY="345M seed|1.3B seed" sh bench/gpu/train.sh
#
# NCU=1: each row trains NCU_STEPS (default 3) steps under Nsight Compute
# (ncu: kernel durations only, the clocks and caches left as they are) and
# prints, in place of its timing, where the GPU time of a step goes, kernel
# by kernel (bench/gpu/kernel_table.py); PyTorch does not run. The first
# step's attention times its forms (64, 128, 64a; 64m with dropout) under
# ncu too, whose overhead can pick others than a plain run (on an H100 the
# dropout row's forward took 64a under ncu, 64m without; a 124M row's dkv
# 64 under ncu, 128 without): so each row first trains a step outside ncu
# and the profiled run takes its picks (GPT_CUDA_ATTN_ROWS=F,Q,K);
# GPT_CUDA_ATTN_ROWS set for the script profiles those instead.
#   NCU=1 ONLY="124M bf16 (12x768, B32" sh bench/gpu/train.sh
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
STEPS=${STEPS:-12}
PEAK=${PEAK_TFLOPS:-989}
ONLY=${ONLY:-}
PY=${PYTHON:-python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bin/gpt-preprocess -t bytes -o "$W/lic" /usr/share/common-licenses/* >/dev/null 2>&1 ||
	{ echo "train-gpu: gpt-preprocess failed"; exit 1; }
status=0 # 1 once a gptkit row failed
NCU_BIN=
if [ -n "${NCU:-}" ]; then
	for c in ncu /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
		command -v "$c" >/dev/null 2>&1 && { NCU_BIN=$(command -v "$c"); break; }
	done
	[ -n "$NCU_BIN" ] || { echo "train-gpu: NCU=1 but no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin"; exit 1; }
fi
TORCH=1
[ -z "${NO_TORCH:-}" ] &&
	$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || TORCH=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -n "$NCU_BIN" ] || printf '%-36s %10s %7s %10s | %10s %7s %10s | %6s\n' shape "tok/s" MFU "peak mem" \
	"torch" MFU "peak mem" ratio

# train NCU STEPS OVERRIDES...: gpt-train on the row's config ($cfg) for
# STEPS steps, under Nsight Compute when NCU names it (with $attn, the
# attention's forms, GPT_CUDA_ATTN_ROWS), its output in $W/log: as many
# epochs of the small corpus as the steps take, no checkpoint, and no
# resuming from an earlier row's
train () {
	ncu_=$1 steps_=$2
	shift 2
	rm -rf "$W/out"
	${ncu_:+"$ncu_" --metrics gpu__time_duration.sum --clock-control none --cache-control none \
		--target-processes all -f -o "$W/prof"} \
	${row_env:+env $row_env} ${attn:+env GPT_CUDA_ATTN_ROWS=$attn} \
	bin/gpt-train -c "$cfg" -o Engine.max_steps=$steps_ -o Engine.logging_freq=1 \
		-o Engine.eval_freq=0 -o Engine.num_train_epochs=1000000 -o Engine.save_load.save_steps=0 \
		-o Engine.save_load.save_epoch=0 -o Engine.save_load.output_dir="$W/out" \
		-o Data.Train.dataset.input_dir="$W/lic" -o Data.Eval.dataset.input_dir="$W/lic" \
		-o Data.Train.dataset.split=1 -o Data.Eval.dataset.split=1 "$@" >"$W/log" 2>&1
}

# gptkit with config file $1 and overrides; sets tps (tokens/s) and mem (MiB)
gptkit () {
	cfg=$1
	shift
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$W/mem" 2>/dev/null &
	smi=$!
	steps=$STEPS
	[ -z "$NCU_BIN" ] || steps=${NCU_STEPS:-3}
	# under ncu, the attention's forms as a step outside it picks them
	# (timed under ncu, its overhead on every launch picks others), unless
	# GPT_CUDA_ATTN_ROWS says
	attn=
	if [ -n "$NCU_BIN" ] && [ -z "${GPT_CUDA_ATTN_ROWS:-}" ] && train "" 1 "$@"; then
		attn=$(sed -n 's/.* - attention tiles: forward \([0-9am]*\), dq \([0-9]*\), dkv \([0-9]*\) rows.*/\1,\2,\3/p' \
			"$W/log" | head -n 1)
	fi
	train "$NCU_BIN" "$steps" "$@"
	rc=$?
	kill $smi 2>/dev/null
	wait $smi 2>/dev/null
	if [ $rc != 0 ]; then
		tps=; mem=
		echo "gpt-train failed (exit $rc):"; tail -n 3 "$W/log"
		status=1
		return 1
	fi
	tps=$(sed -n 's/.*global step \([0-9]*\),.*avg_batch_cost: \([0-9.]*\) sec.*/\1 \2/p' "$W/log" |
		awk -v bt="$BT" '$1 > 2 { s += $2; n++ } END { if (n) printf "%.0f", bt * n / s }')
	mem=$(sort -n "$W/mem" | tail -n 1)
	# what gptkit allocated by its own count (what --dry-run plans): the
	# peak's rest is the CUDA context and the allocators' rounding
	own=$(sed -n 's/.* - memory: .*, total \([0-9.]* [KMG]*i*B\) (.*/\1/p' "$W/log" | tail -n 1)
	# the attention's tiles as timed at the first step (GPT_CUDA_ATTN_ROWS)
	tiles=$(sed -n 's/.* - attention tiles: \(forward [0-9am]*, dq [0-9]*, dkv [0-9]*\) rows.*/\1/p' "$W/log" | head -n 1)
	# GPT_CUDA_GEMM_TUNE's timing at the first step
	gemms=$(sed -n 's/.* - GEMM algorithms: \([0-9]* shapes timed, [0-9]*\) of them faster.*/\1 faster in another/p' "$W/log" |
		head -n 1)
}

# wanted NAME: ONLY is empty, or NAME contains one of its |-separated parts
wanted () {
	rest=$ONLY
	while :; do
		part=${rest%%|*}
		case "$1" in *"$part"*) return 0 ;; esac
		[ "$rest" != "$part" ] || return 1
		rest=${rest#*|}
	done
}

# name L C NH B T torch-precision(- for none) recompute(0|1) config overrides...
row () {
	name=$1 L=$2 C=$3 NH=$4 B=$5 T=$6 prec=$7 rec=$8 cfg=$9
	shift 9
	wanted "$name" || return
	# the table would count the first step's timing runs of every GEMM shape
	case "${NCU_BIN:+${row_env:-}}" in *GPT_CUDA_GEMM_TUNE*)
		echo "== $name: not profiled (its first step times each GEMM shape's algorithms)"
		return ;;
	esac
	BT=$((B * T))
	gptkit "$cfg" "$@" || return
	if [ -n "$NCU_BIN" ]; then
		echo "== $name: kernel time under ncu"
		"$NCU_BIN" --import "$W/prof.ncu-rep" --page raw --csv --print-units base >"$W/prof.csv" 2>"$W/ncu.err" &&
			$PY bench/gpu/kernel_table.py "$W/prof.csv" "$steps" ||
			{
				# ncu's own words first: where it cannot profile (gVisor: "Failed
				# to initialize the profiler"), the program ran without it
				grep -m 2 "==ERROR==" "$W/log"
				echo "ncu's report could not be read: $(tail -n 2 "$W/ncu.err")"
				status=1
			}
		return
	fi
	tt=- tm=- tmfu=- ratio=-
	if [ $TORCH = 1 ] && [ "$prec" != - ]; then
		r=
		[ "$rec" = 1 ] && r=recompute
		out=$(DROPOUT=${row_dropout:-0} $PY bench/gpu/torch_gpt_cuda.py "$L" "$C" "$NH" 50304 "$B" "$T" "$STEPS" \
			"$prec" $r 2>"$W/torch.err" | tail -n 1)
		case "$out" in
		tokens_per_s*)
			tt=$(echo "$out" | cut -d" " -f2)
			tm=$(echo "$out" | cut -d" " -f4)
			;;
		*) echo "torch failed: $(tail -n 1 "$W/torch.err")" ;;
		esac
	fi
	n=$((50304 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
	awk -v name="$name" -v a="$tps" -v n="$n" -v l="$L" -v c="$C" -v t="$T" -v p="$PEAK" -v m="$mem" \
		-v tt="$tt" -v tm="$tm" 'BEGIN {
		f = 6 * n + 6 * l * c * t
		mfu = sprintf("%.1f%%", 100 * f * a / (p * 1e12))
		if (tt == "-") { tmfu = "-"; r = "-"; tmm = "-" }
		else { tmfu = sprintf("%.1f%%", 100 * f * tt / (p * 1e12)); r = sprintf("%.2f", a / tt); tmm = tm " MiB" }
		printf "%-36s %10.0f %7s %6s MiB | %10s %7s %10s | %6s\n", name, a, mfu, m, tt, tmfu, tmm, r }'
	[ -z "$own" ] || printf '    (of its peak, %s allocated by gptkit: its memory line)\n' "$own"
	[ -z "$tiles" ] || printf '    (attention tiles: %s rows)\n' "$tiles"
	[ -z "$gemms" ] || printf '    (GEMM algorithms: %s than cuBLASLt'"'"'s first)\n' "$gemms"
}

tiny=$ROOT/configs/tiny_cpu.yaml
model124="-o Model.vocab_size=50304 -o Model.hidden_size=768 -o Model.num_layers=12 \
-o Model.num_attention_heads=12 -o Model.ffn_hidden_size=3072 -o Model.max_position_embeddings=1024 \
-o Data.Train.dataset.max_seq_len=1024 -o Data.Eval.dataset.max_seq_len=1024 -o Global.device=gpu \
-o Model.hidden_dropout_prob=0 -o Model.attention_probs_dropout_prob=0"
# shellcheck disable=SC2086
row "124M bf16 (12x768, B32 T1024)" 12 768 12 32 1024 bf16 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2
# with dropout 0.1 (attention probabilities and residuals, as GPT-2 and the
# seed configs train), PyTorch too (its DROPOUT)
row_dropout=0.1
# shellcheck disable=SC2086
row "124M bf16 B32, dropout 0.1" 12 768 12 32 1024 bf16 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2 -o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1
row_dropout=
# shellcheck disable=SC2086
row "124M bf16 B32, GELU in the GEMMs" 12 768 12 32 1024 bf16 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2 -o Model.fused_linear=True
# the classifier in 8 blocks of 4096 rows, not 26 of 1280 (Model.classifier_rows;
# 0: about 64 Mi logits a block): fewer passes of wte's gradient through its
# GEMM's read and write of C, for 412 MiB more of logits; PyTorch has no such
# setting (its row is the first's)
# shellcheck disable=SC2086
row "124M bf16 B32, classifier 4096 rows" 12 768 12 32 1024 - 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2 -o Model.classifier_rows=4096
# the bias gradients of qkv, fc and the projections from the weight
# gradients' GEMMs (cuBLASLt's BGRADB epilogue, GPT_CUDA_BIAS_GRAD=gemm), not
# column sums (fc's in its GELU's backward); PyTorch's row is the first's
row_env=GPT_CUDA_BIAS_GRAD=gemm
# shellcheck disable=SC2086
row "124M bf16 B32, bias gradients in the GEMMs" 12 768 12 32 1024 - 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2
# each GEMM shape in the fastest of cuBLASLt's first 8 algorithms, timed at
# its first call (GPT_CUDA_GEMM_TUNE; as cudnn.benchmark, not the same bits
# from run to run); PyTorch's row is the first's
row_env=GPT_CUDA_GEMM_TUNE=8
# shellcheck disable=SC2086
row "124M bf16 B32, GEMM algorithms timed" 12 768 12 32 1024 - 0 "$tiny" $model124 \
	-o Global.global_batch_size=32 -o Global.micro_batch_size=32 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2
row_env=
# shellcheck disable=SC2086
row "124M bf16 (12x768, B64 T1024)" 12 768 12 64 1024 bf16 0 "$tiny" $model124 \
	-o Global.global_batch_size=64 -o Global.micro_batch_size=64 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
	-o Engine.mix_precision.level=O2
# shellcheck disable=SC2086
row "124M fp32 (12x768, B8 T1024)" 12 768 12 8 1024 fp32 0 "$tiny" $model124 \
	-o Global.global_batch_size=8 -o Global.micro_batch_size=8
row "345M seed config (fp16, B8 T1024)" 24 1024 16 8 1024 fp16 0 \
	"$ROOT/configs/pretrain_gpt_345M_single_card.yaml"
row "1.3B seed config, recompute (fp16, B8)" 24 2048 16 8 1024 fp16 1 \
	"$ROOT/configs/pretrain_gpt_1.3B_single_card.yaml"
# the same with ZeRO-Offload (optimizer state and AdamW on the host): the
# plain O2 layout needs 16 bytes per parameter, 19.6 GiB, before activations
row "1.3B seed, recompute, offload (fp16)" 24 2048 16 8 1024 - 1 \
	"$ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Distributed.sharding.sharding_offload=True
# the same with the offloaded step in one chunk: every gradient down, then
# the host's AdamW, then every parameter up, as before 2026-11-27's chunks,
# whose copies run beside the host's work (but for the parameters' own
# download each step, which is gone)
row_env=GPT_OFFLOAD_CHUNK=1000000000000
row "1.3B seed, recompute, offload, one chunk" 24 2048 16 8 1024 - 1 \
	"$ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Distributed.sharding.sharding_offload=True
row_env=
# in bf16, whose master weights are kept split: 14 bytes per parameter
# (--dry-run: 18.86 GiB in all, against the fp16 row's 21.31)
row "1.3B seed, recompute, bf16" 24 2048 16 8 1024 - 1 \
	"$ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Engine.mix_precision.dtype=bfloat16
# fp16 at sharding_stage 3 on one card: the fp32 master weights are the only
# copy of the parameters, each layer's fp16 weights cast into a window when
# it runs, 14 bytes per parameter (--dry-run: 19.15 GiB in all)
row "1.3B seed, recompute, stage 3 (fp16)" 24 2048 16 8 1024 - 1 \
	"$ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Distributed.sharding.sharding_stage=3
exit $status
