#!/bin/sh
# Counts the host syncs of each training step: an emulated gpt-train (see
# run.sh) with EMU_HOST_SYNCS=1, whose emulated runtime says on stderr each
# call that blocks the host while device work is queued
# (cudaStreamSynchronize, cudaEventSynchronize, cudaMemcpyAsync into
# pageable host memory, cudaMemcpy, cudaDeviceSynchronize, cudaFree,
# cudaFreeHost): on a GPU each such call stalls the pipeline, the host
# queueing nothing until the device has caught up. A tiny model over bytes
# (2 layers, hidden 32, 16 positions, the batch of 2 in one micro-batch)
# trains 3 steps in pure bf16, one step line each; the syncs between step
# line N - 1 and step line N are step N's. Prints, for steps 2 and 3 (step 1
# also sets things up), each sync with where it is called from (addr2line
# on the emulated program), then a line "step N: K host syncs".
#
#   tests/gpu/emu/syncs.sh [-o KEY=VALUE ...]   other gpt-train options
#       (e.g. -o Engine.mix_precision.dtype=float16, or
#       -o Global.micro_batch_size=1 for two micro-batches a step)
#   SYNCS_BRIEF=1 tests/gpu/emu/syncs.sh ...    the step lines only
#
# Needs the CUDA build (`make CUDA=1`: the emulator links its objects) and
# bin/gpt-preprocess; writes into a temporary directory it removes.
set -eu
cd "$(dirname "$0")/../../.."
ROOT=$PWD
tests/gpu/emu/build.sh gpt-train >/dev/null
EXE=$ROOT/build/emu/gpt-train
W=$(mktemp -d "${TMPDIR:-/tmp}/gptkit-syncs.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$ROOT/bin/gpt-preprocess" -t bytes -o "$W/lic" /usr/share/common-licenses/* >/dev/null 2>&1
EMU_HOST_SYNCS=1 "$EXE" -c "$ROOT/configs/tiny_cpu_bytes.yaml" -o Global.device=gpu \
	-o Data.Train.dataset.input_dir="$W/lic" -o Data.Eval.dataset.input_dir="$W/lic" \
	-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
	-o Model.hidden_size=32 -o Model.num_attention_heads=2 -o Model.max_position_embeddings=16 \
	-o Data.Train.dataset.max_seq_len=16 -o Data.Eval.dataset.max_seq_len=16 \
	-o Global.global_batch_size=2 -o Global.micro_batch_size=2 -o Engine.eval_freq=0 \
	-o Engine.test_iters=0 -o Engine.max_steps=3 -o Engine.logging_freq=1 \
	-o Engine.save_load.save_steps=0 -o Engine.save_load.save_epoch=0 \
	-o Engine.save_load.output_dir="$W/out" -o Engine.mix_precision.use_pure_fp16=True \
	-o Engine.mix_precision.dtype=bfloat16 "$@" >"$W/log" 2>&1 || { cat "$W/log" >&2; exit 1; }
# the syncs of steps 2 and 3, each "STEP CALL OFFSETS..."
awk '/ global step [0-9]+,/ { s = $0; sub(/.* global step /, "", s); sub(/,.*/, "", s); step = s + 1; next }
	step >= 2 && step <= 3 && /^emu: host sync: / { sub(/^emu: host sync: /, ""); print step, $0 }' \
	"$W/log" >"$W/syncs"
if [ -z "${SYNCS_BRIEF:-}" ] && [ -s "$W/syncs" ]; then
	# each return address less one (the call) named as addr2line -i names
	# it, the functions inlined there first, the emulated runtime's left out
	tr ' ' '\n' <"$W/syncs" | grep '^+0x' | sort -u >"$W/addrs"
	while read -r a; do printf '%#x\n' $((${a#+} - 1)); done <"$W/addrs" |
		addr2line -a -f -i -C -s -e "$EXE" >"$W/lines"
	awk 'NR == FNR { a[NR] = $1; next }
		/^0x/ { if (n) print a[n], names; n++; names = ""; fn = 1; next }
		fn { f = $0; sub(/\(.*/, "", f); fn = 0; next }
		{ fn = 1; sub(/ \(discriminator.*/, ""); if ($1 ~ /^cuda_runtime\.h:/) next
		  names = names (names == "" ? "" : "<") f "@" $1 }
		END { if (n) print a[n], names }' "$W/addrs" "$W/lines" >"$W/map"
	# each sync: step, call, then its callers up to train_step
	awk 'NR == FNR { name[$1] = $2; next }
		{ line = "step " $1 ":"; i = 2
		  while ($i != "at") { line = line " " $i; i++ }
		  line = line " at"
		  for (i++; i <= NF; i++) {
			n = name[$i]; gsub(/</, " < ", n); if (n == "") continue
			line = line (i > 0 && line !~ / at$/ ? " < " : " ") n
			if (n ~ /^train_step@/) break
		  }
		  print line }' "$W/map" "$W/syncs" |
		sed -E 's/@([a-z_]+)\.cpp:/@\1.cu:/g; s/@emu\.cu:/@emu.cpp:/g' # build.sh's copies of lib/cuda
fi
for s in 2 3; do
	echo "step $s: $(awk -v s=$s '$1 == s' "$W/syncs" | wc -l) host syncs"
done
