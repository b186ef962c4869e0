#!/bin/sh
# gpt-train --dry-run: parameter count from the parameter table and per-rank
# memory with sharding stages, offload, recompute, tp and pp applied.
. "$(dirname "$0")/test-lib.sh"

C=$GPT_ROOT/configs

# field NAME FILE: the first number after "NAME:" in bytes (GiB/MiB/B units).
field () {
	sed -n "s/^  $1: *//p" "$2" | head -n 1 | awk '{
		v = $1; u = $2
		if (u == "GiB") v *= 1073741824; else if (u == "MiB") v *= 1048576
		printf "%.0f\n", v }'
}

test_expect_success '175B mp8 x pp16: about 175 billion parameters on 128 ranks' '
	gpt-train -c "$C/pretrain_gpt_175B_mp8_pp16.yaml" --dry-run >out &&
	test_grep "^parameters: 174,[0-9,]* \(174\.[0-9]B\)$" out &&
	test_grep "^layout: world size 128 \(from the product of the degrees\) = dp 1 x mp 8 x pp 16 x sharding 1" out &&
	test_grep "^per-rank memory, busiest rank \(pipeline stage [0-9]+ of 16: 6 layers" out &&
	test_grep "^  total: +[0-9.]+ GiB  device" out
'

test_expect_success 'parameter counts of the reference shapes' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --dry-run >out &&
	test_grep "^parameters: 354,871,296 \(354.9M\)$" out &&
	gpt-train -c "$C/pretrain_gpt_1.3B_dp8.yaml" --dry-run >out &&
	test_grep "^parameters: 1,313,722,368 \(1.3B\)$" out &&
	gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" --dry-run >out &&
	test_grep "^parameters: 6,654,402,560 \(6.7B\)$" out &&
	gpt-train -c "$C/gpt2_13b.yaml" --dry-run >out &&
	test_grep "^parameters: 12,853,626,880 \(12.9B\)$" out &&
	gpt-train -c "$C/gpt2_52b.yaml" --dry-run >out &&
	test_grep "^parameters: 51,966,918,656 \(52.0B\)$" out
'

test_expect_success 'GPT2-13B and 52B in the layouts of MindFormers (its 13B document, run_gpt2_52b.yaml)' '
	gpt-train -c "$C/gpt2_13b.yaml" --dry-run >out &&
	test_grep "^layout: world size 32 .* = dp 1 x mp 2 x pp 4 x sharding 4;" out &&
	test_grep "^batch: global 96 = micro 1 x accumulate 24 x dp 1 x sharding 4" out &&
	gpt-train -c "$C/gpt2_52b.yaml" --dry-run >out &&
	test_grep "^model: 64 layers, hidden 8192, 64 heads \(head size 128\), .*, sequence 1024$" out &&
	test_grep "^layout: world size 128 .* = dp 1 x mp 1 x pp 16 x sharding 8;" out &&
	test_grep "^batch: global 512 = micro 1 x accumulate 64 x dp 1 x sharding 8" out
'

test_expect_success 'every reference configuration dry-runs' '
	for f in "$C"/*.yaml; do
		gpt-train -c "$f" --dry-run >out || { echo "failed: $f"; exit 1; }
		grep "^  total:" out >/dev/null || { echo "no total: $f"; exit 1; }
	done
'

test_expect_success '345M single card: 2-byte parameters, 12-byte optimizer state' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --dry-run >out &&
	test_grep "^precision: O2 float16 .*loss scale 32768$" out &&
	test_grep "^  parameters: +676.9 MiB  \(2 bytes each\)$" out &&
	test_grep "^  optimizer state: +3.97 GiB  device, 0 B host  \(fp32 master \+ m \+ v, 12 bytes each\)$" out &&
	# 16 MiB of it the low half of the attention output (8 x 1024 x 1024 x 2 bytes),
	# 8 MiB the dropout mask (16 heads x 8 x 1024 x 1024 / 16 bytes)
	test_grep "one layer, one micro-batch: 296.5 MiB stored, 16.0 MiB kept" out
'

test_expect_success 'bf16 keeps its fp32 master weights split: 10-byte optimizer state' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Engine.mix_precision.dtype=bfloat16 --dry-run >out &&
	test_grep "^precision: O2 bfloat16 .*fp32 master weights: the parameters and their low halves\)$" out &&
	test_grep "^  parameters: +676.9 MiB  \(2 bytes each\)$" out &&
	# 10/12 of the float16 plan: 3.97 GiB
	test_grep "^  optimizer state: +3.30 GiB  device, 0 B host  \(the fp32 master.s low halves \+ m \+ v, 10 bytes each\)$" out
'

test_expect_success 'the GPU plan keeps log-sum-exps (the output.s low half, the dropout mask), the CPU plan the T x T probabilities' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --dry-run >gpu &&
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Model.attention_probs_dropout_prob=0 --dry-run >gpu0 &&
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Global.device=cpu --dry-run >cpu &&
	g=$(field activations gpu) && c=$(field activations cpu) &&
	# 24 layers x 8 x 16 heads x 1024 x 1024 fp32 probabilities on the CPU: 12 GiB (less the log-sum-exps) more
	test $((c - g)) -gt $((11 * 1073741824)) &&
	# the CUDA backend'"'"'s own: 32 MiB of cuBLASLt workspace, and 256 partial
	# rows of the widest bias gradient (ffn 4096 fp32) for its column sums
	test_grep "^  backend work: +36.0 MiB  " gpu &&
	! grep -q "^  backend work:" cpu &&
	test_grep "^  total: +12.18 GiB  device" gpu &&
	# the dropout mask, a bit a probability of the causal triangle: 24 layers
	# x 8 x 16 heads x 8256 words of 8 bytes (8.06 MiB a layer), within the
	# rounding of the two figures (0.01 GiB)
	g0=$(field activations gpu0) && d=$((g - g0 - 24 * 8 * 16 * 8256 * 8)) &&
	test "${d#-}" -lt $((12 * 1048576)) &&
	test_grep "^  total: +11.99 GiB  device" gpu0
'

test_expect_success 'the classifier block: rows and bytes of logits at a time, Model.classifier_rows' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --dry-run >cl &&
	test_grep "^classifier: blocks of 1280 of a micro-batch.s 8192 token rows, 122.8 MiB of logits at a time" cl &&
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Model.classifier_rows=256 --dry-run >cl2 &&
	test_grep "^classifier: blocks of 256 of a micro-batch.s 8192 token rows, 24.6 MiB of logits at a time" cl2 &&
	a=$(field activations cl) && b=$(field activations cl2) &&
	test "$b" -lt "$a"
'

test_expect_success 'sharding stages split optimizer state, then gradients, then parameters' '
	for s in 1 2 3; do
		gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" --sharding stage$s --dry-run >s$s || exit 1
	done &&
	p1=$(field parameters s1) && p2=$(field parameters s2) && p3=$(field parameters s3) &&
	g1=$(field gradients s1) && g2=$(field gradients s2) &&
	o1=$(field "optimizer state" s1) && o3=$(field "optimizer state" s3) &&
	test "$p1" = "$p2" && test "$p3" -lt "$p2" &&
	test "$g2" -lt "$g1" && test "$o1" = "$o3" &&
	gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" -o Distributed.sharding.sharding_degree=1 \
		--world-size 1 --dry-run >s0 &&
	o0=$(field "optimizer state" s0) && test "$o1" -lt "$o0"
'

test_expect_success 'offload moves master weights and optimizer state to the host of a GPU rank' '
	gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" --sharding "stage2 offload" --dry-run >out &&
	test_grep "^sharding: stage 2 over 16 ranks, offload on$" out &&
	# 12 bytes of state and, on the GPU, 2 + 2 bytes of pinned images per shard element
	test_grep "^  optimizer state: +0 B  device, 6.20 GiB host .*pinned images" out &&
	test_grep "^  total: .* device, 6.20 GiB host$" out &&
	gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" --sharding "stage2 offload" \
		-o Global.device=cpu --dry-run >cpu &&
	# a CPU rank keeps its state where it is: the rank total counts it
	test_grep "^  optimizer state: +4.65 GiB  device, 0 B host  \(fp32 master \+ m \+ v, 12 bytes each, split over the sharding group; offload changes nothing on a CPU rank, whose state is in host memory already\)$" cpu &&
	test_grep "^  total: .* device, 0 B host$" cpu
'

test_expect_success 'recompute: configured figure follows use_recompute and the granularity' '
	gpt-train -c "$C/pretrain_gpt_1.3B_single_card.yaml" --dry-run >full &&
	gpt-train -c "$C/pretrain_gpt_1.3B_single_card.yaml" -o Model.use_recompute=False --dry-run >none &&
	gpt-train -c "$C/pretrain_gpt_1.3B_single_card.yaml" -o Model.recompute_granularity=core_attn --dry-run >core &&
	test_grep "^recompute: full$" full && test_grep "^recompute: off$" none &&
	f=$(sed -n "s/.* with full recompute, \(.*\) as configured/\1/p" full) &&
	n=$(sed -n "s/.* with full recompute, \(.*\) as configured/\1/p" none) &&
	c=$(sed -n "s/.* with full recompute, \(.*\) as configured/\1/p" core) &&
	test "$f" != "$n" && test "$c" != "$f" && test "$c" != "$n" &&
	grep "  activations: *$n  without recompute" none
'

test_expect_success 'tp splits activations and parameters; pp spreads layers' '
	gpt-train -c "$C/pretrain_gpt_345M_mp8_qat.yaml" --dry-run >tp8 &&
	test_grep "one layer, one micro-batch: 107.1 MiB stored" tp8 &&
	gpt-train -c "$C/tiny_cpu.yaml" --pipeline_parallel_degree 2 --world-size 2 --dry-run >pp2 &&
	test_grep "^ +0 +1 " pp2 && test_grep "^ +1 +1 " pp2 &&
	gpt-train -c "$C/tiny_cpu.yaml" --pipeline_parallel_degree 2 --virtual_pp_degree 2 \
		-o Model.num_layers=4 --world-size 2 --dry-run >vpp &&
	test_grep "schedule interleaved$" vpp
'

test_expect_success 'fp32 training: 4-byte parameters, 8-byte optimizer state' '
	gpt-train -c "$C/tiny_cpu.yaml" --dry-run >out &&
	test_grep "^precision: fp32" out &&
	test_grep "^  parameters: .*\(4 bytes each\)$" out &&
	test_grep "\(m \+ v, 8 bytes each\)$" out
'

test_expect_success '--dry-run with --world-size derives dp from it' '
	gpt-train -c "$C/pretrain_gpt_1.3B_single_card.yaml" -o Distributed.dp_degree=null \
		-o Global.global_batch_size=32 --world-size 4 --dry-run >out &&
	test_grep "^layout: world size 4 \(from --world-size\) = dp 4 " out
'

test_done
