#!/bin/sh
# lib/cuda under NVIDIA's compute-sanitizer: a tiny model trained two steps
# on the GPU (every training kernel: embedding, LayerNorm, GEMMs, attention,
# GELU, the classifier, AdamW, casts, norms; fp32, bf16, and fp16 with loss
# scaling), ZeRO-Offload's transfers, and gpt-infer --device cuda
# generating from the checkpoint, each under memcheck (out-of-bounds and
# misaligned accesses, leaks), racecheck (shared-memory hazards) and
# synccheck (barriers in divergent code). Every report must be clean. Skips
# without a GPU or without compute-sanitizer (CUDA toolkit's
# compute-sanitizer/ or bin/, or PATH), where the tool refuses the GPU (a
# gVisor runtime), and under the CPU emulation.
. "$(dirname "$0")/../cli/test-lib.sh"

CS=
for c in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
	if command -v "$c" >/dev/null 2>&1; then
		CS=$(command -v "$c")
		break
	fi
done
if [ -n "${GPT_EMU_BIN:-}" ] || ! test_have_prereq GPU || [ -z "$CS" ]; then
	echo "1..0 # SKIP needs a GPU and compute-sanitizer (not under the CPU emulation)"
	cd / && rm -rf "$GPT_TRASH"
	exit 0
fi

FLAGS="-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml -o Global.device=gpu
	-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic
	-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0
	-o Model.hidden_size=64 -o Model.num_attention_heads=2 -o Model.max_position_embeddings=32
	-o Data.Train.dataset.max_seq_len=32 -o Data.Eval.dataset.max_seq_len=32
	-o Global.global_batch_size=2 -o Global.micro_batch_size=2
	-o Engine.eval_freq=2 -o Engine.eval_iters=1 -o Engine.test_iters=0 -o Engine.max_steps=2
	-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1"

# tool log command...: runs the command under the tool; the report must be clean
sanitize () {
	tool=$1 log=$2
	shift 2
	"$CS" --tool "$tool" --error-exitcode 97 --print-limit 20 "$@" >"$log" 2>&1 ||
		{ tail -n 40 "$log"; return 1; }
	grep "ERROR SUMMARY: 0 errors" "$log" >/dev/null ||
		grep "RACECHECK SUMMARY: 0 hazards" "$log" >/dev/null ||
		{ tail -n 40 "$log"; return 1; }
}

mkdir data && gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* >/dev/null 2>&1 || {
	echo "Bail out! gpt-preprocess failed"
	exit 1
}

# Some GPU runtimes (gVisor) refuse the tool ("Device not supported", then
# error 999 at the first allocation): one training step under memcheck
# first, and no tests where the tool cannot run at all.
"$CS" --tool memcheck gpt-train $FLAGS -o Engine.max_steps=1 -o Engine.eval_freq=0 \
	-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=out-probe >probe.log 2>&1 ||
	if grep -i "not supported\|failed to initialize" probe.log >/dev/null; then
		echo "1..0 # SKIP compute-sanitizer cannot check this GPU here: $(grep -i -m 1 "not supported\|failed to initialize" probe.log)"
		cd / && rm -rf "$GPT_TRASH"
		exit 0
	fi

for prec in fp32 bf16 fp16; do
	case $prec in
	fp32) MP= ;;
	bf16) MP="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 -o Engine.mix_precision.level=O2" ;;
	fp16) MP="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16 -o Engine.mix_precision.level=O2" ;;
	esac
	for tool in memcheck racecheck synccheck; do
		extra=
		[ $tool = memcheck ] && extra="--leak-check full"
		test_expect_success "$prec training: $tool is clean" '
			sanitize '$tool' '$prec-$tool'.log '"$extra"' \
				gpt-train $FLAGS '"$MP"' -o Engine.save_load.save_steps=2 \
				-o Engine.save_load.output_dir=out-'$prec'-'$tool'
		'
	done
done

test_expect_success 'optimizer offload (bf16): memcheck is clean' '
	sanitize memcheck offload.log --leak-check full gpt-train $FLAGS \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
		-o Engine.mix_precision.level=O2 -o Distributed.sharding.sharding_offload=True \
		-o Engine.save_load.save_steps=0
'

for tool in memcheck racecheck synccheck; do
	test_expect_success "gpt-infer --device cuda: $tool is clean" '
		sanitize '$tool' infer-'$tool'.log gpt-infer -m out-fp32-memcheck --device cuda \
			-o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=8 \
			"GNU General" "Permission is"
	'
done

test_done
