#!/bin/sh
# The pipeline bubble: step time of pp 2 and pp 4 under 1F1B and the
# interleaved schedule (2 virtual stages) against the ideal of a perfect
# pipeline, T1 / p x (m + (p - 1) / v) / m, where T1 is the step time of
# the same model on one rank, m the micro-batches per step, v the virtual
# stages per rank. One thread per rank; with fewer cores than ranks the
# stages share cores and the measured times include that, which the last
# column states.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-8}
M=${M:-8}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bin/gpt-preprocess -t bytes -o "$W/lic" /usr/share/common-licenses/* >/dev/null 2>&1
export OMP_NUM_THREADS=1
cores=$(getconf _NPROCESSORS_ONLN)
cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu_bytes.yaml
Global: {global_batch_size: $M, micro_batch_size: 1}
Engine: {max_steps: $STEPS, logging_freq: 1, eval_freq: 0, save_load: {save_steps: 0, save_epoch: 0}}
Model: {hidden_size: 256, num_layers: 8, num_attention_heads: 4, max_position_embeddings: 128}
Data:
  Train: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 128}}
  Eval: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 128}}
EOC

step_time () { # log: mean avg_batch_cost of the steps after the first two
	sed -n 's/.*global step \([0-9]*\),.*avg_batch_cost: \([0-9.]*\) sec.*/\1 \2/p' "$1" |
		awk '$1 > 2 { s += $2; n++ } END { printf "%.4f", s / n }'
}

bin/gpt-train -c "$W/c.yaml" >"$W/one.log" 2>&1 || { echo "pipeline: the one-rank run failed"; tail -3 "$W/one.log"; exit 1; }
t1=$(step_time "$W/one.log")
echo "model: 8 layers, hidden 256, sequence 128, micro-batch 1, m = $M micro-batches per step; $cores cores"
echo "one rank: $t1 s per step"
printf '%-22s %10s %10s %8s %s\n' layout "step s" "ideal s" "ratio" "note"
for spec in "2 1F1B 1" "2 interleaved 2" "4 1F1B 1" "4 interleaved 2" "2 FThenB 1"; do
	set -- $spec
	p=$1 sched=$2 v=$3
	bin/gpt-launch --nproc-per-node "$p" --log-dir "$W/log" -- bin/gpt-train -c "$W/c.yaml" \
		--pipeline_parallel_degree "$p" -o Distributed.pipeline_schedule="$sched" \
		-o Distributed.virtual_pp_degree="$v" >"$W/pp.log" 2>&1 ||
		{ echo "pipeline: pp $p $sched failed"; tail -3 "$W/pp.log"; continue; }
	t=$(step_time "$W/log/workerlog.0")
	ideal=$(awk -v t1="$t1" -v p="$p" -v m="$M" -v v="$v" 'BEGIN { printf "%.4f", t1 / p * (m + (p - 1) / v) / m }')
	note=""
	[ "$p" -gt "$cores" ] && note="($p ranks on $cores cores)"
	printf '%-22s %10s %10s %8s %s\n' "pp $p $sched v$v" "$t" "$ideal" \
		"$(awk -v a="$t" -v b="$ideal" 'BEGIN { printf "%.2f", a / b }')" "$note"
done
