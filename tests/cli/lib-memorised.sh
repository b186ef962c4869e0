# Sourced by the gpt-infer and gpt-export tests after test-lib.sh: a tiny
# byte model that has memorised one sentence (trained into ck/), and greedy
# decoding with gpt-infer.

SENTENCE='Everyone is permitted to copy and distribute verbatim copies of this license document. '

greedy () {
	gpt-infer -m "$@" -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=40
}

# train_memorised: 200 steps on 32 copies of the sentence, checkpoint in ck/
train_memorised () {
	mkdir d &&
	for i in $(seq 60); do printf "%s" "$SENTENCE"; done >d/doc.txt &&
	for i in $(seq 32); do cp d/doc.txt d/doc$i.txt; done &&
	gpt-preprocess -t bytes -o d/s d/doc[0-9]*.txt 2>/dev/null &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=8,1,0 -o Data.Eval.dataset.split=8,1,0 \
		-o Global.micro_batch_size=8 -o Engine.eval_iters=1 -o Optimizer.lr.max_lr=3e-3 \
		-o Optimizer.lr.decay_steps=200 -o Optimizer.lr.warmup_rate=0.02 \
		-o Engine.max_steps=200 -o Engine.save_load.save_steps=200 -o Engine.eval_freq=0 \
		-o Engine.logging_freq=100 -o Engine.save_load.output_dir=ck >train.log 2>&1
}
