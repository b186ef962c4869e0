#!/bin/sh
# gpt-logparse: one row per step for each dialect, as TSV, CSV and JSON.
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse

test_expect_success 'FleetX seed log: rows with the logged digits' '
	gpt-logparse "$D/fleetx.log" >out 2>err &&
	test_line_count = 10 out &&
	printf "source\trank\tstep\tloss\tlr\tstep_time\ttokens_per_s\ttokens_per_s_total\n" >expect &&
	head -n 1 out >actual && test_cmp expect actual &&
	printf "%s\t0\t1\t11.083364487\t5.55556e-09\t2.05344\t499\t3989\n" "$D/fleetx.log" >expect &&
	sed -n 2p out >actual && test_cmp expect actual &&
	printf "%s\t0\t9\t11.076778412\t2.77778e-08\t0.10425\t9822\t78577\n" "$D/fleetx.log" >expect &&
	tail -n 1 out >actual && test_cmp expect actual &&
	test_grep "^gpt-logparse: 2 lines skipped: no step, eval or checkpoint record \(other output or an unknown format\)$" err
'

test_expect_success 'FleetX colour codes, with and without the ESC bytes, give the same rows' '
	gpt-logparse "$D/fleetx-color.log" | cut -f 3- >a &&
	gpt-logparse "$D/fleetx-color-noesc.log" | cut -f 3- >b &&
	test_cmp a b &&
	test_line_count = 11 a &&
	printf "10\t11.674280167\t3.43750e-08\t0.28149\t909\t7276\n" >expect &&
	tail -n 1 a >actual && test_cmp expect actual
'

test_expect_success 'older FleetX lines: a lone ips is the all-card figure' '
	gpt-logparse "$D/fleetx-old.log" | cut -f 3- >out &&
	printf "2\t10.987654321\t7.50000e-09\t0.20000\t\t40960\n" >expect &&
	sed -n 3p out >actual && test_cmp expect actual
'

test_expect_success 'an ips in sequences/sec or samples/sec is no tokens/s' '
	cat >seq.log <<-\EOF &&
	[2023-03-01 10:00:00,000] [    INFO] - global step 30 / 100, loss: 7.500000, avg_reader_cost: 0.00100 sec, avg_batch_cost: 0.50000 sec, avg_samples: 8.00000, ips: 16.00000 sequences/sec
	[2023-03-01 10:00:05,000] [    INFO] - global step 40 / 100, loss: 7.400000, avg_reader_cost: 0.00100 sec, avg_batch_cost: 0.50000 sec, avg_samples: 8.00000, ips: 16.00000 sample/sec, max_mem_reserved: 1024 MB, max_mem_allocated: 512 MB
	[2023-03-01 10:00:10,000] [    INFO] - global step 50, loss: 7.300000, avg_batch_cost: 0.50000 sec, ips_total: 4096 tokens/sec, ips: 512 tokens/sec
	EOF
	gpt-logparse seq.log | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	30	7.500000		0.50000		
	40	7.400000		0.50000		
	50	7.300000		0.50000	512	4096
	EOT
	test_cmp expect out
'

test_expect_success 'PaddleFleetX engine lines: [train] epoch: E, batch: B is step B + 1, on across epochs' '
	cat >ppfleetx.log <<-\EOF &&
	[2022-10-20 12:00:01,000] [    INFO] - [train] epoch: 0, batch: 0, loss: 11.052017212, avg_batch_cost: 1.59627 sec, speed: 0.63 step/s, ips_total: 5132 tokens/s, ips: 641 tokens/s, learning rate: 5.55556e-09
	[2022-10-20 12:00:02,000] [    INFO] - [train] epoch: 0, batch: 9, loss: 10.930861855, avg_batch_cost: 0.50125 sec, speed: 2.00 step/s, ips_total: 16343 tokens/s, ips: 2043 tokens/s, learning rate: 8.33333e-08
	[2022-10-20 12:00:03,000] [    INFO] - [eval] epoch: 0, batch: 9, loss: 10.876543210, avg_eval_cost: 0.10000 sec, speed: 10.00 step/s
	[2022-10-20 12:00:04,000] [    INFO] - [train] epoch: 0, batch: 19, loss: 10.854017067, avg_batch_cost: 0.49697 sec, speed: 2.01 step/s, ips_total: 16484 tokens/s, ips: 2061 tokens/s, learning rate: 1.11111e-07
	[2022-10-20 12:00:05,000] [    INFO] - [Training] epoch: 0, total time: 10.00000 sec
	[2022-10-20 12:00:06,000] [    INFO] - [train] epoch: 1, batch: 9, loss: 10.727174950, avg_batch_cost: 0.49582 sec, speed: 2.02 step/s, ips_total: 16522 tokens/s, ips: 2065 tokens/s, learning rate: 1.38889e-07
	EOF
	gpt-logparse ppfleetx.log 2>err | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	11.052017212	5.55556e-09	1.59627	641	5132
	10	10.930861855	8.33333e-08	0.50125	2043	16343
	20	10.854017067	1.11111e-07	0.49697	2061	16484
	30	10.727174950	1.38889e-07	0.49582	2065	16522
	EOT
	test_cmp expect out &&
	test_grep "^gpt-logparse: 1 line skipped" err &&
	gpt-logparse --summary --format json ppfleetx.log >sum 2>/dev/null &&
	grep -q "\"format\":\"fleetx\",\"steps\":4," sum &&
	grep -q "\"eval_losses\":\[\[10,10.87654321\]\]" sum &&
	grep -q "\"restarts\":0}" sum
'

test_expect_success 'PaddleFleetX fine-tuning lines: [train] epoch: E, step: [S/N] with the learning rate first' '
	cat >finetune.log <<-\EOF &&
	[2022-11-02 10:00:01,000] [    INFO] - [train] epoch: 0, step: [0/1053], learning rate: 0.0000000, loss: 0.693147182, avg_batch_cost: 0.51437 sec, speed: 1.94 step/s, ips_total: 1991 tokens/s, ips: 1991 tokens/s
	[2022-11-02 10:00:02,000] [    INFO] - [train] epoch: 0, step: [9/1053], learning rate: 0.0000200, loss: 0.681234567, avg_batch_cost: 0.21437 sec, speed: 4.66 step/s, ips_total: 4771 tokens/s, ips: 4771 tokens/s
	[2022-11-02 10:00:03,000] [    INFO] - [eval] epoch: 0, batch: 9, loss: 0.679999999, avg_eval_cost: 0.01000 sec, speed: 100.00 step/s
	[2022-11-02 10:00:04,000] [    INFO] - [Eval] epoch: 0, total time: 3.00000 sec, acc: 0.51000, best_metric: 0.51000
	[2022-11-02 10:00:05,000] [    INFO] - [train] epoch: [1/3], step: [9/1053], learning rate: 0.0000190, loss: 0.512345678, avg_batch_cost: 0.21001 sec, speed: 4.76 step/s, ips_total: 4870 tokens/s, ips: 4870 tokens/s
	EOF
	gpt-logparse finetune.log 2>err | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	0.693147182	0.0000000	0.51437	1991	1991
	10	0.681234567	0.0000200	0.21437	4771	4771
	20	0.512345678	0.0000190	0.21001	4870	4870
	EOT
	test_cmp expect out &&
	test_grep "^gpt-logparse: 1 line skipped" err &&
	gpt-logparse --summary --format json finetune.log >sum 2>/dev/null &&
	grep -q "\"eval_losses\":\[\[10,0.679999999\]\]" sum
'

test_expect_success 'later PaddleFleetX lines: epoch: [E/N], batch: [B/T], ips_per_device, the learning rate after a blank loss_scale' '
	cat >ppfleetx2.log <<-\EOF &&
	[2023-08-01 10:00:01,000] [    INFO] - [train] epoch: [0/1], batch: [0/500000], loss: 10.987654321, avg_batch_cost: 1.20000 sec, speed: 0.83 step/s, ips_total: 6827 tokens/s, ips: 3413 tokens/s, ips_per_device:853 tokens/s/device,  learning rate: 5.55556e-09, found_inf: 0 
	[2023-08-01 10:00:05,000] [    INFO] - [train] epoch: [0/1], batch: [9/500000], loss: 10.874586105, avg_batch_cost: 0.48811 sec, speed: 2.05 step/s, ips_total: 16783 tokens/s, ips: 8392 tokens/s, ips_per_device:2098 tokens/s/device, loss_scale: 32768.000000000, learning rate: 5.55556e-08, found_inf: 0 , max_memory_allocated: 9123.4 MB, max_memory_reserved: 9876.5 MB, memory_allocated: 8000.0 MB, memory_reserved: 9876.5 MB
	[2023-08-01 10:00:06,000] [    INFO] - [eval] epoch: 0, batch: 10/100, loss: 10.812345678, avg_eval_cost: 0.01234 sec, speed: 81.04 step/s
	EOF
	gpt-logparse ppfleetx2.log 2>err | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	10.987654321	5.55556e-09	1.20000	853	6827
	10	10.874586105	5.55556e-08	0.48811	2098	16783
	EOT
	test_cmp expect out &&
	test ! -s err &&
	gpt-logparse --summary --format json ppfleetx2.log >sum 2>/dev/null &&
	grep -q "\"eval_losses\":\[\[10,10.812345678\]\]" sum
'

test_expect_success 'FleetX and PaddleNLP GPT valid step N lines are evals at step N, also before any step line' '
	{
		echo "[2022-07-27 12:40:00,100] [    INFO] - valid step 0, epoch: 0, batch: 9, loss: 11.123456, speed: 3.45 step/s"
		sed -n 2,6p "$D/fleetx.log"
		echo "[2022-07-27 12:40:02,000] [    INFO] - valid step 5, epoch: 0, batch: 9, loss: 10.987654, speed: 3.21 step/s"
		echo "[2022-07-27 12:40:03,000] [    INFO] - test step 5, epoch: 0, batch: 9, loss: 10.876543, speed: 3.33 step/s"
	} >valid.log &&
	gpt-logparse --summary --format json valid.log >sum 2>err &&
	grep -q "\"evals\":2,\"eval_loss_last\":10.987654,\"eval_losses\":\[\[0,11.123456\],\[5,10.987654\]\]" sum &&
	test_grep "^gpt-logparse: 1 line skipped" err
'

test_expect_success 'a PaddleFleetX [eval] epoch line before any step line has no step: the log gives none' '
	cat >ppfleetx-eval-first.log <<-\EOF &&
	[2022-10-20 12:00:01,000] [    INFO] - [eval] epoch: 0, batch: 9, loss: 10.976543210, avg_eval_cost: 0.10000 sec, speed: 10.00 step/s
	[2022-10-20 12:00:02,000] [    INFO] - [train] epoch: 0, batch: 9, loss: 10.930861855, avg_batch_cost: 0.50125 sec, speed: 2.00 step/s, ips_total: 16343 tokens/s, ips: 2043 tokens/s, learning rate: 8.33333e-08
	[2022-10-20 12:00:03,000] [    INFO] - [eval] epoch: 0, batch: 9, loss: 10.876543210, avg_eval_cost: 0.10000 sec, speed: 10.00 step/s
	EOF
	gpt-logparse --summary --format json ppfleetx-eval-first.log >sum &&
	grep -q "\"eval_losses\":\[\[null,10.97654321\],\[10,10.87654321\]\]" sum &&
	gpt-logparse --summary ppfleetx-eval-first.log | sed -n 2p | cut -f 21 >actual &&
	printf ":10.97654321 10:10.87654321\n" >expect && test_cmp expect actual
'

test_expect_success 'llm.c: a val loss is the steps done before the next step line, also in a resumed run and the old format' '
	cat >llmc-resumed.log <<-\EOF &&
	val loss 11.009589
	step    1/74 | loss 7.926287 (+nanz)| norm 43.1151 (+nanz)| lr 8.57e-06 | 1020.88 ms | -100.0% bf16 MFU | 514073 tok/s
	step    2/74 | loss 7.713380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	step    3/74 | loss 7.513380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	val loss 7.151734
	step    4/74 | loss 7.313380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	val loss 7.251734
	step    3/74 | loss 7.523380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	step    4/74 | loss 7.323380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	val loss 7.051734
	EOF
	gpt-logparse --summary --format json llmc-resumed.log "$D/llmc-old.log" >sum 2>/dev/null &&
	grep "^{\"source\":\"llmc-resumed.log\".*\"steps\":4,.*\"eval_losses\":\[\[0,11.009589\],\[2,7.251734\],\[4,7.051734\]\],.*\"restarts\":1}" sum &&
	grep "llmc-old.log.*\"eval_losses\":\[\[0,5.251911\]\]" sum
'

test_expect_success 'gptkit: eval, checkpoint and overflow lines are not step rows' '
	gpt-logparse "$D/gptkit.log" >out &&
	test_line_count = 11 out &&
	cut -f 3 out | sed 1d | tr "\n" " " >actual &&
	printf "1 2 3 4 5 6 7 8 9 10 " >expect && test_cmp expect actual
'

test_expect_success 'gptkit: the [spike] and [test] lines are not step rows either' '
	sed -n 1,3p "$D/gptkit.log" >spike.log &&
	cat >>spike.log <<-\EOF &&
	[2026-11-21 10:00:01,900] [ WARNING] - [spike] global step 3, loss: 31.500000000, z-score: 9.12 (threshold 6), grad_norm: 12.5, z-score: 8.01 (threshold 6): skipped the update; the step stays out of the window of 50
	[2026-11-21 10:00:02,000] [    INFO] - global step 3, epoch: 0, batch: 2, loss: 31.500000000, avg_reader_cost: 0.00010 sec, avg_batch_cost: 0.10000 sec, speed: 10.00 step/s, ips_total: 1000 tokens/s, ips: 1000 tokens/s, learning rate: 1.00000e-04
	[2026-11-21 10:00:03,000] [    INFO] - [test] global step 3, epoch: 0, batch: 2, loss: 3.208745450, ppl: 24.748000, avg_eval_cost: 0.01000 sec, speed: 100.00 step/s
	EOF
	gpt-logparse spike.log >out &&
	cut -f 3,4 out | sed 1d >actual &&
	test_line_count = 3 actual &&
	tail -n 1 actual >last && printf "3\t31.500000000\n" >expect && test_cmp expect last &&
	gpt-logparse --summary spike.log >sum &&
	test "$(sed -n 2p sum | cut -f 4)" = 3
'

test_expect_success 'PaddleNLP Trainer lines' '
	gpt-logparse "$D/paddlenlp.log" | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	10	10.98765432	1e-05	1.0512		
	20	9.87654321	2e-05	0.85		
	30	8.7654321	3e-05	0.8		
	40	7.6543210	4e-05	0.8	5120.0	
	EOT
	test_cmp expect out
'

test_expect_success 'Megatron-DeepSpeed lines: tgs is tokens/s per card, samples/s x seqlen over all' '
	cat >mds.log <<-\EOF &&
	 iteration      199/  317892 | consumed samples:       152832 | consumed tokens:    625999872 | elapsed time per iteration (ms): 14287.5 | learning rate: 2.407E-04 | global batch size:   768 | lm loss: 5.905366E+00 | loss scale: 8192.0 | actual seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 53.750 | tokens per gpu per second (tgs): 1146.733 | TFLOPs: 69.85 |
	 iteration      200/  317892 | consumed samples:       153600 | consumed tokens:    629145600 | elapsed time per iteration (ms): 14541.4 | learning rate: 2.407E-04 | global batch size:   768 | lm loss: 5.897035E+00 | loss scale: 8192.0 | number of skipped iterations:   1 | number of nan iterations:   0 |
	EOF
	gpt-logparse mds.log | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	199	5.905366E+00	2.407E-04	14.2875	1146.733	220160
	200	5.897035E+00	2.407E-04	14.5414		
	EOT
	test_cmp expect out
'

test_expect_success 'Megatron-LM lines: ms become seconds' '
	gpt-logparse "$D/megatron.log" | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	1.100000E+01	1.000E-06	12.3456		
	2	1.050000E+01	2.000E-06	2.1		
	3	1.000000E+01	3.000E-06	2		
	4	9.500000E+00	4.000E-06	2.05		
	EOT
	test_cmp expect out
'

test_expect_success 'llm.c lines, new and old' '
	gpt-logparse "$D/llmc.log" "$D/llmc-old.log" | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	7.926287	8.57e-06	1.02088		514073
	2	7.713380	1.71e-05	0.33652		1557977
	3	7.493471	2.57e-05	0.33597		1560503
	4	7.262049	3.43e-05	0.3371		1555280
	0	5.356085		1.452121		
	1	4.300641		1.288673		
	2	4.623082		1.369394		
	EOT
	test_cmp expect out
'

test_expect_success 'llm.c lines with z-scores keep their lr; main.log numbers its steps and evals as stdout does' '
	cat >llmc-z.log <<-\EOF &&
	val loss 11.009589
	step    1/74 | loss 7.926287 (+nanz)| norm 43.1151 (+nanz)| lr 8.57e-06 | 1020.88 ms | -100.0% bf16 MFU | 514073 tok/s
	step    2/74 | loss 7.713380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s
	val loss 7.151734
	EOF
	cat >main.log <<-\EOF &&
	s:0 tel:11.0096
	s:0 trl:7.9263 lr:0.000009 norm:43.12
	s:1 trl:7.7134 lr:0.000017 norm:21.70
	s:2 tel:7.1517
	EOF
	gpt-logparse llmc-z.log main.log | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	7.926287	8.57e-06	1.02088		514073
	2	7.713380	1.71e-05	0.33652		1557977
	1	7.9263	0.000009			
	2	7.7134	0.000017			
	EOT
	test_cmp expect out &&
	gpt-logparse --summary --format json llmc-z.log main.log >sum &&
	grep "^{\"source\":\"llmc-z.log\".*\"loss_min_step\":2,.*\"eval_losses\":\[\[0,11.009589\],\[2,7.151734\]\]" sum &&
	grep "^{\"source\":\"main.log\".*\"loss_min_step\":2,.*\"eval_losses\":\[\[0,11.0096\],\[2,7.1517\]\]" sum
'

test_expect_success 'MindFormers lines: the global step from epoch and step, ms become seconds' '
	cat >mf.log <<-\EOF &&
	2024-03-01 10:00:00,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  1/  2], step:[    1/  125], loss: 10.789, per_step_time: 35312ms, lr: 0.0, overflow cond: False, loss_scale: 1024.0, global_norm: [13.345]
	2024-03-01 10:00:00,124 - mindformers[mindformers/core/callback/callback.py:320] - INFO -    0.4% |                                                  | 0.45311 samples/s/p  2:26:42 }
	2024-03-01 10:01:10,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  1/  2], step:[  125/  125], loss: 7.345, per_step_time: 512ms, lr: 1e-05, overflow cond: False, loss_scale: 1024.0, global_norm: [3.345], train_throughput_per_npu: 123.456T
	2024-03-01 10:01:20,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - { Epoch:[  2/  2], step:[   10/  125], loss:[ 7.001/ 7.210], per_step_time: 498ms, lr: [9.999e-06], overflow cond: False, loss_scale: 1024.0, global_norm: [3.1]
	EOF
	gpt-logparse mf.log 2>err | cut -f 3- >out &&
	cat >expect <<-\EOT &&
	step	loss	lr	step_time	tokens_per_s	tokens_per_s_total
	1	10.789	0.0	35.312		
	125	7.345	1e-05	0.512		
	135	7.001	9.999e-06	0.498		
	EOT
	test_cmp expect out &&
	test_grep "^gpt-logparse: 1 line skipped: no step, eval or checkpoint record \(other output or an unknown format\)$" err &&
	gpt-logparse --summary --format json mf.log >sum 2>/dev/null &&
	grep -q "\"format\":\"mindformers\",\"steps\":3," sum
'

test_expect_success 'mixed dialects in one file' '
	cat "$D/llmc.log" "$D/fleetx.log" "$D/megatron.log" "$D/paddlenlp.log" >mixed.log &&
	gpt-logparse mixed.log >out 2>err &&
	test_line_count = 22 out &&
	test_grep "^gpt-logparse: 10 lines skipped" err
'

test_expect_success 'CSV quotes a source with a comma' '
	cp "$D/fleetx.log" "a,b.log" &&
	gpt-logparse --format csv "a,b.log" >out 2>/dev/null &&
	echo "source,rank,step,loss,lr,step_time,tokens_per_s,tokens_per_s_total" >expect &&
	head -n 1 out >actual && test_cmp expect actual &&
	echo "\"a,b.log\",0,1,11.083364487,5.55556e-09,2.05344,499,3989" >expect &&
	sed -n 2p out >actual && test_cmp expect actual
'

test_expect_success 'JSON Lines: one valid object per row, null for unknowns' '
	gpt-logparse --format json "$D/megatron.log" >out 2>/dev/null &&
	test_line_count = 4 out &&
	head -n 1 out >actual &&
	printf "%s\n" "{\"source\":\"$D/megatron.log\",\"rank\":0,\"step\":1,\"loss\":1.100000E+01,\"lr\":1.000E-06,\"step_time\":12.3456,\"tokens_per_s\":null,\"tokens_per_s_total\":null}" >expect &&
	test_cmp expect actual &&
	if command -v python3 >/dev/null; then
		python3 -c "import json,sys; [json.loads(l) for l in sys.stdin]" <out
	fi
'

test_expect_success 'JSON: a file name that is not UTF-8 gets U+FFFD, a UTF-8 one stays' '
	latin=$(printf "r\351sum\351.log") && utf8=$(printf "r\303\251sum\303\251.log") &&
	cp "$D/megatron.log" "$latin" && cp "$D/megatron.log" "$utf8" &&
	gpt-logparse --format json "$latin" "$utf8" >out 2>/dev/null &&
	gpt-logparse --format json --summary "$latin" >>out 2>/dev/null &&
	r=$(printf "\357\277\275") &&
	grep -c "^{\"source\":\"r${r}sum${r}.log\"," out >n &&
	echo 5 >expect && test_cmp expect n &&
	grep -c "^{\"source\":\"$utf8\"," out >n &&
	echo 4 >expect && test_cmp expect n &&
	if command -v python3 >/dev/null; then
		python3 -c "import json,sys; [json.loads(l) for l in sys.stdin.buffer]" <out
	fi
'

test_expect_success 'a nan or inf the log wrote is printed as written, null in JSON' '
	sed -n 2,3p "$D/gptkit.log" >nan.log &&
	sed -n 3p "$D/gptkit.log" | sed "s/global step 2,/global step 3,/; s/loss: [0-9.]*/loss: nan/" >>nan.log &&
	sed -n 3p "$D/gptkit.log" | sed "s/global step 2,/global step 4,/; s/loss: [0-9.]*/loss: -inf/" >>nan.log &&
	echo "step 5/9 | train loss nan | norm nan | lr 1.00e-04 | nan ms | 0.0% bf16 MFU | inf tok/s" >>nan.log &&
	gpt-logparse nan.log | cut -f 3,4,6,8 >out &&
	cat >expect <<-\EOT &&
	step	loss	step_time	tokens_per_s_total
	1	11.083364487	2.05344	3989
	2	10.954802895	0.13314	61529
	3	nan	0.13314	61529
	4	-inf	0.13314	61529
	5	nan	nan	inf
	EOT
	test_cmp expect out &&
	gpt-logparse --format csv nan.log | cut -d , -f 3,4 | sed -n 4,6p >actual &&
	printf "3,nan\n4,-inf\n5,nan\n" >expect && test_cmp expect actual &&
	gpt-logparse --format json nan.log >out &&
	grep "\"step\":3," out | grep -q "\"loss\":null," &&
	grep "\"step\":5," out | grep -q "\"step_time\":null,.*\"tokens_per_s_total\":null}" &&
	if command -v python3 >/dev/null; then
		python3 -c "import json,sys; [json.loads(l) for l in sys.stdin]" <out
	fi
'

test_expect_success 'stdin is read when no log is named, and as -' '
	gpt-logparse <"$D/fleetx.log" >a 2>/dev/null &&
	gpt-logparse - <"$D/fleetx.log" >b 2>/dev/null &&
	test_cmp a b &&
	cut -f 1 a | sed -n 2p >actual && echo - >expect && test_cmp expect actual
'

test_done
