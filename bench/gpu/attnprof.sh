#!/bin/sh
# Why the tensor-core attention kernels take the time they take: Nsight
# Compute's full set of sections for each of them once (build/bench/gpu-ops
# at the 124M shape, attention only, without dropout and with 0.1; the
# forward, dq and dkv kernels), then a table a row per kernel: time,
# registers, achieved occupancy, issue slots and tensor pipe busy, L2 hit
# rate, memory and shared memory throughput, and its five longest stall
# reasons (cycles a warp waits on each between two instructions). The full
# report, its details page and its raw metrics (CSV) are left in
# ATTNPROF_DIR (default build/attnprof) for reading off the device.
# tests/gpu/check.sh runs this as its attnprof stage. DTYPE=fp16 for fp16.
# Other kernels the same way: ATTNPROF_ONLY, gpu-ops' ops whose names
# begin with it (default attention), and ATTNPROF_KERNELS, a regular
# expression for the kernels' names (default ^tc_); the table's columns
# mean the same for any kernel (tensor% is 0 where none runs).
#   sh bench/gpu/attnprof.sh
#   ATTNPROF_ONLY=xent ATTNPROF_KERNELS=^xent sh bench/gpu/attnprof.sh
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
D=${DTYPE:-bf16}
W=${ATTNPROF_DIR:-build/attnprof}
NAME=attnprof
. bench/gpu/lib-ncu.sh
ncu_setup "$W" || exit 1
"$NCU_BIN" --set full --clock-control none --import-source no --kernel-name regex:"${ATTNPROF_KERNELS:-^tc_}" -f -o "$W/attn" \
	build/bench/gpu-ops "$D" --shape 124M --only "${ATTNPROF_ONLY:-attention}" --once >"$W/run.log" 2>&1 ||
	{ tail -n 20 "$W/run.log"; exit 1; }
# --print-details all (the sections' tables and charts too) where this ncu has it
"$NCU_BIN" --import "$W/attn.ncu-rep" --print-details all >"$W/details.txt" 2>&1 ||
	"$NCU_BIN" --import "$W/attn.ncu-rep" >"$W/details.txt" 2>&1
"$NCU_BIN" --import "$W/attn.ncu-rep" --page raw --csv --print-units base >"$W/raw.csv" 2>"$W/raw.err" ||
	{ cat "$W/raw.err"; exit 1; }
$PY - "$W/raw.csv" <<'EOF'
import csv, re, sys

rows = list(csv.reader(open(sys.argv[1])))
# the header row is the one naming the kernels; the next gives the units
h = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
head, data = rows[h], [r for r in rows[h + 2:] if len(r) == len(rows[h])]
col = {n: i for i, n in enumerate(head)}


def get(r, name, scale=1.0, fmt="%.1f"):
    i = col.get(name)
    if i is None or r[i] in ("", "n/a"):
        return "-"
    try:
        return fmt % (float(r[i].replace(",", "")) * scale)
    except ValueError:
        return r[i]


stall = [(m.group(1), i) for n, i in col.items()
         for m in [re.match(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$", n)] if m]
print("%-40s %8s %5s %6s %6s %6s %6s %6s %6s" % ("kernel", "us", "regs", "occ%", "issue%", "tensor%",
                                                 "L2hit%", "dram%", "shm%"))
for r in data:
    name = r[col["Kernel Name"]]
    name = re.sub(r"^void |\(.*", "", name).replace("__nv_bfloat16", "bf16").replace("__half", "fp16")
    print("%-40s %8s %5s %6s %6s %6s %6s %6s %6s" % (
        name[:40], get(r, "gpu__time_duration.sum", 1e-3),
        get(r, "launch__registers_per_thread", fmt="%.0f"),
        get(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        get(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
        get(r, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
        get(r, "lts__t_sector_hit_rate.pct"),
        get(r, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        get(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed")))
    s = []
    for reason, i in stall:
        try:
            s.append((float(r[i].replace(",", "")), reason))
        except ValueError:
            pass
    s.sort(reverse=True)
    print("    stalls (cycles an instruction): " +
          (", ".join("%s %.1f" % (n, v) for v, n in s[:5]) if s else "none in the report"))
EOF
