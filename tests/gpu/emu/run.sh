#!/bin/sh
# Runs tests/gpu/test-cuda-ops.c on the CPU, lib/cuda's kernels under an
# emulation of the CUDA runtime (cuda_runtime.h here: every CUDA thread a
# std::thread, blocks one after another, __syncthreads and warp shuffles as
# barriers; cublasLt.h: a naive GEMM), at small shapes (-DGPT_CUDA_EMU).
# For machines without a GPU: it checks the kernels' indexing, tiling,
# shuffles and barriers against the CPU backend, not the GPU's arithmetic,
# memory model or speed; only `make test-gpu` on a GPU does. Slow: minutes
# per dtype. Needs a CUDA build (`make CUDA=1`) for the library objects.
#
#   tests/gpu/emu/run.sh [fp32|bf16|fp16]      one dtype, or all three
#   EMU_LT_FOUND=0 tests/gpu/emu/run.sh        the cuBLAS fallback for GEMMs
#
# Kernel files must launch as NAME<<<CONFIG>>>(ARGS) on one line and name
# their dynamic shared memory `extern __shared__ float sh[]`: the script
# rewrites those two forms for g++.
set -eu
cd "$(dirname "$0")/../../.."
E=tests/gpu/emu
[ -f build/lib/cuda/nccl.cu.o ] || { echo "emu: build with CUDA first (make CUDA=1)"; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
CXX="g++ -std=c++20 -O1 -g -pthread -w -I$E -Ilib -DGPT_HAVE_CUDA=1"
for f in lib/cuda/*.cu; do
	b=$(basename "$f" .cu)
	case $b in device | nccl) continue ;; esac
	sed -e 's/extern __shared__ float sh\[\];/float *sh = emu::dyn_shared;/' \
		-e 's/\([A-Za-z_0-9]*\(<[A-Za-z_0-9]*>\)\{0,1\}\)<<<\(.*\)>>>(/emu::launch(\3)(\1)(/' \
		"$f" >"$W/$b.cpp"
	$CXX -c "$W/$b.cpp" -o "$W/$b.o"
done
$CXX -c "$E/emu.cpp" -o "$W/emu.o"
cc -std=c11 -D_GNU_SOURCE -O1 -g -fopenmp -pthread -Ilib -DGPT_HAVE_CUDA=1 -DGPT_CUDA_EMU \
	-c tests/gpu/test-cuda-ops.c -o "$W/test.o"
OB=$(ls -d /usr/lib/*-linux-gnu/openblas-openmp 2>/dev/null | head -n 1)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck disable=SC2046
g++ -fopenmp -pthread -o "$W/test-cuda-ops" "$W"/*.o \
	$(find build/lib -name '*.o' ! -path 'build/lib/cuda/*') build/lib/cuda/nccl.cu.o \
	$(pkg-config --libs yaml-0.1 libarchive libpcre2-8 jansson libxxhash) \
	${OB:+-L$OB -Wl,-rpath,$OB} -lopenblas -lm \
	-L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lnccl -lcudart
if [ $# -gt 0 ]; then
	GPT_TEST_DTYPE=$1 "$W/test-cuda-ops"
else
	"$W/test-cuda-ops"
fi
