#!/bin/sh
# --print-config prints YAML that loads back to the same configuration; the
# other entry points of gpt-train that exist so far (--help, --version,
# --list-keys, training not available yet) and the documentation of every key.
. "$(dirname "$0")/test-lib.sh"

C=$GPT_ROOT/configs

test_expect_success 'print, load the printed file, print again: identical (every config)' '
	for f in "$C"/*.yaml; do
		gpt-train -c "$f" --print-config >one.yaml &&
		gpt-train -c one.yaml --print-config >two.yaml &&
		test_cmp one.yaml two.yaml || { echo "differs: $f"; exit 1; }
	done
'

test_expect_success 'round trip with overrides, flags, a world size and awkward strings' '
	gpt-train -c "$C/tiny_cpu.yaml" --world-size 8 --tensor_parallel_degree 2 \
		--sharding "stage3 offload" -o "Engine.save_load.output_dir=out dir/\"q\"\\x" \
		-o Optimizer.lr.max_lr=0.000123456789 -o "Engine.fault_inject.spike_steps=[1, 5]" \
		-o "Engine.mix_precision.custom_black_list=[a b, c]" --print-config >one.yaml &&
	gpt-train -c one.yaml --print-config >two.yaml &&
	test_cmp one.yaml two.yaml &&
	grep -F "output_dir: \"out dir/\\\"q\\\"\\\\x\"" one.yaml &&
	grep -F "max_lr: 0.000123456789" one.yaml &&
	grep -F "custom_black_list: [\"a b\", \"c\"]" one.yaml &&
	grep -F "spike_steps: [1, 5]" two.yaml &&
	grep -E "^    sharding_degree: 4$" two.yaml
'

test_expect_success 'the printed file keeps its meaning under a world size from the environment' '
	GPT_WORLD_SIZE=4 gpt-train -c "$C/tiny_cpu.yaml" --print-config >one.yaml &&
	gpt-train -c one.yaml --print-config >two.yaml &&
	GPT_WORLD_SIZE=4 gpt-train -c one.yaml --print-config >three.yaml &&
	test_cmp one.yaml two.yaml && test_cmp one.yaml three.yaml
'

test_expect_success 'every section and key appears in the printed file' '
	gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
	for s in Global Engine Model Data Optimizer Distributed Generation Inference Quantization; do
		grep -E "^$s:$" out >/dev/null || { echo "no section $s"; exit 1; }
	done &&
	n=$(gpt-train --list-keys | wc -l) &&
	k=$(grep -cE "^ +[a-z_0-9]+: [^ ]" out) &&
	test "$n" = "$k" &&
	test_expect_code 74 gpt-train --list-keys >/dev/full 2>err &&
	test_grep "^gpt-train: error: standard output: No space left on device$" err &&
	test_expect_code 74 gpt-train -c "$C/tiny_cpu.yaml" --print-config >/dev/full 2>err &&
	test_grep "^gpt-train: error: standard output: writing the configuration: No space left on device$" err &&
	test_expect_code 74 gpt-train -c "$C/tiny_cpu.yaml" --dry-run >/dev/full 2>err &&
	test_grep "^gpt-train: error: standard output: writing the dry-run report: No space left on device$" err
'

test_expect_success 'plain training without the dataset names it (66)' '
	test_expect_code 66 gpt-train -c "$C/tiny_cpu.yaml" >out 2>err &&
	test_grep "^gpt-train: error: Data.Train.dataset.input_dir: .*data/tiny" err &&
	printf "Model:\n  num_layer: 2\n" >bad.yaml &&
	test_expect_code 65 gpt-train -c bad.yaml 2>err &&
	test_grep "did you mean Model.num_layers" err
'

test_expect_success '--help and --version' '
	gpt-train --help >out &&
	test_grep "^usage: gpt-train -c FILE" out &&
	test_grep "--print-config" out && test_grep "--dry-run" out &&
	gpt-train --version >out &&
	test_grep "^gpt-train \(gptkit\) [0-9]" out &&
	test_grep "^cpu" out
'

test_expect_success 'every option of --help is in gpt-train(1)' '
	gpt-train --help | sed -n "s/^ *\(-., \)\{0,1\}--\([a-z_-]*\).*/\2/p" >opts &&
	test_line_count -gt 10 opts &&
	sed "s/\\\\-/-/g" "$GPT_ROOT/man/man1/gpt-train.1" >man.txt &&
	while read -r o; do
		grep -F -e "--$o" man.txt >/dev/null || { echo "not in gpt-train.1: --$o"; exit 1; }
	done <opts
'

test_expect_success '--world-size: gpt-train(1) names the variables --help names, in order' '
	gpt-train --help | sed -n "s/^ *--world-size N *number of ranks (default: \(.*\), else.*/\1/p" |
		tr -d " " | tr "," "\n" >help-vars &&
	test_line_count -ge 4 help-vars &&
	sed -n "/^\.BI \\\\-\\\\-world\\\\-size/,/^\.TP/p" "$GPT_ROOT/man/man1/gpt-train.1" |
		grep -o "\\\\fB[A-Z_]*\\\\fR" | sed "s/\\\\f[BR]//g" >man-vars &&
	test_cmp help-vars man-vars &&
	for v in $(cat help-vars); do
		env $v=2 gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
		grep -F "# world size 2 " out || { echo "$v is not read"; exit 1; }
	done
'

test_expect_success 'every configuration key is documented in gpt-config(5)' '
	gpt-train --list-keys | cut -f1 >keys &&
	test_line_count -gt 100 keys &&
	while read -r k; do
		grep -F -x -e ".B $k" "$GPT_ROOT/man/man5/gpt-config.5" >/dev/null ||
			{ echo "not in gpt-config.5: $k"; exit 1; }
	done <keys
'

test_expect_success 'gpt-config(5) gives every key the type and default of --list-keys' '
	gpt-train --list-keys | cut -f1-3 >keys &&
	sed -n "/^\.SH KEYS/,\$p" "$GPT_ROOT/man/man5/gpt-config.5" |
		sed -n "/^\.B [A-Z][A-Za-z]*\./{s/^\.B //;N;s/\n/	/;p;}" |
		sed -e "s/\\\\f[BR]//g" -e "s/\\\\-/-/g" >entries &&
	test_line_count = $(wc -l <keys) entries &&
	awk -F"\t" "NR == FNR { t = \$2
		if (t !~ /^(int|float|bool|string|list|int-list|split)\$/) { gsub(/[|]/, \", \", t); t = \"one of \" t }
		want[\$1] = t \"; default \" \$3 \"; seed: \"; next }
		index(\$2, want[\$1]) != 1 { print \$1 \": \" \$2 \" (--list-keys: \" want[\$1] \")\" }" \
		keys entries >bad &&
	if [ -s bad ]; then cat bad; exit 1; fi
'

test_expect_success 'compatibility-only keys are marked so in --list-keys and the man page' '
	gpt-train --list-keys | grep "accepted for compatibility, no effect in gptkit" | cut -f1 >compat &&
	grep -x "Model.type_vocab_size" compat && grep -x "Data.Train.loader.num_workers" compat &&
	while read -r k; do
		sed -n "/^\.B $k\$/,/^\.TP/p" "$GPT_ROOT/man/man5/gpt-config.5" |
			grep -qi "accepted for compatibility, no effect in gptkit" ||
			{ echo "not marked in gpt-config.5: $k"; exit 1; }
	done <compat
'

test_done
