#!/bin/sh
# CPU training speed: gptkit next to PyTorch (the same model and AdamW) in
# the same run, 2 threads each, on the GPT-2 124M shapes (B=4, T=64) and a
# small model (6 layers, 384 hidden, 6 heads, B=8, T=128), in fp32 and in
# bf16 (gptkit: bf16 storage with fp32 master weights; PyTorch: autocast).
# Prints tokens/s, the ratio, and the achieved GFLOP/s (6N + 12LCT per
# token) against the GEMM rate of the machine measured in the same run:
# sgemm for the fp32 rows, gptkit's bf16 GEMM for the bf16 rows.
# DTYPES=fp32 (or bf16) runs one precision only. DROPOUT=P trains both
# with dropout P at gptkit's sites (the embeddings, the attention
# probabilities, both residual branches; default 0).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-8}
THREADS=${THREADS:-2}
DTYPES=${DTYPES:-fp32 bf16}
DROPOUT=${DROPOUT:-0}
PY=/usr/bin/python3
VOCAB=share/gpt2
[ -f "$VOCAB/encoder.json" ] || { echo "train-cpu: skipped: no GPT-2 vocabulary (make deps)"; exit 0; }
$PY -c 'import torch' 2>/dev/null || { echo "train-cpu: skipped: no PyTorch (make deps)"; exit 0; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bin/gpt-preprocess -o "$W/lic" /usr/share/common-licenses/* >/dev/null 2>&1

export OMP_NUM_THREADS=$THREADS
sg=$(tests/helper/test-tool sgemm 2048 5)
sgf=$(OPENBLAS_CORETYPE=SkylakeX tests/helper/test-tool sgemm 2048 5)
sgb=$(tests/helper/test-tool sgemm 2048 5 bf16)
echo "sgemm 2048, $THREADS threads: $sg GFLOP/s as linked; $sgf GFLOP/s with OPENBLAS_CORETYPE=SkylakeX"
echo "bf16 GEMM 2048 (fp32 accumulation), $THREADS threads: $sgb GFLOP/s"
# The fp32 ceiling: a Zen 4 core issues two 256-bit FMAs a cycle (a 512-bit
# one takes both), 32 fp32 FLOP a cycle; vdpbf16ps does twice that in bf16.
mhz=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)
awk -v t="$THREADS" -v mhz="${mhz:-0}" -v sg="$sg" 'BEGIN {
	printf "fp32 peak: 32 FLOP/cycle/core x %d cores x %.0f MHz (nominal clock) = %.0f GFLOP/s; sgemm reaches %.1f (%.2f GHz at 32 FLOP/cycle)\n",
		t, mhz, 32 * t * mhz / 1000, sg, sg / (32 * t) }'
printf '%-28s %12s %12s %7s %14s %9s\n' shape "gptkit tok/s" "torch tok/s" ratio "gptkit GFLOP/s" "of sgemm"

run () { # name L C NH B T dtype
	mp=
	[ "$7" = bf16 ] && mp='mix_precision: {enable: True, dtype: bfloat16},'
	cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu.yaml
Global: {global_batch_size: $5, micro_batch_size: $5}
Engine: {max_steps: $STEPS, logging_freq: 1, eval_freq: 0, $mp save_load: {save_steps: 0}}
Model: {hidden_size: $3, num_layers: $2, num_attention_heads: $4, ffn_hidden_size: $(($3 * 4)), max_position_embeddings: $6,
  hidden_dropout_prob: $DROPOUT, attention_probs_dropout_prob: $DROPOUT}
Data:
  Train: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: $6}}
  Eval: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: $6}}
EOC
	bin/gpt-train -c "$W/c.yaml" >"$W/log" 2>&1
	# mean step time over the steps after the first two (warm-up)
	ours=$(sed -n 's/.*global step \([0-9]*\),.*avg_batch_cost: \([0-9.]*\) sec.*/\1 \2/p' "$W/log" |
		awk -v bt=$(($5 * $6)) '$1 > 2 { s += $2; n++ } END { printf "%.1f", bt * n / s }')
	theirs=$(OPENBLAS_CORETYPE=SkylakeX $PY bench/torch_gpt.py $2 $3 $4 50304 $5 $6 $STEPS $THREADS $7 $DROPOUT | cut -d" " -f2)
	n=$(( 50304 * $3 + $6 * $3 + $2 * (12 * $3 * $3 + 13 * $3) + 2 * $3 ))
	rate=$sg
	[ "$7" = bf16 ] && rate=$sgb
	awk -v name="$1" -v a="$ours" -v b="$theirs" -v n="$n" -v l="$2" -v c="$3" -v t="$6" -v sg="$rate" 'BEGIN {
		g = (6 * n + 12 * l * c * t) / 1e9
		printf "%-28s %12.1f %12.1f %7.2f %14.1f %8.0f%%\n", name, a, b, a / b, g * a, 100 * g * a / sg
		if (name ~ /^124M/ && name !~ /bf16/)
			printf "%.1f %.1f\n", 2 * b * g, 100 * 2 * b * g / sg >"/dev/stderr" }' 2>>"$W/need"
}
for d in $DTYPES; do
	tag=
	[ "$d" = bf16 ] && tag=" bf16"
	[ "$DROPOUT" = 0 ] || tag="$tag p=$DROPOUT"
	run "124M (12x768, B4 T64)$tag" 12 768 12 4 64 $d
	run "small (6x384, B8 T128)$tag" 6 384 6 8 128 $d
done
echo "(bf16 rows: the last column is against the bf16 GEMM rate)"
[ -s "$W/need" ] && awk '{ printf "fp32: 2x torch on 124M needs %.1f GFLOP/s, %.0f%% of the measured sgemm rate\n", $1, $2 }' "$W/need"
