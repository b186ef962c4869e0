# Sourced by bench/infer-cpu.sh and bench/gpu/infer.sh. infer_model_setup
# leaves in $W (with $ROOT the repository): a checkpoint of the GPT-2 124M
# shapes (12 layers, 768 hidden, 12 heads, 50257 tokens, 1024 positions)
# after one training step ($W/ck; speed does not depend on the weights), its
# int8 bundle ($W/m8.tar), and prompts of about 128 GPT-2 tokens, one
# ($W/p1) and eight ($W/p8). Non-zero, having said what failed, otherwise.
infer_model_setup () {
	bin/gpt-preprocess -o "$W/lic" /usr/share/common-licenses/GPL-3 >/dev/null 2>&1
	cat >"$W/c.yaml" <<EOC
_base_: $ROOT/configs/tiny_cpu.yaml
Global: {global_batch_size: 1, micro_batch_size: 1}
Engine: {max_steps: 1, logging_freq: 1, eval_freq: 0, save_load: {save_steps: 1, output_dir: $W/ck}}
Model: {vocab_size: 50257, hidden_size: 768, num_layers: 12, num_attention_heads: 12, ffn_hidden_size: 3072, max_position_embeddings: 1024}
Data:
  Train: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 64}}
  Eval: {dataset: {input_dir: $W/lic, split: '1', max_seq_len: 64}}
EOC
	bin/gpt-train -c "$W/c.yaml" >"$W/train.log" 2>&1 || { cat "$W/train.log"; return 1; }
	bin/gpt-export --dtype int8 -o "$W/m8.tar" "$W/ck" 2>/dev/null || { echo "gpt-export failed"; return 1; }
	head -c 390 /usr/share/common-licenses/GPL-3 | tr '\n' ' ' >"$W/p1"
	echo >>"$W/p1"
	for i in 1 2 3 4 5 6 7 8; do cat "$W/p1"; done >"$W/p8"
}
