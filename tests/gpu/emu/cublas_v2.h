/* For tests/gpu/emu/run.sh: the cuBLAS header is the emulated cuBLASLt one. */
#pragma once
#include "cublasLt.h"
