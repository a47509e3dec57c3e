"""The protobuf wire format of what `writer` streams: varints, tags, tensor headers and the bytes
an initializer takes, so a model can be written field by field (and sized) without serialising it.
The layout `onnx.save` gives: a parser reads these bytes as the same messages."""

from __future__ import annotations

import onnx

from onnxport.core.graph.const_tensors import ConstTensor

PAGE = 4096
MODEL_GRAPH_TAG = bytes([(7 << 3) | 2])
GRAPH_INITIALIZER_TAG = bytes([(5 << 3) | 2])
_TENSOR_RAW_DATA_TAG = bytes([(9 << 3) | 2])


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def padded_varint(value: int, width: int = 5) -> bytes:
    """A varint always `width` bytes long (continuation bits on all but the last)."""
    if value >= 1 << (7 * width):
        raise ValueError("value too large for padded varint")
    out = bytearray()
    for i in range(width):
        byte = (value >> (7 * i)) & 0x7F
        out.append(byte | (0x80 if i < width - 1 else 0))
    return bytes(out)


def tensor_header(name: str, elem_type: int, dims, external: tuple[str, int, int] | None = None) -> bytes:
    header = onnx.TensorProto(name=name, data_type=elem_type)
    header.dims.extend(int(d) for d in dims)
    if external is not None:
        location, offset, length = external
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
            entry = header.external_data.add()
            entry.key, entry.value = key, value
        header.data_location = onnx.TensorProto.EXTERNAL
    return header.SerializeToString()


def initializer_record_bytes(const: ConstTensor) -> int:
    """The bytes `write_model` writes for `const` inline (its graph field, header and values),
    without alignment padding; for sizing a model before it is written (the export plan)."""
    if const.proto is not None:
        body = const.proto.ByteSize()
        return len(GRAPH_INITIALIZER_TAG) + len(varint(body)) + body
    header = tensor_header(const.name, const.elem_type, const.shape or ())
    return len(inline_prefix(header, const.nbytes)) + const.nbytes


def inline_prefix(header: bytes, length: int) -> bytes:
    """The bytes of an inline initializer before its `length` raw bytes: graph field tag and
    length, the tensor's other fields (`header`), raw_data's tag and length."""
    body_len = len(header) + len(_TENSOR_RAW_DATA_TAG) + len(varint(length)) + length
    return GRAPH_INITIALIZER_TAG + varint(body_len) + header + _TENSOR_RAW_DATA_TAG + varint(length)
