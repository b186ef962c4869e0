#!/bin/sh
# Where one attention kernel's time goes, instruction by instruction:
# Nsight Compute's warp-state sampling of each SASS instruction (its
# SourceCounters section) for the first launch of the kernel whose
# function name matches ATTNSRC_KERNEL (default ^tc_fwd_kernel), in
# build/bench/gpu-ops's ops named by ATTNSRC_ONLY (default "attention_fwd
# HS=64": the 64-row forward without dropout comes first) at the shape
# ATTNSRC_SHAPE (default 124M). Prints the samples by stall reason and by
# opcode, and the hottest instructions; the whole per-instruction table
# (the SASS with every sample column, CSV) is left gzipped in ATTNSRC_DIR
# (default build/attnsrc) for reading off the device, its columns named
# in its header; the report itself is deleted (it can pass 16 MiB).
# tests/gpu/check.sh runs this as its attnsrc stage. DTYPE=fp16 for fp16;
# ATTNSRC_KERNEL=^tc_dkv_kernel ATTNSRC_ONLY="attention_bwd HS=64" for dkv.
# The summary also splits the samples by the kernel's stretches of
# straight-line code (consecutive instructions run the same number of
# times: a tile's branchless body, its copies, the stores at the end).
# With --csv FILE (the table, gzipped or not, from an earlier run's logs)
# it prints that summary again, here, without a GPU.
#   sh bench/gpu/attnsrc.sh
#   sh bench/gpu/attnsrc.sh --csv logs/attnsrc/sass.csv.gz
set -u
CSV=
if [ "${1:-}" = --csv ]; then
	[ -r "${2:-}" ] || { echo "attnsrc: --csv wants the per-instruction table (sass.csv or sass.csv.gz)"; exit 64; }
	CSV=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
fi
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
D=${DTYPE:-bf16}
W=${ATTNSRC_DIR:-build/attnsrc}
summary () {
	$PY - "$1" <<'EOF'
import csv, gzip, re, sys

f = sys.argv[1]
rows = list(csv.reader(gzip.open(f, "rt") if f.endswith(".gz") else open(f)))
# the header: the first row naming the instructions' source
h = next(i for i, r in enumerate(rows) if any(c.strip().lower() == "source" for c in r))
head = [c.strip() for c in rows[h]]
data = [r for r in rows[h + 1:] if len(r) == len(head)]


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


src = next(i for i, c in enumerate(head) if c.lower() == "source")
addr = next((i for i, c in enumerate(head) if c.lower() == "address"), None)
allc = next((i for i, c in enumerate(head) if "sampling" in c.lower() and "all" in c.lower()), None)
if allc is None:
    allc = next(i for i, c in enumerate(head) if "sampl" in c.lower())
# the columns of samples by reason (stall_*), all samples (not the
# "(Not Issued)" ones, a part of them)
reasons = [i for i, c in enumerate(head) if i not in (src, addr, allc)
           and re.search(r"stall|^smsp__pcsamp", c, re.I) and "sampling" not in c.lower()
           and "not issued" not in c.lower()]
exe = next((i for i, c in enumerate(head) if c.lower() == "instructions executed"), None)
data = [r for r in data if num(r[allc]) is not None]
tot = sum(num(r[allc]) for r in data) or 1.0
print("instructions: %d, samples: %.0f" % (len(data), tot))
by = []
for i in reasons:
    s = sum(num(r[i]) or 0.0 for r in data)
    if s > 0:
        by.append((s, head[i]))
by.sort(reverse=True)
print("samples by reason: " + ", ".join("%s %.1f%%" % (n, 100 * s / tot) for s, n in by[:14]))
ops = {}
for r in data:
    op = r[src].strip().split()
    op = [o for o in op if not o.startswith("@")]
    op = op[0].split(".")[0] if op else "?"
    ops[op] = ops.get(op, 0.0) + num(r[allc])
print("samples by opcode: " + ", ".join("%s %.1f%%" % (o, 100 * s / tot)
                                        for o, s in sorted(ops.items(), key=lambda x: -x[1])[:16]))
if exe is not None:
    # stretches of straight-line code: consecutive instructions executed
    # the same number of times (warp-level), with their share of samples
    runs = []
    for k, r in enumerate(data):
        n = num(r[exe]) or 0.0
        if runs and runs[-1][2] == n:
            runs[-1][1] = k
            runs[-1][3] += num(r[allc])
        else:
            runs.append([k, k, n, num(r[allc]), r[src].strip()[:44]])
    print("samples by stretch (instructions first-last, times each ran, share; 1% or more):")
    for a, b, n, sm, first in runs:
        if sm >= 0.01 * tot:
            print("  %5d-%-5d %4d instr  ran %10.0f  %5.1f%%  from %s" % (a, b, b - a + 1, n, 100 * sm / tot, first))
print("hottest instructions (samples %, the two main reasons):")
for r in sorted(data, key=lambda r: -num(r[allc]))[:40]:
    rs = sorted(((num(r[i]) or 0.0, head[i]) for i in reasons), reverse=True)[:2]
    print("  %6s %5.2f%%  %-60s %s" % (r[addr] if addr is not None else "", 100 * num(r[allc]) / tot,
                                       r[src].strip()[:60],
                                       ", ".join("%s %.0f" % (n, s) for s, n in rs if s > 0)))
EOF
}
if [ -n "$CSV" ]; then
	summary "$CSV"
	exit
fi
NAME=attnsrc
. bench/gpu/lib-ncu.sh
ncu_setup "$W" || exit 1
"$NCU_BIN" --section SourceCounters --section WarpStateStats --section LaunchStats --clock-control none \
	--import-source no --kernel-name regex:"${ATTNSRC_KERNEL:-^tc_fwd_kernel}" --launch-count 1 -f -o "$W/src" \
	build/bench/gpu-ops "$D" --shape "${ATTNSRC_SHAPE:-124M}" --only "${ATTNSRC_ONLY:-attention_fwd HS=64}" \
	--once >"$W/run.log" 2>&1 || { tail -n 20 "$W/run.log"; exit 1; }
"$NCU_BIN" --import "$W/src.ncu-rep" --print-details all >"$W/details.txt" 2>&1 ||
	"$NCU_BIN" --import "$W/src.ncu-rep" >"$W/details.txt" 2>&1
"$NCU_BIN" --import "$W/src.ncu-rep" --page source --csv --print-source sass >"$W/sass.csv" 2>"$W/sass.err" ||
	{ cat "$W/sass.err"; exit 1; }
rm -f "$W/src.ncu-rep"
grep -m 1 -i "tc_\|kernel" "$W/details.txt"
summary "$W/sass.csv"
rc=$?
gzip -f "$W/sass.csv"
exit $rc
