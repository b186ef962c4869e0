#!/bin/sh
# Checkpoint throughput on CPU ranks: the GPT-2 124M state (fp32 weights and
# the two AdamW moments, about 1.5 GB) saved and loaded by 1, 2 and 4 ranks
# (ZeRO sharding: each rank writes and reads its shard), blocking and in
# the background (async_save: the time training waits is the copy to host
# memory), next to the disk's sequential write rate measured in the same
# run with dd (1.5 GB, fdatasync). MB/s are 10^6 bytes per second of the
# checkpoint's size over the time the log reports: from the start of the
# save to the checkpoint's publication (fsynced, renamed, `latest`
# replaced), and for a load from opening (which checks every file's xxh3)
# to the last rank's state in place. Loads read through the page cache the
# save just filled unless GPT_BENCH_DROP_CACHES=1 (root) drops it first.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
W=${GPT_BENCH_DIR:-$(mktemp -d "${TMPDIR:-/var/tmp}/gptkit-ckpt.XXXXXX")}
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1
mkdir -p "$W/data"
bin/gpt-preprocess -t bytes -o "$W/data/lic" /usr/share/common-licenses/* >/dev/null 2>&1

drop () {
	sync
	[ "${GPT_BENCH_DROP_CACHES:-0}" = 1 ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
	return 0
}

drop
dd_rate=$(dd if=/dev/zero of="$W/dd" bs=1M count=1500 conv=fdatasync 2>&1 |
	sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p' | awk '{ printf "%.0f", 1500 * 1048576 / $1 / 1e6 }')
rm -f "$W/dd"
echo "disk sequential write (dd 1500 MiB, fdatasync): $dd_rate MB/s"
printf '%-30s %12s %10s %10s %12s %10s\n' run "size (MB)" "save s" "save MB/s" "of dd" "load MB/s"

cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu_bytes.yaml
Global: {global_batch_size: 4, micro_batch_size: 1}
Engine: {max_steps: 1, logging_freq: 1, eval_freq: 0, test_iters: 0, save_load: {save_steps: 1}}
Model: {vocab_size: 50257, hidden_size: 768, num_layers: 12, num_attention_heads: 12, ffn_hidden_size: 3072, max_position_embeddings: 1024}
Data:
  Train: {dataset: {input_dir: $W/data/lic, split: '1', max_seq_len: 64}}
  Eval: {dataset: {input_dir: $W/data/lic, split: '1', max_seq_len: 64}}
EOC

# run NAME NPROC [flags]: train one step and save, then load it again
run () {
	name=$1 n=$2
	shift 2
	rm -rf "$W/out" "$W/log" "$W/log2"
	bin/gpt-launch --nproc-per-node "$n" --log-dir "$W/log" -- bin/gpt-train -c "$W/c.yaml" \
		-o Engine.save_load.output_dir="$W/out" "$@" >/dev/null 2>&1 || { echo "$name: save failed"; cat "$W/log/workerlog.0"; return; }
	line=$(grep "\[checkpoint\] global step 1," "$W/log/workerlog.0")
	size=$(echo "$line" | sed -n 's/.*size: \([0-9]*\) bytes.*/\1/p')
	cost=$(echo "$line" | sed -n 's/.*cost: \([0-9.]*\) sec.*/\1/p')
	wait_s=$(sed -n 's/.*state copied to host memory in \([0-9.]*\) s.*/\1/p' "$W/log/workerlog.0")
	drop
	bin/gpt-launch --nproc-per-node "$n" --log-dir "$W/log2" -- bin/gpt-train -c "$W/c.yaml" \
		-o Engine.save_load.output_dir="$W/out" -o Engine.max_steps=1 "$@" >/dev/null 2>&1
	load=$(cat "$W/log2"/workerlog.* | sed -n 's/.*resumed from .* in \([0-9.]*\) s$/\1/p' | sort -g | tail -n 1)
	awk -v name="$name" -v size="$size" -v cost="$cost" -v dd="$dd_rate" -v load="${load:-0}" -v w="${wait_s:-}" 'BEGIN {
		mb = size / 1e6; rate = mb / cost
		printf "%-30s %12.1f %10.3f %10.0f %11.0f%% %10.0f\n", name, mb, cost, rate, 100 * rate / dd, (load > 0 ? mb / load : 0)
		if (w != "") printf "%-30s training waited %.3f s for the copy (%.0f MB/s)\n", "", w, mb / w
	}'
}

run "1 rank" 1
run "4 ranks, sharding 4" 4 --sharding_parallel_degree 4 --sharding stage1
run "4 ranks, dp 4 (rank 0 writes)" 4 -o Distributed.dp_degree=4
run "1 rank, async_save" 1 -o Engine.save_load.async_save=True
run "4 ranks, sharding 4, async" 4 --sharding_parallel_degree 4 --sharding stage1 -o Engine.save_load.async_save=True
