# megatron-read.py PREFIX: reads a dataset the way Megatron-LM's
# megatron/core/datasets/indexed_dataset.py does (_IndexReader: header,
# version, dtype code, counts, then the three arrays; documents as ranges of
# sequences; tokens read at each sequence's byte pointer) and prints one line
# per document: its tokens separated by spaces. Standard library only.
import array
import struct
import sys

HEADER = b"MMIDIDX\x00\x00"
DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "f", 8: "H"}

prefix = sys.argv[1]
with open(prefix + ".idx", "rb") as f:
    assert f.read(9) == HEADER, "bad magic"
    (version,) = struct.unpack("<Q", f.read(8))
    assert version == 1, "bad version"
    (code,) = struct.unpack("<B", f.read(1))
    typecode = DTYPES[code]
    (sequence_count,) = struct.unpack("<Q", f.read(8))
    (document_count,) = struct.unpack("<Q", f.read(8))
    lengths = array.array("i", f.read(4 * sequence_count))
    pointers = array.array("q", f.read(8 * sequence_count))
    document_indices = array.array("q", f.read(8 * document_count))
    assert len(document_indices) == document_count
    assert f.read() == b"", "trailing bytes"
assert document_indices[0] == 0 and document_indices[-1] == sequence_count
itemsize = array.array(typecode).itemsize
with open(prefix + ".bin", "rb") as f:
    data = f.read()
out = []
for d in range(document_count - 1):
    toks = []
    for s in range(document_indices[d], document_indices[d + 1]):
        start = pointers[s]
        toks.extend(array.array(typecode, data[start:start + lengths[s] * itemsize]))
    out.append(" ".join(map(str, toks)))
sys.stdout.write("".join(line + "\n" for line in out))
