#!/usr/bin/env python3
"""Where the GPU time of a training step goes, kernel by kernel, from Nsight
Compute's raw page (NCU=1 sh bench/gpu/train.sh writes it with
`ncu --import R --page raw --csv --print-units base`): launches are grouped by
kernel name (the parameter list dropped), each group with its
launches and milliseconds per step and its share of all kernel time, the
heaviest first.

    kernel_table.py CSV STEPS [ROWS]

ROWS (default 25) heaviest groups are listed, the rest summed in one line.
Exits 1 when the file holds no kernel launches.
"""
import csv
import re
import sys

# seconds per unit of ncu's duration units
UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
METRIC = "gpu__time_duration.sum"


def group(name):
    """'void attn_fwd<(int)64>(float *, int)' -> 'attn_fwd<(int)64>'."""
    name = re.sub(r"^void ", "", name.strip())
    depth = 0
    for i, c in enumerate(name):  # the parameter list: the first '(' outside <...>
        depth += (c == "<") - (c == ">")
        if c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    path, steps = argv[1], int(argv[2])
    top = int(argv[3]) if len(argv) == 4 else 25
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f)]
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r and METRIC in r), None)
    if head is None:
        sys.exit("kernel_table: %s: no header with 'Kernel Name' and %s" % (path, METRIC))
    cols = rows[head]
    k, m = cols.index("Kernel Name"), cols.index(METRIC)
    scale, total, groups = UNITS["nsecond"], 0.0, {}
    for r in rows[head + 1:]:
        if len(r) <= max(k, m):
            continue
        v = r[m].replace(",", "")
        try:
            t = float(v)
        except ValueError:  # the units row
            scale = UNITS.get(r[m].strip(), scale)
            continue
        g = groups.setdefault(group(r[k]), [0, 0.0])
        g[0] += 1
        g[1] += t * scale
        total += t * scale
    if not groups:
        print("kernel_table: %s: no kernel launches" % path)
        return 1
    launches = sum(g[0] for g in groups.values())
    rank = sorted(groups.items(), key=lambda kv: -kv[1][1])
    print("%-56s %9s %9s %7s" % ("kernel (per step of %d)" % steps, "launches", "ms", "share"))
    for name, (n, t) in rank[:top]:
        print("%-56s %9.1f %9.3f %6.1f%%" % (name[:56], n / steps, 1e3 * t / steps, 100 * t / total))
    rest = rank[top:]
    if rest:
        n, t = sum(g[0] for _, g in rest), sum(g[1] for _, g in rest)
        print("%-56s %9.1f %9.3f %6.1f%%" % ("(%d more kernels)" % len(rest), n / steps, 1e3 * t / steps,
                                             100 * t / total))
    print("%-56s %9.1f %9.3f %6.1f%%" % ("all kernels", launches / steps, 1e3 * total / steps, 100.0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
