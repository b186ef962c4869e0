#!/bin/sh
# gpt-logparse inputs: compressed files, directories, missing files, and bad
# input (binary garbage, truncated lines, empty files, a 1 GB line).
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse

test_expect_success 'a .gz log reads like the plain one, from a file and from stdin' '
	gpt-logparse "$D/gptkit.log" | cut -f 2- >plain &&
	gzip -c "$D/gptkit.log" >run.log.gz &&
	gpt-logparse run.log.gz | cut -f 2- >gz &&
	test_cmp plain gz &&
	gpt-logparse <run.log.gz | cut -f 2- >gz-stdin &&
	test_cmp plain gz-stdin
'

test_expect_success 'xz and zstd logs are recognised by their magic bytes' '
	for z in xz zstd; do
		command -v $z >/dev/null || continue
		$z -c "$D/gptkit.log" >run.$z &&
		gpt-logparse run.$z | cut -f 2- >out &&
		test_cmp plain out || exit 1
	done
'

test_expect_success 'a corrupt .gz file is a data error that names it' '
	head -c 200 run.log.gz >bad.gz &&
	printf "\037\213garbage" >>bad.gz &&
	test_expect_code 65 gpt-logparse bad.gz >/dev/null 2>err &&
	test_grep "^gpt-logparse: error: bad.gz: " err
'

test_expect_success 'a missing log is exit 66 with the name' '
	test_expect_code 66 gpt-logparse nonexistent.log 2>err &&
	test_grep "^gpt-logparse: error: nonexistent.log: cannot open the log: " err
'

test_expect_success 'a directory without workerlog files is exit 66' '
	mkdir empty-dir &&
	test_expect_code 66 gpt-logparse empty-dir 2>err &&
	test_grep "empty-dir: no workerlog.\* files in the directory" err
'

test_expect_success 'rank comes from workerlog.N, also compressed' '
	mkdir log &&
	cp "$D/fleetx.log" log/workerlog.0 &&
	gzip -c "$D/fleetx-1card.log" >log/workerlog.3.gz &&
	gpt-logparse log/ >out 2>/dev/null &&
	cut -f 2 out | sort | uniq -c | awk "{print \$2 \":\" \$1}" | tr "\n" " " >actual &&
	printf "0:9 3:9 rank:1 " >expect && test_cmp expect actual &&
	cut -f 1 out | sed -n 2p >actual && echo log/workerlog.0 >expect && test_cmp expect actual
'

test_expect_success 'binary garbage, truncated lines, empty files: no crash, counts' '
	head -c 300000 /dev/urandom >garbage.bin &&
	: >empty.log &&
	{
		sed -n 2,4p "$D/fleetx.log"
		printf "[2022-07-27 12:40:01,298] [    INFO] - global step 5, epoch: 0, bat\n"
		printf "\000\001\002 global step 6, loss: \377\n"
		sed -n 5p "$D/fleetx.log" | cut -c 1-150
		printf "[2022-07-27 12:40:01,402] [    INFO] - global step 7, epoch: 0, batch: 6, loss: 11.04"
	} >truncated.log &&
	gpt-logparse garbage.bin empty.log truncated.log >out 2>err &&
	cut -f 1,3,4 out | grep truncated >actual &&
	cat >expect <<-\EOT &&
	truncated.log	1	11.083364487
	truncated.log	2	11.054802895
	truncated.log	3	11.082803726
	truncated.log	4	11.070495605
	truncated.log	7	11.04
	EOT
	test_cmp expect actual &&
	test_grep "^gpt-logparse: [0-9]+ lines skipped: no step, eval or checkpoint record \(other output or an unknown format\)$" err
'

# Two processes on one log (tee, srun or mpirun output, a block-buffered
# Python stdout): a line that one writer left unfinished runs into the
# other's, and its end comes later as a line of its own.
test_expect_success 'a record that another writer ran into is skipped and counted, not mixed into a row' '
	cut_at () { printf "%s" "$(sed -n "$2p" "$1" | cut -c "1-$3")"; } &&
	rest_at () { sed -n "$2p" "$1" | cut -c "$(($3 + 1))-"; } &&
	{
		sed -n 2p "$D/gptkit.log"
		cut_at "$D/gptkit.log" 3 90; sed -n 4p "$D/gptkit.log"
		rest_at "$D/gptkit.log" 3 90
		cut_at "$D/gptkit.log" 6 143; echo "/usr/lib/python3/warnings.py:109: UserWarning: a warning on stderr"
		cut_at "$D/megatron.log" 3 120; sed -n 4p "$D/megatron.log"
		cut_at "$D/paddlenlp.log" 3 70; sed -n 4p "$D/paddlenlp.log"
		grep "^step" "$D/llmc.log" | sed -n 1p | cut -c 1-30 | tr -d "\n"; grep "^step" "$D/llmc.log" | sed -n 2p
		sed -n 7p "$D/gptkit.log"
	} >mixed.log &&
	gpt-logparse mixed.log >out 2>err &&
	cut -f 3,4 out >actual &&
	cat >expect <<-\EOT &&
	step	loss
	1	11.083364487
	5	10.586440086
	EOT
	test_cmp expect actual &&
	test_grep "^gpt-logparse: 5 lines skipped: a record that other output ran into" err &&
	test_grep "^gpt-logparse: 1 line skipped: no step, eval or checkpoint record \(other output or an unknown format\)$" err &&
	gpt-logparse --summary mixed.log >sum 2>/dev/null &&
	awk -F "\t" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next }
		{ print \$c[\"steps\"], \$c[\"unparsed\"] }" sum >actual &&
	echo "2 5" >expect && test_cmp expect actual &&
	gpt-logparse --summary "$D/gptkit.log" | cut -f 26 >actual &&
	printf "unparsed\n0\n" >expect && test_cmp expect actual
'

test_expect_success 'long lines are skipped and counted, the next line still parses' '
	{
		sed -n 2p "$D/fleetx.log"
		head -c 3000000 /dev/zero | tr "\0" a; echo
		sed -n 3p "$D/fleetx.log"
		head -c 1048577 /dev/zero | tr "\0" b
	} >long.log &&
	gpt-logparse long.log >out 2>err &&
	test_line_count = 3 out &&
	test_grep "^gpt-logparse: 2 lines skipped: longer than 1 MiB$" err
'

# The bound is on the resident set (peak RSS from /usr/bin/time), not on
# address space: the programs map the CUDA libraries, and ASan reserves
# terabytes, so ulimit -v says nothing useful here. ASan's own bookkeeping
# needs a few hundred MB more; a buffered line would need over 1000 MB.
bound=300000
grep -q sanitize "$GPT_ROOT/build/FLAGS" 2>/dev/null && bound=700000
test_expect_success 'a 1 GB line on stdin streams past in bounded memory' '
	{
		sed -n 2p "$D/fleetx.log"
		head -c 1000000000 /dev/zero | tr "\0" a; echo
		sed -n 3p "$D/fleetx.log"
	} | /usr/bin/time -f "%M" -o rss gpt-logparse >out 2>err &&
	test_line_count = 3 out &&
	test_grep "^gpt-logparse: 1 line skipped: longer than 1 MiB$" err &&
	echo "peak RSS $(cat rss) KB" &&
	test "$(cat rss)" -lt $bound
'

test_expect_success 'a full disk under the rows, the summary or --follow: exit 74, standard output named' '
	test_expect_code 74 gpt-logparse "$D/gptkit.log" >/dev/full 2>err &&
	test_grep "^gpt-logparse: error: standard output: No space left on device$" err &&
	test_expect_code 74 gpt-logparse --summary "$D/gptkit.log" >/dev/full 2>err &&
	test_grep "^gpt-logparse: error: standard output: No space left on device$" err &&
	test_expect_code 74 timeout 20 gpt-logparse --follow "$D/gptkit.log" >/dev/full 2>err &&
	test_grep "^gpt-logparse: error: standard output: No space left on device$" err
'

test_done
