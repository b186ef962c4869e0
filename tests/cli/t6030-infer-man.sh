#!/bin/sh
# gpt-export(1) and gpt-infer(1): the EXAMPLES run as written, and the
# options match --help.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'a checkpoint in output/, a prompt file and a text for the examples' '
	mkdir d &&
	for i in $(seq 40); do printf "Everyone is permitted to copy and distribute verbatim copies. "; done >d/doc.txt &&
	gpt-preprocess -t bytes -o d/s d/doc.txt d/doc.txt d/doc.txt d/doc.txt 2>/dev/null &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=3,1,0 -o Data.Eval.dataset.split=3,1,0 \
		-o Engine.max_steps=10 -o Engine.save_load.save_steps=10 -o Engine.eval_freq=0 \
		>train.log 2>&1 &&
	test -f output/latest &&
	printf "Everyone\nverbatim\n" >prompts.txt &&
	cp d/doc.txt text.txt
'

for page in gpt-export gpt-infer; do
	test_expect_success "$page(1): every example runs and prints something" '
		sed -n "/^\.SH EXAMPLES/,/^\.SH /p" "$GPT_ROOT/man/man1/'$page'.1" |
			sed -n "/^\.EX/,/^\.EE/p" | grep -v "^\.E[XE]" >examples &&
		test_line_count -ge 4 examples &&
		while read -r cmd; do
			echo "\$ $cmd"
			sh -e -c "$cmd" >out 2>err </dev/null || { cat err; exit 1; }
			test -s out || test -s err || { echo "no output: $cmd"; exit 1; }
		done <examples
	'

	test_expect_success "$page(1): every --help option is in OPTIONS and the other way round" '
		'$page' --help | grep -o -e "--[a-z-]*" | sort -u >help-opts &&
		sed -n "/^\.SH OPTIONS/,/^\.SH /p" "$GPT_ROOT/man/man1/'$page'.1" | grep "^\.B" |
			grep -o -e "\\\\-\\\\-[a-z\\\\-]*" | sed "s/\\\\//g" | sort -u >man-opts &&
		test_cmp help-opts man-opts
	'
done

test_done
