#!/bin/sh
# gpt-logparse(1): the EXAMPLES run as written, and the options match --help.
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse
MAN=$GPT_ROOT/man/man1/gpt-logparse.1

test_expect_success 'sample logs for the examples' '
	mkdir log &&
	cp "$D/gptkit.log" log/workerlog.0 &&
	cp "$D/fleetx.log" log/workerlog.1 &&
	cp "$D/fleetx-color.log" train.log &&
	gzip -c train.log >train.log.gz &&
	cp "$D/llmc.log" other.log
'

test_expect_success 'the EXAMPLES section has commands' '
	sed -n "/^\.SH EXAMPLES/,/^\.SH /p" "$MAN" |
		sed -n "/^\.EX/,/^\.EE/p" | grep -v "^\.E[XE]" >examples &&
	test_line_count -ge 5 examples
'

test_expect_success 'every example runs and prints something' '
	while read -r cmd; do
		echo "\$ $cmd"
		rm -f curves.svg
		sh -e -c "$cmd" >out 2>err || { cat err; exit 1; }
		test -s out || test -s curves.svg || { echo "no output: $cmd"; exit 1; }
	done <examples
'

test_expect_success 'the piped summary example prints the median tokens/s' '
	sh -c "cat train.log | gpt-logparse --summary --format csv | cut -d, -f7" >out 2>/dev/null &&
	printf "tokens_per_s_median\n867\n" >expect && test_cmp expect out
'

test_expect_success 'every --help option is in OPTIONS and the other way round' '
	gpt-logparse --help | grep -o -e "--[a-z-]*" | sort -u >help-opts &&
	sed -n "/^\.SH OPTIONS/,/^\.SH /p" "$MAN" | grep "^\.B" |
		grep -o -e "\\\\-\\\\-[a-z\\\\-]*" | sed "s/\\\\//g" | sort -u >man-opts &&
	test_cmp help-opts man-opts
'

test_done
