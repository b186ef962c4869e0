#!/bin/sh
# Builds programs that run lib/cuda's kernels on the CPU under the emulated
# CUDA runtime of this directory (see run.sh), into build/emu/:
#
#   tests/gpu/emu/build.sh test-cuda-ops    a test of tests/gpu (test-*.c)
#   tests/gpu/emu/build.sh gpu-ops          a benchmark of bench/gpu (its --small shapes
#                                           check the program, not the GPU)
#   tests/gpu/emu/build.sh gpt-train        a program of cmd/ (its build/cmd object)
#   EMU_SAN=thread tests/gpu/emu/build.sh test-cuda-ops
#                                           with the kernels and the emulated
#                                           runtime under ThreadSanitizer (into
#                                           build/emu-thread/), or AddressSanitizer
#                                           with EMU_SAN=address (build/emu-address/)
#
# The kernels (build/emu/obj) are rebuilt when a source or header is newer.
# Everything else is the CUDA build's objects (`make CUDA=1` first), but for
# lib/cuda/device.cu, which emu.cpp replaces, and nccl.cu, linked as built
# (NCCL cannot run here: emulated programs use the shm backend).
set -eu
cd "$(dirname "$0")/../../.."
E=tests/gpu/emu
case ${EMU_SAN:-} in
'') B=build/emu SAN= ;;
thread) B=build/emu-thread SAN="-fsanitize=thread" ;;
address) B=build/emu-address SAN="-fsanitize=address,alignment -fno-sanitize-recover=alignment -fno-omit-frame-pointer" ;;
*) echo "emu: EMU_SAN is thread or address, not '$EMU_SAN'" >&2; exit 1 ;;
esac
O=$B/obj
[ -f build/lib/cuda/nccl.cu.o ] || { echo "emu: build with CUDA first (make CUDA=1)"; exit 1; }
mkdir -p "$O"
# GPT_CUDA_GRID_Y=2: kernels with a block per few positions along grid.y
# (attention) launch the small shapes in several slices, as a million
# positions do on a GPU
# (-I$O: the headers of lib/cuda as translated below, ahead of lib's)
CXX="g++ -std=c++20 -O1 -g -pthread -w $SAN -I$E -I$O -Ilib -DGPT_HAVE_CUDA=1 -DGPT_CUDA_GRID_Y=2"
# objects built with other flags are rebuilt
[ "$(cat "$O/flags" 2>/dev/null)" = "$CXX" ] || { rm -f "$O"/*.o; echo "$CXX" >"$O/flags"; }
translate () { # source target: the two CUDA-only forms in the emulation's terms
	sed -e 's/extern __shared__ float sh\[\];/float *sh = emu::dyn_sh;/' \
		-e 's/\([A-Za-z_0-9]*\(<[A-Za-z_0-9, ]*>\)\{0,1\}\)<<<\(.*\)>>>(/emu::launch("\1", \3)(\1)(/' \
		"$1" >"$2"
}
kernel () { # name: translate and compile
	translate "lib/cuda/$1.cu" "$O/$1.cpp"
	$CXX -c "$O/$1.cpp" -o "$O/$1.o"
}
# the headers too (colsum.cuh launches kernels), as cuda/NAME.cuh under $O
mkdir -p "$O/cuda"
for h in lib/cuda/*.cuh; do
	translate "$h" "$O/cuda/$(basename "$h")"
done
stale () { # object sources...: true when the object is missing or older
	o=$1
	shift
	[ -f "$o" ] || return 0
	[ -n "$(find "$@" -newer "$o" 2>/dev/null | head -n 1)" ]
}
HDRS="$(echo lib/cuda/*.cuh) $E/build.sh lib/cuda/cuda.h lib/backend lib/core/core.h $E/cuda_runtime.h $E/cublasLt.h $E/cublas_v2.h $E/cuda_bf16.h $E/cuda_fp16.h $E/mma.h"
pids=
for f in lib/cuda/*.cu; do
	b=$(basename "$f" .cu)
	case $b in device | nccl) continue ;; esac
	# shellcheck disable=SC2086
	stale "$O/$b.o" "$f" $HDRS || continue
	kernel "$b" &
	pids="$pids $!"
	if [ "$(echo $pids | wc -w)" -ge 2 ]; then # two at a time
		for p in $pids; do wait "$p"; done
		pids=
	fi
done
for p in $pids; do wait "$p"; done
# shellcheck disable=SC2086
if stale "$O/emu.o" "$E/emu.cpp" $HDRS; then
	$CXX -c "$E/emu.cpp" -o "$O/emu.o"
fi

OB=$(ls -d /usr/lib/*-linux-gnu/openblas-openmp 2>/dev/null | head -n 1)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
for t in "$@"; do
	src=tests/gpu/$t.c
	[ -f "$src" ] || src=bench/gpu/$t.c
	if [ -f "$src" ]; then
		cc -std=c11 -D_GNU_SOURCE -O1 -g -fopenmp -pthread $SAN -Ilib -DGPT_HAVE_CUDA=1 -DGPT_CUDA_EMU \
			-c "$src" -o "$B/$t.o"
		main=$B/$t.o
	elif [ -f "build/cmd/$t.o" ]; then
		main=build/cmd/$t.o
	else
		echo "emu: no tests/gpu/$t.c, bench/gpu/$t.c or build/cmd/$t.o" >&2
		exit 1
	fi
	# shellcheck disable=SC2046
	g++ -fopenmp -pthread $SAN -o "$B/$t" "$main" "$O"/*.o \
		$(find build/lib -name '*.o' ! -path 'build/lib/cuda/*') build/lib/cuda/nccl.cu.o \
		$(pkg-config --libs yaml-0.1 libarchive libpcre2-8 jansson libxxhash) \
		${OB:+-L$OB -Wl,-rpath,$OB} -lopenblas -lm \
		-L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lnccl -lcudart
done
