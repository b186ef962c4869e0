#!/bin/sh
# Quantization-aware training against post-training quantization, on the CPU:
# a byte-level GPT (configs/tiny_cpu_bytes.yaml: 2 layers, hidden 64,
# sequence 64) is trained on the licence texts of /usr/share/common-licenses
# except MPL-2.0 and Apache-2.0, whose first 6000 bytes each are the held-out
# text; then
#   fp32          the trained model
#   PTQ W8        gpt-export --dtype int8 of it: weights per row, fp32 inputs
#   PTQ W8A8      its scales calibrated without learning (QAT with lr 0 for
#                 CAL steps: moving-average input scales, weights unchanged)
#   fp32 +N       the same model trained N more steps without quantization
#   QAT W8A8      N steps of quantization-aware fine-tuning, exported int8
#   + PACT        the same with PACT clips on the inputs (W8A8, the seed
#                 345M QAT config's setting) or on inputs and weights (W4A8),
#                 learning rate x 1000 as PaddleSlim; the clips start at
#                 PACT_INIT (4, near this model's input range: PaddleSlim's
#                 100 clips nothing here in 150 steps, and then PACT is the
#                 identity)
# and the same at 4-bit weights (W4A8), where rounding costs more. Each is the
# perplexity gpt-infer --ppl gives on the held-out text. The check: QAT W8A8
# within 2% of fp32.
#
#   sh bench/qat.sh            (STEPS, QAT_STEPS, CAL environment overrides)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-400}
QAT_STEPS=${QAT_STEPS:-150}
CAL=${CAL:-20}
PACT_INIT=${PACT_INIT:-4}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
B=$ROOT/bin

mkdir "$W/text"
for f in /usr/share/common-licenses/*; do
	case $(basename "$f") in MPL-2.0|Apache-2.0) head -c 6000 "$f" >>"$W/held.txt" ;; *) cp "$f" "$W/text/" ;; esac
done
"$B/gpt-preprocess" -t bytes -o "$W/lic" "$W"/text/* >/dev/null 2>"$W/pre.err" || { cat "$W/pre.err"; exit 1; }

cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu_bytes.yaml
Global: {global_batch_size: 8, micro_batch_size: 8}
Engine: {max_steps: $STEPS, logging_freq: 50, eval_freq: 0, test_iters: 0,
         save_load: {save_steps: 0, output_dir: $W/base}}
Data:
  Train: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 64}}
  Eval: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 64}}
Optimizer: {lr: {max_lr: 2.0e-3, min_lr: 2.0e-4, decay_steps: $STEPS, warmup_rate: 0.02}}
EOC

run () { # log output_dir max_steps -o ...
	log=$1 out=$2 steps=$3
	shift 3
	"$B/gpt-train" -c "$W/c.yaml" -o Engine.max_steps="$steps" -o Engine.save_load.save_steps="$steps" \
		-o Engine.save_load.output_dir="$W/$out" "$@" >"$W/$log" 2>&1 ||
		{ tail -n 5 "$W/$log"; exit 1; }
}
export_ () { # out checkpoint [--dtype int8]
	out=$1 ck=$2
	shift 2
	"$B/gpt-export" "$@" -o "$W/$out" "$W/$ck" 2>"$W/export.err" || { cat "$W/export.err"; exit 1; }
}
ppl () { # model
	"$B/gpt-infer" -m "$1" --ppl "$W/held.txt" | sed -n 's/^perplexity: \([0-9.]*\),.*/\1/p'
}
qat () { # log out steps -o ...
	log=$1 out=$2 steps=$3
	shift 3
	run "$log" "$out" "$steps" -o Engine.save_load.ckpt_dir="$W/base" -o Quantization.enable=True "$@"
}

t0=$(date +%s)
run base.log base "$STEPS"
END=$((STEPS + QAT_STEPS))
run more.log more "$END" -o Engine.save_load.ckpt_dir="$W/base"
for bits in 8 4; do
	qat cal$bits.log cal$bits $((STEPS + CAL)) -o Quantization.weight_bits=$bits \
		-o Optimizer.lr.max_lr=0 -o Optimizer.lr.min_lr=0
	qat qat$bits.log qat$bits "$END" -o Quantization.weight_bits=$bits
	pact="-o Quantization.activation_preprocess_type=PACT -o Quantization.pact_init_value=$PACT_INIT"
	[ "$bits" = 4 ] && pact="$pact -o Quantization.weight_preprocess_type=PACT"
	# shellcheck disable=SC2086
	qat pact$bits.log pact$bits "$END" -o Quantization.weight_bits=$bits $pact
	export_ cal$bits.tar cal$bits --dtype int8
	export_ qat$bits.tar qat$bits --dtype int8
	export_ pact$bits.tar pact$bits --dtype int8
done
export_ fp32.tar base
export_ ptq8.tar base --dtype int8

fp32=$(ppl "$W/fp32.tar")
row () { # label perplexity
	printf "  %-28s %s\n" "$1" "$(echo "$2 $fp32" | awk '{ printf "%9.4f  %+7.2f%%", $1, ($1 / $2 - 1) * 100 }')"
}
echo "held-out perplexity (MPL-2.0 + Apache-2.0, $(wc -c <"$W/held.txt") bytes); model trained $STEPS steps; QAT $QAT_STEPS steps; calibration $CAL steps; PACT from alpha $PACT_INIT"
printf "  %-28s %9s  %8s\n" model perplexity "vs fp32"
row fp32 "$fp32"
row "PTQ W8 (weights only)" "$(ppl "$W/ptq8.tar")"
row "PTQ W8A8 (calibrated)" "$(ppl "$W/cal8.tar")"
row "fp32 +$QAT_STEPS steps" "$(ppl "$W/more")"
q8=$(ppl "$W/qat8.tar")
row "QAT W8A8" "$q8"
row "QAT W8A8 + PACT (inputs)" "$(ppl "$W/pact8.tar")"
row "PTQ W4A8 (calibrated)" "$(ppl "$W/cal4.tar")"
row "QAT W4A8" "$(ppl "$W/qat4.tar")"
row "QAT W4A8 + PACT (both)" "$(ppl "$W/pact4.tar")"
echo "  ($(($(date +%s) - t0)) s, $OMP_NUM_THREADS threads)"
if [ "$(echo "$q8 $fp32" | awk '{ r = $1 / $2; print (r < 1.02 && r > 0.98) }')" = 1 ]; then
	echo "qat: QAT W8A8 is within 2% of fp32"
else
	echo "qat: FAIL: QAT W8A8 $q8 is not within 2% of fp32 $fp32"
	exit 1
fi
