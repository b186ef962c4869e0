#!/bin/sh
# tests/gpu/check.sh, the GPU checks bounded in time, and make gpu-pack's
# archive (tests/gpu/pack.sh), without a GPU: stand-in test programs
# (CHECK_BIN) and an nvidia-smi that lists a GPU or none show how each TAP
# outcome is summed up (ok, skipped, failed with the failing tests, stopped
# when the time is out, not started when too little is left), and that the
# summary and the logs land in OUT; the sanitizer stage skipped where
# compute-sanitizer refuses the GPU (a stand-in that does); the profile stage's kernel table from a
# canned Nsight Compute CSV, and NCU=1 bench/gpu/train.sh's ncu command
# lines (a stand-in ncu) and its error where ncu cannot profile; the
# attnsrc stage's summary from a canned per-instruction table; bench/gpu/llmc.sh with a
# stand-in llm.c checkout, and the llmc stage skipped without one; a pack made from a copy of this CUDA
# build unpacks in a copy of the sources without the build, runs from there
# with its libraries, and is refused where the sources differ.
. "$(dirname "$0")/test-lib.sh"

CHECK=$GPT_ROOT/tests/gpu/check.sh

# fake_smi N: an nvidia-smi listing N GPUs first on PATH, and a python3
# without PyTorch (its import takes seconds of the budgets below)
fake_smi () {
	mkdir -p smi &&
	printf "#!/bin/sh\nexit 1\n" >smi/python3 && chmod +x smi/python3 &&
	cat >smi/nvidia-smi <<-EOF &&
	#!/bin/sh
	case "\$*" in
	-L) [ $1 = 0 ] || echo "GPU 0: Stand-in GPU (UUID: GPU-0)" ;;
	*--query-gpu=name\ *) echo "Stand-in GPU" ;;
	*) echo "Stand-in GPU, 1 MiB" ;;
	esac
	EOF
	chmod +x smi/nvidia-smi
}

test_expect_success 'an unknown stage is a usage error that lists the stages' '
	test_expect_code 64 sh "$CHECK" ops bogus 2>err &&
	test_grep "no stage .bogus. \(stages: probe ops kernels attnprof attnsrc comm" err
'

test_expect_success 'no GPU: the probe says so, nothing else runs, exit 0' '
	fake_smi 0 &&
	PATH=$PWD/smi:$PATH OUT=$PWD/o0 sh "$CHECK" >out &&
	test_grep "^probe +SKIP +no GPU \(nvidia-smi lists none\); the programs load: gpt-train" out &&
	test_line_count = 1 o0/summary.txt &&
	tar -tzf o0/logs.tar.gz >logs && test_grep probe.log logs
'

test_expect_success 'each TAP outcome in the summary; a failure fails the run' '
	fake_smi 1 && mkdir tb &&
	printf "#!/bin/sh\necho 1..3; echo ok 1; echo ok 2 - b \\# skip none; echo ok 3\n" >tb/test-cuda-ops &&
	printf "#!/bin/sh\necho \"1..0 # SKIP no cast here\"\n" >tb/test-cuda-cast &&
	printf "#!/bin/sh\necho 1..2; echo ok 1; echo not ok 2 - int8 rows\n" >tb/test-cuda-qgemm &&
	printf "#!/bin/sh\necho 1..2; echo ok 1; exit 3\n" >tb/test-comm-stage &&
	chmod +x tb/* &&
	test_expect_code 1 env PATH=$PWD/smi:$PATH CHECK_BIN=$PWD/tb OUT=$PWD/o1 sh "$CHECK" ops comm >out &&
	test_grep "^probe +ok +Stand-in GPU x1; gpt-train" o1/summary.txt &&
	test_grep "^test-cuda-ops +ok +3/3 \(1 skipped\), [0-9]+s$" o1/summary.txt &&
	test_grep "^test-cuda-cast +SKIP +no cast here, " o1/summary.txt &&
	test_grep "^test-cuda-qgemm +FAIL +1 of 2 failed, 2 ran, exit 0, " o1/summary.txt &&
	test_grep "^    not ok 2 - int8 rows$" o1/summary.txt &&
	test_grep "^test-comm-stage +FAIL +0 of 2 failed, 1 ran, exit 3, " o1/summary.txt &&
	test_grep "^test-comm-nccl +FAIL .*exit 12[67]" o1/summary.txt &&
	! grep -q "^t40" o1/summary.txt &&
	tail -n $(wc -l <o1/summary.txt) out >tail && test_cmp o1/summary.txt tail &&
	tar -xzf o1/logs.tar.gz ./test-cuda-qgemm.log && test_grep "^not ok 2" test-cuda-qgemm.log
'

test_expect_success 'a program past the time is stopped; one that no longer fits does not start' '
	printf "#!/bin/sh\necho 1..2; echo ok 1; exec sleep 60\n" >tb/test-comm-stage &&
	test_expect_code 1 env PATH=$PWD/smi:$PATH CHECK_BIN=$PWD/tb OUT=$PWD/o2 CHECK_SECONDS=18 \
		sh "$CHECK" comm >out &&
	test_grep "^test-comm-stage +STOP +out of time after 1 of 2 tests, 0 failed, (1[5-9]|2[0-3])s$" o2/summary.txt &&
	test_grep "^test-comm-nccl +SKIP +[0-3]s left, it needs 15s$" o2/summary.txt
'

cat >ncu.csv <<'EOF'
==PROF== Connected to process 7 (bin/gpt-train)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum"
"","","","","","","","","","","","nsecond"
"0","7","gpt-train","h","void attn_fwd<(int)64, true>(const float *, int)","1","7","(128, 1, 1)","(8, 12, 32)","0","9.0","1,200,000"
"1","7","gpt-train","h","nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTT","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","5,000,000"
"2","7","gpt-train","h","void attn_fwd<(int)64, true>(const float *, int)","1","7","(128, 1, 1)","(8, 12, 32)","0","9.0","1,400,000"
"3","7","gpt-train","h","layernorm_fwd(const __nv_bfloat16 *, float *)","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","500,000"
EOF

test_expect_success 'the sanitizer stage skips where compute-sanitizer refuses the GPU' '
	fake_smi 1 &&
	cat >smi/compute-sanitizer <<-\EOF &&
	#!/bin/sh
	echo "========= Error: Device not supported"
	echo "========= Error: process didn'"'"'t terminate successfully"
	exit 1
	EOF
	chmod +x smi/compute-sanitizer &&
	PATH=$PWD/smi:$PATH OUT=$PWD/o3 sh "$CHECK" sanitizer >out &&
	test_grep "^t4062 +SKIP +compute-sanitizer cannot check this GPU here: =+ Error: Device not supported, [0-9]+s$" \
		o3/summary.txt
'

test_expect_success 'kernel_table.py: launches by kernel, per step, the heaviest first' '
	python3 "$GPT_ROOT/bench/gpu/kernel_table.py" ncu.csv 2 2 >table &&
	cat >want <<-\EOF &&
	kernel (per step of 2)                                    launches        ms   share
	nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTT                      0.5     2.500   61.7%
	attn_fwd<(int)64, true>                                        1.0     1.300   32.1%
	(1 more kernels)                                               0.5     0.250    6.2%
	all kernels                                                    2.0     4.050  100.0%
	EOF
	test_cmp want table &&
	head -n 3 ncu.csv >empty.csv && test_expect_code 1 python3 "$GPT_ROOT/bench/gpu/kernel_table.py" empty.csv 1
'

test_expect_success 'NCU=1 bench/gpu/train.sh: the row trains under ncu and prints its kernel table' '
	fake_smi 1 &&
	printf "#!/bin/sh\necho \"\$*\" >>\"$PWD/ncu.args\"\ncase \"\$1\" in --import) cat \"$PWD/ncu.csv\" ;; esac\n" >smi/ncu &&
	chmod +x smi/ncu &&
	PYTHON=$(command -v python3) PATH=$PWD/smi:$PATH NCU=1 ONLY="124M bf16 (12x768, B32" \
		sh "$GPT_ROOT/bench/gpu/train.sh" >out &&
	test_grep "^== 124M bf16 \(12x768, B32 T1024\): kernel time under ncu$" out &&
	test_grep "^all kernels +1.3 +2.700 +100.0%$" out &&
	test_grep "^--metrics gpu__time_duration.sum --clock-control none --cache-control none .* -o [^ ]*/prof bin/gpt-train .*-o Engine.max_steps=3 " ncu.args &&
	test_grep " -o Engine.num_train_epochs=1000000 .* -o Engine.save_load.save_epoch=0 -o Engine.save_load.output_dir=[^ ]*/out " ncu.args &&
	test_grep "^--import [^ ]*/prof.ncu-rep --page raw --csv --print-units base$" ncu.args
'

test_expect_success 'NCU=1 where ncu cannot profile: its error, and the run fails' '
	cat >smi/ncu <<-\EOF &&
	#!/bin/sh
	case "$1" in
	--import) echo "==ERROR== no such report" >&2; exit 1 ;;
	*) echo "==ERROR== Failed to initialize the profiler: LibraryNotLoaded" ;;
	esac
	EOF
	test_expect_code 1 env PYTHON=$(command -v python3) PATH=$PWD/smi:$PATH NCU=1 \
		ONLY="124M bf16 (12x768, B32" sh "$GPT_ROOT/bench/gpu/train.sh" >out &&
	test_grep "^==ERROR== Failed to initialize the profiler: LibraryNotLoaded$" out &&
	test_grep "^ncu.s report could not be read: ==ERROR== no such report$" out
'

# a canned per-instruction table, as Nsight Compute's source page gives it:
# a stretch run 24576 times (4 + 1 samples), one run 184320 times (90 + 5),
# the stall reasons in their columns
test_expect_success 'bench/gpu/attnsrc.sh --csv: samples by reason, opcode and stretch, no GPU' '
	cat >sass.csv <<-\EOF &&
	"Kernel Name","tc_fwd_kernel"
	"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","stall_barrier","stall_math","stall_math (Not Issued)"
	"0x10","LDC R1, c[0x0][0x28]","4","1","24,576","4","0","0"
	"0x20","@P0 BRA 0x40","1","1","24,576","1","0","0"
	"0x30","HMMA.16816.F32.BF16 R4, R8, R12, R4","90","60","184,320","0","90","60"
	"0x40","MUFU.EX2 R3, R3","5","0","184,320","0","5","0"
	EOF
	gzip -k sass.csv &&
	sh "$GPT_ROOT/bench/gpu/attnsrc.sh" --csv sass.csv.gz >out &&
	test_grep "^instructions: 4, samples: 100$" out &&
	test_grep "^samples by reason: stall_math 95.0%, stall_barrier 5.0%$" out &&
	test_grep "^samples by opcode: HMMA 90.0%, MUFU 5.0%, LDC 4.0%, BRA 1.0%$" out &&
	test_grep "^ *0-1 .* 2 instr  ran      24576    5.0%  from LDC R1" out &&
	test_grep "^ *2-3 .* 2 instr  ran     184320   95.0%  from HMMA" out &&
	test_grep "0x30 90.00%  HMMA.16816.F32.BF16 R4, R8, R12, R4 .* stall_math 90$" out &&
	test_expect_code 64 sh "$GPT_ROOT/bench/gpu/attnsrc.sh" --csv missing.csv >out &&
	test_grep "^attnsrc: --csv wants the per-instruction table" out
'

# a stand-in llm.c checkout: its make writes a train_gpt2cu that checks the
# data file's header and size and prints llm.c's step lines, 50 ms a step
# after two slower ones
test_expect_success 'bench/gpu/llmc.sh: llm.c built from a copy, its step times to tokens/s' '
	mkdir -p llmc && : >llmc/train_gpt2.cu &&
	cat >llmc/train_gpt2cu.in <<-\EOF &&
	#!/bin/sh
	echo "$*" >>../args
	python3 -c "import array, os
	h = array.array(\"i\"); f = open(\"train.bin\", \"rb\"); h.fromfile(f, 256)
	assert h[0] == 20240520 and h[1] == 1 and os.path.getsize(\"train.bin\") == 1024 + 2 * h[2]" || exit 3
	for s in 1 2 3 4; do
		ms=50.00; [ $s -gt 2 ] || ms=900.00
		echo "step    $s/4 | loss 10.9 (+0.00z)| norm 1.0 (+0.00z)| lr 6.00e-04 | $ms ms | 1.0% bf16 MFU | 1 tok/s"
	done
	EOF
	printf "train_gpt2cu:\n\techo \$(PRECISION) \$(NO_MULTI_GPU) \$(USE_CUDNN) >made\n\tcp train_gpt2cu.in train_gpt2cu && chmod +x train_gpt2cu\n" >llmc/Makefile &&
	(cd llmc && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm llmc) &&
	env LLMC_DIR=$PWD/llmc STEPS=4 TMPDIR=$PWD sh "$GPT_ROOT/bench/gpu/llmc.sh" >out &&
	test_grep "^llm.c [0-9a-f]+, train_gpt2cu in bf16 with its own attention kernels$" out &&
	test_grep "^124M bf16 \(12x768, B32 T1024\) +655360 +" out &&
	test_grep "^124M bf16 \(12x768, B64 T1024\) +1310720 +" out &&
	test_grep "^-i train.bin -j val.bin -e d12 -b 32 -t 1024 -d 32768 -x 4 .* -r 0 -z 0 " args &&
	test ! -e llmc/made && test ! -e llmc/train_gpt2cu &&
	test_expect_code 66 env LLMC_DIR=$PWD sh "$GPT_ROOT/bench/gpu/llmc.sh" >out &&
	test_grep "has no train_gpt2.cu: LLMC_DIR must be an llm.c checkout" out
'

test_expect_success 'the llmc stage skips without LLMC_DIR' '
	env -u LLMC_DIR PATH=$PWD/smi:$PATH CHECK_BIN=$PWD/tb OUT=$PWD/o5 sh "$CHECK" llmc >out &&
	test_grep "^llmc +SKIP +LLMC_DIR names no llm.c checkout$" o5/summary.txt
'

# a copy of this CUDA build: the sources, the packed programs, the object
# that marks a CUDA build
copy_build () {
	mkdir -p "$1" &&
	(cd "$GPT_ROOT" && tar -cf - Makefile lib/*/ cmd tests configs bench $2) | tar -xf - -C "$1"
}
PROGS="bin/gpt-* build/tests/gpu/test-cuda-ops build/tests/gpu/test-cuda-cast build/tests/gpu/test-cuda-qgemm
	build/tests/gpu/test-comm-stage build/tests/gpu/test-comm-nccl tests/helper/test-tool"
[ -f "$GPT_ROOT/build/lib/cuda/nccl.cu.o" ] && [ -x "$GPT_ROOT/build/tests/gpu/test-cuda-ops" ] &&
	test_set_prereq CUDA_BUILD

test_expect_success CUDA_BUILD 'make gpu-pack: the programs with their libraries, glibc and CUDA left out' '
	copy_build b "bin build/lib/cuda/nccl.cu.o build/tests/gpu" &&
	(cd b && GPU_PACK_XZ=-0 sh tests/gpu/pack.sh $PROGS >../pack.out) &&
	test_grep "^gpu-pack: .gpu-pack/gptkit-gpu.tar.xz \([0-9]+ KiB\): 13 programs and tests" pack.out &&
	xz -dc b/.gpu-pack/gptkit-gpu.tar.xz | tar -tf - >list &&
	test_grep "^bin/gpt-train$" list && test_grep "^build/tests/gpu/test-cuda-ops$" list &&
	test_grep "^.gpu-pack/lib/libyaml-0.so.2$" list && test_grep "^.gpu-pack/lib/libcudart.so" list &&
	test_grep "^.gpu-pack/SOURCES$" list &&
	! grep -E "/(libc|libm|libstdc\+\+|libcublas|libcublasLt|libnccl)\.so" list
'

test_expect_success CUDA_BUILD 'the pack runs in a copy of the sources without the build' '
	fake_smi 0 && copy_build d "" && cp -r b/.gpu-pack d/ &&
	test ! -e d/bin && rm -f d/lib/libgpt.a &&
	PATH=$PWD/smi:$PATH OUT=$PWD/o3 sh d/tests/gpu/check.sh layouts >out &&
	test -x d/bin/gpt-train && test -x d/build/tests/gpu/test-cuda-ops &&
	test_grep "^probe +SKIP +no GPU" o3/summary.txt &&
	tar -xzf o3/logs.tar.gz ./probe.log &&
	test_grep "^LD_LIBRARY_PATH=$PWD/d/.gpu-pack/lib" probe.log
'

test_expect_success CUDA_BUILD 'a pack from other sources is refused' '
	echo "/* changed */" >>d/lib/core/core.h &&
	test_expect_code 1 env PATH=$PWD/smi:$PATH OUT=$PWD/o4 sh d/tests/gpu/check.sh >out &&
	test_grep "^probe +FAIL +the pack was built from other sources than this tree.s: make gpu-pack again" out
'

test_done
