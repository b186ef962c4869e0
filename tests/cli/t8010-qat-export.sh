#!/bin/sh
# gpt-export --dtype int8 of a quantization-aware training checkpoint: the
# int8 codes are exactly training's fake-quantized weights, the activation
# scales travel in the bundle, gpt-infer uses both, and a post-training int8
# export of a model trained without QAT stays weight-only.
. "$(dirname "$0")/test-lib.sh"

train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
		-o Global.micro_batch_size=8 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
		-o Optimizer.lr.decay_steps=100 -o Optimizer.lr.warmup_rate=0.02 "$@"
}

# st_list FILE: "name DTYPE [shape]" of every tensor, "__metadata__ key=value" of the metadata
st_list () {
	python3 -c "
import json, struct, sys
f = open(sys.argv[1], \"rb\")
n = struct.unpack(\"<Q\", f.read(8))[0]
h = json.loads(f.read(n))
for k, v in h.items():
    if k == \"__metadata__\":
        for mk, mv in v.items():
            print(k, \"%s=%s\" % (mk, mv))
    else:
        print(k, v[\"dtype\"], v[\"shape\"])
" "$1"
}

# stlib.py: load(FILE) -> (header, data) of a safetensors file, f32(x) rounds
# to fp32, arr(header, data, NAME) -> the tensor as a list
cat >stlib.py <<'EOF'
import json, struct
def load(fn):
    f = open(fn, "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    return json.loads(f.read(n)), f.read()
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]
def arr(h, d, k):
    a, b = h[k]["data_offsets"]
    fmt = {"F32": "f", "I8": "b"}[h[k]["dtype"]]
    return list(struct.unpack("<%d%s" % ((b - a) // struct.calcsize(fmt), fmt), d[a:b]))
EOF

test_expect_success 'set up: a byte model (100 steps), QAT fine-tuned 20 steps' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* 2>/dev/null &&
	train -o Engine.max_steps=100 -o Engine.save_load.save_steps=100 \
		-o Engine.save_load.output_dir=base >base.log 2>&1 &&
	train -o Engine.max_steps=120 -o Engine.save_load.save_steps=120 \
		-o Engine.save_load.ckpt_dir=base -o Quantization.enable=True \
		-o Engine.save_load.output_dir=q >q.log 2>&1 &&
	test -f q/step_00000120/index.json
'

test_expect_success 'int8 of the QAT checkpoint: learned scales recorded, manifest says qat' '
	gpt-export --dtype int8 -o q8.tar q 2>/dev/null &&
	tar -xOf q8.tar manifest.json >man &&
	python3 -c "
import json
q = json.load(open(\"man\"))[\"quantization\"]
assert q == {\"method\": \"qat\", \"weight_bits\": 8, \"weight_quantize_type\": \"channel_wise_abs_max\",
             \"activation_bits\": 8, \"activation_quantize_type\": \"moving_average_abs_max\"}, q
" &&
	tar -xf q8.tar model.safetensors &&
	st_list model.safetensors >list &&
	test_grep "^__metadata__ activation_bits=8$" list &&
	test "$(grep -c "input_scale F32 \[1\]$" list)" = 8 &&
	test_grep "^h\.0\.attn\.qkv\.weight I8 \[3, 64, 64\]$" list &&
	test_grep "^h\.0\.attn\.qkv\.weight\.scale F32 \[192\]$" list
'

test_expect_success 'the int8 codes are fq(W) of the checkpoint weights, and the input scales its scales' '
	gpt-ckpt-merge --consolidate --weights-only q c.safetensors 2>/dev/null &&
	python3 -c "
import math
from stlib import load, f32, arr
ch, cd = load(\"c.safetensors\")
bh, bd = load(\"model.safetensors\")
for l in (0, 1):
    for k in (\"attn.qkv\", \"attn.proj\", \"mlp.fc\", \"mlp.proj\"):
        name = \"h.%d.%s.weight\" % (l, k)
        w, q, st = arr(ch, cd, name), arr(bh, bd, name), arr(bh, bd, name + \".scale\")
        cols = ch[name][\"shape\"][-1]
        for r in range(len(w) // cols):
            row = w[r * cols:(r + 1) * cols]
            s = max(abs(v) for v in row)
            inv, step = f32(127.0 / s), f32(s / 127.0)
            for c, v in enumerate(row):
                x = f32(max(-s, min(s, v)) * inv)
                code = math.copysign(math.floor(abs(x) + 0.5), x)  # half away from zero
                assert q[r * cols + c] == code, (name, r, c, q[r * cols + c], code)
            assert st[r] == step, (name, r, st[r], step)
        a = arr(bh, bd, \"h.%d.%s.input_scale\" % (l, k))[0]
        b = arr(ch, cd, \"qat.h.%d.%s.scale\" % (l, k))[0]
        assert a == b, (l, k, a, b)
print(\"ok\")
"
'

test_expect_success 'weight PACT: the int8 codes are fq(clip(W, weight_alpha))' '
	train -o Engine.max_steps=110 -o Engine.save_load.save_steps=110 \
		-o Engine.save_load.ckpt_dir=base -o Quantization.enable=True \
		-o Quantization.weight_preprocess_type=PACT -o Quantization.pact_init_value=0.08 \
		-o Quantization.pact_lr_multiplier=1 \
		-o Engine.save_load.output_dir=qw >qw.log 2>&1 &&
	gpt-export --dtype int8 -o qw8.tar qw 2>/dev/null &&
	tar -xOf qw8.tar model.safetensors >mw.safetensors &&
	! st_list mw.safetensors | grep input_clip &&
	rm -f cw.safetensors && gpt-ckpt-merge --consolidate --weights-only qw cw.safetensors 2>/dev/null &&
	python3 -c "
import math
from stlib import load, f32, arr
ch, cd = load(\"cw.safetensors\")
bh, bd = load(\"mw.safetensors\")
clipped = 0
for l in (0, 1):
    for k in (\"attn.qkv\", \"attn.proj\", \"mlp.fc\", \"mlp.proj\"):
        name = \"h.%d.%s.weight\" % (l, k)
        a = arr(ch, cd, \"qat.h.%d.%s.weight_alpha\" % (l, k))[0]
        w, q = arr(ch, cd, name), arr(bh, bd, name)
        cols = ch[name][\"shape\"][-1]
        for r in range(len(w) // cols):
            row = [max(-a, min(a, v)) for v in w[r * cols:(r + 1) * cols]]
            clipped += sum(1 for v in w[r * cols:(r + 1) * cols] if abs(v) > a)
            s = max(abs(v) for v in row)
            inv = f32(127.0 / s)
            for c, v in enumerate(row):
                x = f32(v * inv)
                assert q[r * cols + c] == math.copysign(math.floor(abs(x) + 0.5), x), (name, r, c)
assert clipped > 0, \"no weight reached its alpha\"
print(\"ok,\", clipped, \"weights clipped\")
"
'

test_expect_success 'activation PACT: the bundle carries each alpha as input_clip, and gpt-infer runs it' '
	train -o Engine.max_steps=110 -o Engine.save_load.save_steps=110 \
		-o Engine.save_load.ckpt_dir=base -o Quantization.enable=True \
		-o Quantization.activation_preprocess_type=PACT -o Quantization.pact_init_value=3 \
		-o Engine.save_load.output_dir=qa >qa.log 2>&1 &&
	gpt-export --dtype int8 -o qa8.tar qa 2>/dev/null &&
	tar -xOf qa8.tar model.safetensors >ma.safetensors &&
	st_list ma.safetensors >alist &&
	test "$(grep -c "input_clip F32 \[1\]$" alist)" = 8 &&
	rm -f ca.safetensors && gpt-ckpt-merge --consolidate --weights-only qa ca.safetensors 2>/dev/null &&
	python3 -c "
from stlib import load, arr
def one(h, d, k):
    return arr(h, d, k)[0]
ch, cd = load(\"ca.safetensors\")
bh, bd = load(\"ma.safetensors\")
for l in (0, 1):
    for k in (\"attn.qkv\", \"attn.proj\", \"mlp.fc\", \"mlp.proj\"):
        assert one(bh, bd, \"h.%d.%s.input_clip\" % (l, k)) == one(ch, cd, \"qat.h.%d.%s.act_alpha\" % (l, k))
" &&
	cat /usr/share/common-licenses/MPL-2.0 >held-a.txt &&
	gpt-infer -m qa --ppl held-a.txt >pa32 &&
	gpt-infer -m qa8.tar --ppl held-a.txt >pa8 &&
	a=$(sed -n "s/^perplexity: \([0-9.]*\),.*/\1/p" pa32) &&
	b=$(sed -n "s/^perplexity: \([0-9.]*\),.*/\1/p" pa8) &&
	echo "PACT checkpoint (fp32, no quantizers) $a, its int8 bundle $b" &&
	test "$(echo "r = $b / $a; r > 0.98 && r < 1.02" | bc -l)" = 1
'

test_expect_success 'post-training int8 of the model trained without QAT: weights only' '
	gpt-export --dtype int8 -o b8.tar base 2>/dev/null &&
	tar -xOf b8.tar manifest.json >bman &&
	test_grep "\"method\": \"post-training\"" bman &&
	tar -xOf b8.tar model.safetensors >b.safetensors &&
	st_list b.safetensors >blist &&
	! grep input_scale blist
'

test_expect_success 'gpt-infer runs the QAT int8 bundle: its perplexity within 2% of the QAT checkpoint' '
	cat /usr/share/common-licenses/MPL-2.0 >held.txt &&
	gpt-infer -m q --ppl held.txt >p32 &&
	gpt-infer -m q8.tar --ppl held.txt >p8 &&
	gpt-infer -m b8.tar --ppl held.txt >pb8 &&
	a=$(sed -n "s/^perplexity: \([0-9.]*\),.*/\1/p" p32) &&
	b=$(sed -n "s/^perplexity: \([0-9.]*\),.*/\1/p" p8) &&
	echo "QAT checkpoint (fp32, no quantizers) $a, QAT int8 bundle $b, post-training int8 $(cat pb8)" &&
	test "$(echo "r = $b / $a; r > 0.98 && r < 1.02" | bc -l)" = 1 &&
	gpt-infer -m q8.tar -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=10 \
		"Everyone is" >gen &&
	test_line_count = 1 gen
'

test_expect_success 'at 4 bits the bundle holds 4-bit codes, and the quantized inputs change the result' '
	train -o Engine.max_steps=110 -o Engine.save_load.save_steps=110 \
		-o Engine.save_load.ckpt_dir=base -o Quantization.enable=True \
		-o Quantization.weight_bits=4 -o Quantization.activation_bits=4 \
		-o Quantization.weight_quantize_type=abs_max -o Engine.save_load.output_dir=q4 >q4.log 2>&1 &&
	gpt-export --dtype int8 -o q4.tar q4 2>/dev/null &&
	tar -xOf q4.tar model.safetensors >m4.safetensors &&
	python3 -c "
import json, struct
f = open(\"m4.safetensors\", \"rb\")
n = struct.unpack(\"<Q\", f.read(8))[0]
h = json.loads(f.read(n)); d = f.read()
a, b = h[\"h.1.mlp.fc.weight\"][\"data_offsets\"]
q = struct.unpack(\"<%db\" % (b - a), d[a:b])
assert max(abs(v) for v in q) == 7, max(q)
a, b = h[\"h.1.mlp.fc.weight.scale\"][\"data_offsets\"]
s = struct.unpack(\"<%df\" % ((b - a) // 4), d[a:b])
assert len(set(s)) == 1, \"abs_max: one scale for the whole tensor\"
a, b = h[\"wte\"][\"data_offsets\"]
q = struct.unpack(\"<%db\" % (b - a), d[a:b])
assert max(abs(v) for v in q) == 127, \"wte (not fake-quantized) stays 8-bit per row\"
" &&
	gpt-infer -m q4 --ppl held.txt >c4 &&
	gpt-infer -m q4.tar --ppl held.txt >b4 &&
	cat c4 b4 &&
	! test_cmp c4 b4
'

test_expect_success 'gpt-infer takes the stored codes: int8 in memory gives the fp32-dequantized result' '
	gpt-infer -m q4.tar --dtype fp32 --ppl held.txt >f4 &&
	cat f4 &&
	test_cmp b4 f4
'

test_expect_success 'more than 8 weight bits cannot go to int8' '
	train -o Engine.max_steps=102 -o Engine.save_load.save_steps=102 \
		-o Engine.save_load.ckpt_dir=base -o Quantization.enable=True \
		-o Quantization.weight_bits=10 -o Engine.save_load.output_dir=q10 >q10.log 2>&1 &&
	test_expect_code 64 gpt-export --dtype int8 -o q10.tar q10 2>err &&
	test_grep "Quantization.weight_bits 10, more than int8 holds" err &&
	gpt-export -o q10-fp32.tar q10 2>/dev/null
'

test_done
