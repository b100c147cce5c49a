"""Plain-Python reader and writer for the safetensors file format.

Used by tools/make_checkpoint.py (to write checkpoints) and by the PyTorch
references in tools/reference/ (to read checkpoints and write goldens). No
`safetensors` package is needed: only numpy and torch.

File layout (what this module reads and writes):

    [8 bytes]  N = header length, unsigned little-endian
    [N bytes]  JSON object, UTF-8, right-padded with spaces to a multiple of 8
               {"__metadata__": {str: str, ...},            (optional)
                "<name>": {"dtype": "BF16", "shape": [r, c],
                           "data_offsets": [begin, end]}, ...}
    [rest]     tensor bytes, little-endian, row-major; data_offsets count
               from the first byte after the header

Data flow:
    load(path)  -> read_header() -> per tensor: bytes at data_offsets
                -> numpy array of the storage dtype -> torch tensor
                   (BF16 is read as uint16 and reinterpreted as bfloat16)
    save(path, tensors) -> TensorWriter(path, specs): header computed from
                   names, dtypes and shapes -> write() appends each tensor's
                   bytes in header order -> close() checks every byte came.
    TensorWriter is also the streaming path: make_checkpoint.py builds the
    header from shapes alone, then generates and writes one tensor at a time,
    so a multi-GB file never has to sit in memory.

Like the official Rust writer, tensors are laid out sorted by name (within
one dtype), the header JSON is compact and `__metadata__` comes first.
"""

import json
import os
import struct
import sys

import numpy as np
import torch

# safetensors dtype tag -> (torch dtype, numpy storage dtype, bytes per element)
DTYPES = {
    "F64": (torch.float64, np.dtype("<f8"), 8),
    "F32": (torch.float32, np.dtype("<f4"), 4),
    "F16": (torch.float16, np.dtype("<f2"), 2),
    "BF16": (torch.bfloat16, np.dtype("<u2"), 2),
    "I64": (torch.int64, np.dtype("<i8"), 8),
    "I32": (torch.int32, np.dtype("<i4"), 4),
    "I16": (torch.int16, np.dtype("<i2"), 2),
    "I8": (torch.int8, np.dtype("i1"), 1),
    "U8": (torch.uint8, np.dtype("u1"), 1),
    "BOOL": (torch.bool, np.dtype("?"), 1),
}

# Bytes are written and read in host order; every supported host is little-endian.
assert sys.byteorder == "little", "safetensors_io assumes a little-endian host"

_TORCH_TO_TAG = {v[0]: k for k, v in DTYPES.items()}
_NUMPY_TO_TAG = {
    np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
    np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("int16"): "I16",
    np.dtype("int8"): "I8", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL",
}


def dtype_tag(x):
    """safetensors dtype tag ("F32", "BF16", ...) of a torch tensor or numpy array."""
    if isinstance(x, torch.Tensor):
        tag = _TORCH_TO_TAG.get(x.dtype)
    else:
        tag = _NUMPY_TO_TAG.get(np.asarray(x).dtype)
    if tag is None:
        raise ValueError(f"dtype {x.dtype} has no safetensors tag")
    return tag


def _n_elements(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def read_header(path):
    """Return (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: shorter than the 8-byte header length")
        (n_header,) = struct.unpack("<Q", raw)
        text = f.read(n_header)
        if len(text) != n_header:
            raise ValueError(f"{path}: header truncated")
    header = json.loads(text.decode("utf-8"))
    metadata = header.pop("__metadata__", None) or {}
    _check_header(path, header, 8 + n_header)
    return header, metadata, 8 + n_header


def _check_header(path, header, data_start):
    """Offsets must match shapes and dtypes and stay inside the file."""
    n_data = os.path.getsize(path) - data_start
    for name, info in header.items():
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: {name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        size = _n_elements(info["shape"]) * DTYPES[info["dtype"]][2]
        if end - begin != size or begin < 0 or end > n_data:
            raise ValueError(f"{path}: {name}: bad data_offsets {begin}..{end}")


def load_metadata(path):
    """The __metadata__ dict of a file ({} if absent)."""
    return read_header(path)[1]


def load(path, names=None, prefix=None):
    """Read tensors into a dict name -> torch.Tensor (a private copy, not a mapping).

    names:  optional iterable of tensor names to read (others are skipped)
    prefix: optional name prefix to select (e.g. "decoder.")
    """
    header, _, data_start = read_header(path)
    wanted = set(names) if names is not None else None
    blob = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if wanted is not None and name not in wanted:
            continue
        if prefix is not None and not name.startswith(prefix):
            continue
        out[name] = _tensor_from_bytes(blob, data_start, info)
    if wanted is not None and wanted - out.keys():
        raise KeyError(f"{path}: missing tensors {sorted(wanted - out.keys())}")
    return out


def _tensor_from_bytes(blob, data_start, info):
    torch_dtype, np_dtype, _ = DTYPES[info["dtype"]]
    begin, end = info["data_offsets"]
    raw = blob[data_start + begin: data_start + end]
    arr = np.frombuffer(raw, dtype=np_dtype).copy().reshape(info["shape"])
    if info["dtype"] == "BF16":
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def tensor_bytes(x):
    """Row-major bytes of a tensor or array, as a contiguous numpy array (BF16 as int16)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().contiguous()
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy()
        return x.numpy()
    return np.ascontiguousarray(x)


class TensorWriter:
    """Streaming writer: header first from specs, then tensors appended in order.

    specs: list of (name, dtype tag, shape). The file lists tensors sorted by
    name; write() must be called in exactly order() order.
    """

    def __init__(self, path, specs, metadata=None):
        self.specs = sorted(specs, key=lambda s: s[0])
        names = [s[0] for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tensor names")
        self.f = open(path, "wb")
        self.f.write(build_header(self.specs, metadata))
        self.next = 0

    def order(self):
        """Names in the order write() expects them."""
        return [s[0] for s in self.specs]

    def write(self, name, x):
        spec_name, tag, shape = self.specs[self.next]
        if name != spec_name:
            raise ValueError(f"expected tensor {spec_name}, got {name}")
        if tuple(x.shape) != tuple(shape) or dtype_tag(x) != tag:
            raise ValueError(f"{name}: got {dtype_tag(x)}{list(x.shape)}, "
                             f"header says {tag}{list(shape)}")
        tensor_bytes(x).tofile(self.f)
        self.next += 1

    def close(self):
        self.f.close()
        if self.next != len(self.specs):
            raise ValueError(f"only {self.next} of {len(self.specs)} tensors written")


def build_header(specs, metadata=None):
    """8-byte length + space-padded compact JSON header for sorted specs."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, tag, shape in specs:
        size = _n_elements(shape) * DTYPES[tag][2]
        header[name] = {"dtype": tag, "shape": [int(d) for d in shape],
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def save(path, tensors, metadata=None):
    """Write dict name -> torch.Tensor or numpy array (dtype kept as is)."""
    specs = [(name, dtype_tag(x), tuple(x.shape)) for name, x in tensors.items()]
    writer = TensorWriter(path, specs, metadata)
    for name in writer.order():
        writer.write(name, tensors[name])
    writer.close()
