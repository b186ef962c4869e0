#!/bin/sh
# GPU training speed of gptkit (Global.device: gpu, one process): GPT-2 124M
# at T=1024 in bf16 and fp32, and the 345M seed shapes in fp16. Prints
# tokens/s (mean step time after two warm-up steps) and MFU: (6N + 6LCT)
# FLOPs per token over the device's dense bf16 peak (PEAK_TFLOPS, default
# 989, an H100 SXM). No PyTorch peer yet: bench/torch_gpt.py runs on the CPU.
# Record each run in bench/RESULTS.md with the date, device and command.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
STEPS=${STEPS:-12}
PEAK=${PEAK_TFLOPS:-989}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bin/gpt-preprocess -t bytes -o "$W/lic" /usr/share/common-licenses/* >/dev/null 2>&1 ||
	{ echo "train-gpu: gpt-preprocess failed"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
printf '%-34s %12s %7s %10s\n' shape "tok/s" MFU "peak mem"

run () { # name L C NH B T mixed(0|bfloat16|float16)
	if [ "$7" = 0 ]; then mp="enable: False"; else mp="enable: True, dtype: $7, level: O2"; fi
	cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu.yaml
Global: {device: gpu, global_batch_size: $5, micro_batch_size: $5}
Engine: {max_steps: $STEPS, logging_freq: 1, eval_freq: 0, save_load: {save_steps: 0}, mix_precision: {$mp}}
Model: {hidden_size: $3, num_layers: $2, num_attention_heads: $4, ffn_hidden_size: $(($3 * 4)), max_position_embeddings: $6}
Data:
  Train: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: $6}}
  Eval: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: $6}}
EOC
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$W/mem" 2>/dev/null &
	smi=$!
	bin/gpt-train -c "$W/c.yaml" >"$W/log" 2>&1
	rc=$?
	kill $smi 2>/dev/null
	if [ $rc != 0 ]; then
		echo "$1: gpt-train failed (exit $rc):"; tail -n 3 "$W/log"; return
	fi
	tps=$(sed -n 's/.*global step \([0-9]*\),.*avg_batch_cost: \([0-9.]*\) sec.*/\1 \2/p' "$W/log" |
		awk -v bt=$(($5 * $6)) '$1 > 2 { s += $2; n++ } END { printf "%.0f", bt * n / s }')
	mem=$(sort -n "$W/mem" | tail -n 1)
	n=$(( 50304 * $3 + $6 * $3 + $2 * (12 * $3 * $3 + 13 * $3) + 2 * $3 ))
	awk -v name="$1" -v a="$tps" -v n="$n" -v l="$2" -v c="$3" -v t="$6" -v p="$PEAK" -v m="$mem" 'BEGIN {
		f = (6 * n + 6 * l * c * t) * a
		printf "%-34s %12.0f %6.1f%% %7s MiB\n", name, a, 100 * f / (p * 1e12), m }'
}
run "124M bf16 (12x768, B16 T1024)" 12 768 12 16 1024 bfloat16
run "124M fp32 (12x768, B8 T1024)" 12 768 12 8 1024 0
run "345M fp16 (24x1024, B8 T1024)" 24 1024 16 8 1024 float16
