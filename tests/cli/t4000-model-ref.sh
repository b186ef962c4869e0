#!/bin/sh
# The GPT model against PyTorch (tests/ref): logits, loss, every gradient and
# the weights after 3 AdamW steps with clipping, from the same weights and
# batch, the fused classifier in one block and in several; and every
# recompute granularity gives bit-identical results.
. "$(dirname "$0")/test-lib.sh"

REF="$GPT_ROOT/tests/ref"
PY=/usr/bin/python3

test_expect_success TORCH 'tiny GPT matches PyTorch (fp32 vs float64 reference)' '
	$PY "$REF/make_input.py" in.safetensors &&
	test-tool model-ref in.safetensors ours.safetensors 2>mem-none &&
	$PY "$REF/gpt_ref.py" in.safetensors ref.safetensors &&
	$PY "$REF/compare.py" ref.safetensors ours.safetensors >report &&
	cat report
'

test_expect_success TORCH 'a wider model, one layer, no clipping, padded vocabulary of 256' '
	$PY "$REF/make_input.py" in2.safetensors layers=1 hidden=64 heads=8 ffn=96 vocab=200 padded_vocab=256 batch=2 seq=16 grad_clip=0 seed=7 &&
	test-tool model-ref in2.safetensors ours2.safetensors &&
	$PY "$REF/gpt_ref.py" in2.safetensors ref2.safetensors &&
	$PY "$REF/compare.py" ref2.safetensors ours2.safetensors
'

test_expect_success TORCH "the classifier in blocks of 5 of the 36 token rows (the last one short)" '
	$PY "$REF/make_input.py" in-blocks.safetensors head_rows=5 &&
	test-tool model-ref in-blocks.safetensors ours-blocks.safetensors 2>mem-blocks &&
	$PY "$REF/compare.py" ref.safetensors ours-blocks.safetensors &&
	none=$(sed -n "s/activations: \([0-9]*\) bytes/\1/p" mem-none) &&
	this=$(sed -n "s/activations: \([0-9]*\) bytes/\1/p" mem-blocks) &&
	echo "activations: one block $none, blocks of 5 $this" &&
	test "$this" -lt "$none"
'

for r in full only_attn core_attn; do
	test_expect_success TORCH "recompute $r gives bit-identical results" '
		$PY "$REF/make_input.py" in-$r.safetensors recompute='$r' &&
		test-tool model-ref in-$r.safetensors ours-$r.safetensors 2>mem-$r &&
		cmp ours.safetensors ours-$r.safetensors &&
		none=$(sed -n "s/activations: \([0-9]*\) bytes/\1/p" mem-none) &&
		this=$(sed -n "s/activations: \([0-9]*\) bytes/\1/p" mem-$r) &&
		echo "activations: none $none, '$r' $this" &&
		test "$this" -lt "$none"
	'
done

test_expect_success TORCH 'the comparison can fail: a perturbed result is caught' '
	$PY -c "
import sys; sys.path.insert(0, \"$REF\")
from gpt_ref import load_safetensors, save_safetensors
t, _ = load_safetensors(\"ours.safetensors\")
t[\"grad.h.1.mlp.fc.weight\"][0, 0] += 1e-3
save_safetensors(\"bad.safetensors\", t)" &&
	test_expect_code 1 $PY "$REF/compare.py" ref.safetensors bad.safetensors
'

test_done
