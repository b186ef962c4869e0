#!/bin/sh
# gpt-logparse --summary: figures checked against a hand count.
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse

# col NAME FILE: the values of column NAME of a TSV with a header, one a line.
col () {
	awk -F '\t' -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
		{ print $c }' "$2"
}

test_expect_success 'gptkit log: default warm-up, quantiles, losses, evals, MFU' '
	gpt-logparse --summary --params 1.3B --peak-tflops 312 "$D/gptkit.log" >out 2>/dev/null &&
	test_line_count = 2 out &&
	test "$(col format out)" = fleetx &&
	test "$(col steps out)" = 10 &&
	test "$(col skipped out)" = 1 &&
	# steps 2..10 per card, sorted: 30765 35612 36274 37240 38145 39289 39511 39693 40355
	test "$(col tokens_per_s_median out)" = 38145 &&
	test "$(col tokens_per_s_p10 out)" = 34642.6 &&
	test "$(col tokens_per_s_p90 out)" = 39825.4 &&
	test "$(col tokens_per_s_total_median out)" = 76289 &&
	test "$(col step_time_median out)" = 0.10738 &&
	test "$(col loss_first out)" = 11.083364487 &&
	test "$(col loss_last out)" = 10.074280167 &&
	test "$(col loss_min out)" = 10.074280167 &&
	test "$(col loss_min_step out)" = 10 &&
	test "$(col evals out)" = 2 &&
	test "$(col eval_loss_last out)" = 9.87654321 &&
	test "$(col eval_losses out)" = "5:10.123456789 10:9.87654321" &&
	test "$(col checkpoints out)" = 1 &&
	test "$(col overflows out)" = 1 &&
	# 38145 x 6 x 1.3e9 / 312e12
	test "$(col mfu out)" = 0.953625
'

test_expect_success '--skip-steps changes only the speed figures' '
	gpt-logparse --summary --skip-steps 0 "$D/gptkit.log" >out0 &&
	test "$(col skipped out0)" = 0 &&
	# all ten: ... 37240 38145 ... median of 10 values = (37240 + 38145) / 2
	test "$(col tokens_per_s_median out0)" = 37692.5 &&
	gpt-logparse --summary --skip-steps 8 "$D/gptkit.log" >out8 &&
	test "$(col tokens_per_s_median out8)" = 39822 &&
	test "$(col loss_first out8)" = 11.083364487 &&
	test "$(col mfu out8)" = ""
'

test_expect_success 'seed FleetX logs: one summary row each, side by side' '
	gpt-logparse --summary "$D/fleetx.log" "$D/fleetx-1card.log" "$D/fleetx-color.log" >out 2>/dev/null &&
	test_line_count = 4 out &&
	col tokens_per_s_median out >actual &&
	printf "9423\n16501.5\n867\n" >expect &&
	test_cmp expect actual &&
	col loss_min out >actual &&
	printf "11.046300888\n11.025435448\n11.620714188\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'PaddleNLP, Megatron-LM and llm.c summaries' '
	gpt-logparse --summary --skip-steps 1 "$D/paddlenlp.log" "$D/megatron.log" "$D/llmc.log" >out 2>/dev/null &&
	col format out >actual &&
	printf "paddlenlp\nmegatron\nllm.c\n" >expect && test_cmp expect actual &&
	col step_time_median out >actual &&
	printf "0.8\n2.05\n0.33652\n" >expect && test_cmp expect actual &&
	col tokens_per_s_total_median out >actual &&
	printf "\n\n1557977\n" >expect && test_cmp expect actual &&
	col eval_losses out >actual &&
	printf "30:8.5\n4:9.4\n0:11.009589 4:7.151734\n" >expect && test_cmp expect actual
'

test_expect_success 'loss-scale overflows that step lines report count: MindFormers, Megatron-LM' '
	cat >mf.log <<-\EOF &&
	2024-03-01 10:00:00,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  1/  2], step:[    1/  125], loss: 10.789, per_step_time: 35312ms, lr: 0.0, overflow cond: True, loss_scale: 4294967296.0, global_norm: [13.345]
	2024-03-01 10:00:01,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  1/  2], step:[    2/  125], loss:[10.700/10.744], per_step_time: 512ms, lr: [1e-06], overflow cond: True, loss_scale: 2147483648.0, global_norm: [inf]
	2024-03-01 10:00:02,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  1/  2], step:[    3/  125], loss: 10.600, per_step_time: 512ms, lr: 2e-06, overflow cond: False, loss_scale: 1073741824.0, global_norm: [9.1]
	EOF
	sed -e "2s/skipped iterations:   0/skipped iterations:   3/" "$D/megatron.log" >mg.log &&
	gpt-logparse --summary mf.log mg.log "$D/megatron.log" >out 2>/dev/null &&
	col overflows out >actual &&
	printf "2\n3\n0\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'steps whose loss is nan or inf are counted, not taken into the loss figures' '
	sed -n 2,4p "$D/gptkit.log" >nan.log &&
	sed -n 4p "$D/gptkit.log" | sed "s/step 3,/step 4,/; s/loss: [0-9.]*/loss: nan/" >>nan.log &&
	sed -n 4p "$D/gptkit.log" | sed "s/step 3,/step 5,/; s/loss: [0-9.]*/loss: inf/" >>nan.log &&
	gpt-logparse --summary nan.log >out &&
	test "$(col steps out)" = 5 &&
	test "$(col loss_nonfinite out)" = 2 &&
	test "$(col loss_first out)" = 11.083364487 &&
	test "$(col loss_last out)" = 10.782803726 &&
	test "$(col loss_min out)" = 10.782803726 &&
	gpt-logparse --summary "$D/gptkit.log" >out &&
	test "$(col loss_nonfinite out)" = 0 &&
	gpt-logparse --summary --format json nan.log | grep -q "\"loss_nonfinite\":2[,}]"
'

test_expect_success 'Megatron-LM: the evaluations after training are the validation split.s; the test split.s are skipped' '
	sed -n 2,7p "$D/megatron.log" | grep -v "^---" >mg.log &&
	cat >>mg.log <<-\EOF &&
	 validation loss at iteration 4 on validation set | lm loss value: 9.300000E+00 | lm loss PPL: 1.095633E+04 | 
	 validation loss at iteration 4 on test set | lm loss value: 9.700000E+00 | lm loss PPL: 1.633727E+04 | 
	 validation loss at the end of training for val data | lm loss value: 9.200000E+00 | lm loss PPL: 9.897129E+03 | 
	 validation loss at the end of training for test data | lm loss value: 9.800000E+00 | lm loss PPL: 1.803988E+04 | 
	EOF
	gpt-logparse --summary mg.log >out 2>err &&
	test "$(col evals out)" = 3 &&
	test "$(col eval_loss_last out)" = 9.2 &&
	test "$(col eval_losses out)" = "4:9.4 4:9.3 4:9.2" &&
	test_grep "^gpt-logparse: 2 lines skipped" err
'

# gpt-launch --max-restarts appends the resumed run to the same workerlog;
# a resumed run logs the steps after its checkpoint again.
test_expect_success 'steps that a resumed run logs again count once, as the later lines say' '
	{
		sed -n "2,4p;6,9p" "$D/gptkit.log" |
			sed "/global step 5, epoch/s/loss: [0-9.]*/loss: 1.5/; /eval/s/loss: [0-9.]*/loss: 2.5/"
		echo "[2026-11-21 10:00:05,000] [    INFO] - resumed from output/step_00000003 at global step 3"
		sed -n 5,15p "$D/gptkit.log"
	} >resumed.log &&
	gpt-logparse resumed.log | cut -f 3 | sed 1d | tr "\n" " " >actual &&
	printf "1 2 3 4 5 6 4 5 6 7 8 9 10 " >expect && test_cmp expect actual &&
	for skip in "" "--skip-steps 0"; do
		gpt-logparse --summary $skip "$D/gptkit.log" | cut -f 3-25 >expect &&
		gpt-logparse --summary $skip resumed.log | cut -f 3-25 >actual &&
		test_cmp expect actual || return 1
	done &&
	gpt-logparse --summary resumed.log >out &&
	test "$(col steps out)" = 10 &&
	test "$(col loss_min out)" = 10.074280167 &&
	test "$(col eval_losses out)" = "5:10.123456789 10:9.87654321" &&
	test "$(col restarts out)" = 1 &&
	gpt-logparse --summary "$D/gptkit.log" >out &&
	test "$(col restarts out)" = 0
'

test_expect_success 'a directory gives one summary per workerlog, in rank order' '
	mkdir log &&
	cp "$D/fleetx.log" log/workerlog.10 &&
	cp "$D/gptkit.log" log/workerlog.2 &&
	echo junk >log/other.txt &&
	gpt-logparse --summary log >out 2>/dev/null &&
	col rank out >actual &&
	printf "2\n10\n" >expect && test_cmp expect actual &&
	col source out >actual &&
	printf "log/workerlog.2\nlog/workerlog.10\n" >expect && test_cmp expect actual
'

test_expect_success 'JSON summary is one valid object per log' '
	gpt-logparse --summary --format json "$D/gptkit.log" "$D/megatron.log" >out 2>/dev/null &&
	test_line_count = 2 out &&
	grep -q "\"eval_losses\":\[\[5,10.123456789\],\[10,9.87654321\]\]" out &&
	if command -v python3 >/dev/null; then
		python3 -c "import json,sys; [json.loads(l) for l in sys.stdin]" <out
	fi
'

test_expect_success 'a log without steps gives an empty summary row' '
	: >empty.log &&
	gpt-logparse --summary empty.log >out 2>err &&
	test "$(col steps out)" = 0 &&
	test "$(col tokens_per_s_median out)" = "" &&
	test_grep "^gpt-logparse: warning: no training log line found in 0 lines of 1 log$" err
'

test_expect_success 'a log without steps: the same line counts for the rows, the summary and --plot, exit 0' '
	{
		echo "starting"
		head -c 1048577 /dev/zero | tr "\0" b; echo
		echo
	} >nosteps.log &&
	for mode in "" --summary "--plot nosteps.svg"; do
		gpt-logparse $mode nosteps.log >out 2>err &&
		test_grep "^gpt-logparse: 2 lines skipped: 1 with no step, eval or checkpoint record \(other output or an unknown format\), 1 longer than 1 MiB$" err &&
		test_grep "^gpt-logparse: warning: no training log line found in 3 lines of 1 log$" err &&
		test_line_count = 2 err || return 1
	done &&
	test_grep "no data" nosteps.svg
'

test_expect_success 'bad option values are usage errors' '
	test_expect_code 64 gpt-logparse --format xml "$D/gptkit.log" 2>err &&
	test_grep "^gpt-logparse: error: --format: expected tsv, csv or json, not .xml.$" err &&
	test_expect_code 64 gpt-logparse --skip-steps -1 "$D/gptkit.log" 2>err &&
	test_expect_code 64 gpt-logparse --params 0 "$D/gptkit.log" 2>err &&
	test_expect_code 64 gpt-logparse --peak-tflops abc "$D/gptkit.log" 2>err &&
	test_expect_code 64 gpt-logparse --follow --summary "$D/gptkit.log" 2>err &&
	test_grep "cannot be combined with --summary" err &&
	test_expect_code 66 gpt-logparse --model x.yaml "$D/gptkit.log" 2>err &&
	test_grep "^gpt-logparse: error: --model: x.yaml: No such file" err &&
	for opt in "--params 345M" "--peak-tflops 312" "--skip-steps 3"; do
		test_expect_code 64 gpt-logparse $opt "$D/gptkit.log" >out 2>err &&
		test_grep "shape the --summary figures; give --summary, or leave them out" err &&
		test_line_count = 0 out || return 1
	done
'

test_expect_success 'MFU takes a parameter count and --peak-tflops together: one alone is refused, not ignored' '
	cfg="$GPT_ROOT/configs/pretrain_gpt_345M_single_card.yaml" &&
	test_expect_code 64 gpt-logparse --summary --params 345M "$D/fleetx.log" >out 2>err &&
	test_grep "^gpt-logparse: error: --params \(or --model\) gives the mfu column only together with --peak-tflops; give both, or leave it out$" err &&
	test_line_count = 0 out &&
	test_expect_code 64 gpt-logparse --summary --model "$cfg" "$D/fleetx.log" >out 2>err &&
	test_grep "only together with --peak-tflops" err &&
	test_expect_code 64 gpt-logparse --summary --peak-tflops 312 "$D/fleetx.log" >out 2>err &&
	test_grep "^gpt-logparse: error: --peak-tflops gives the mfu column only together with --params \(or --model\); give both, or leave it out$" err &&
	test_expect_code 64 gpt-logparse --summary --model "$cfg" --params 345M --peak-tflops 312 "$D/fleetx.log" >out 2>err &&
	test_grep "^gpt-logparse: error: --params and --model both give the parameter count; give one of them$" err &&
	test_line_count = 0 out
'

test_expect_success '--model takes the parameter count from a gpt-train config' '
	cfg="$GPT_ROOT/configs/pretrain_gpt_345M_single_card.yaml" &&
	n=$(gpt-train -c "$cfg" --dry-run | sed -n "s/^parameters: \([0-9,]*\) .*/\1/p" | tr -d ,) &&
	gpt-logparse --summary --model "$cfg" --peak-tflops 312 "$D/fleetx.log" >a &&
	gpt-logparse --summary --params "$n" --peak-tflops 312 "$D/fleetx.log" >b &&
	test_cmp b a &&
	test -n "$(col mfu a)"
'

test_done
