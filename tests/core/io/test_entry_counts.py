"""Crafted counts are refused before they cost time or memory (issue 27, item 8): a checkpoint
vector listing one tensor millions of times, a property bag of millions of entries, a legacy file
of millions of copies of one record, an .npz of 500,000 arrays. Small versions prove each bound:
duplicates refused at once, a count above its cap refused before the entries are read."""

from __future__ import annotations

import io
import struct

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxport.core.export.wire_format import varint
from onnxport.core.io import checkpoint as C
from onnxport.core.io import flatbuf, npz_reader
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.flatbuf import FlatBuffer
from onnxport.core.io.kinds import sniff
from onnxport.core.io.npz_reader import list_npz
from onnxport.core.util.errors import CorruptFileError
from tests.support.checkpoint_writer import write_checkpoint

from ..crafted_files import stored, write_zip
from .test_checkpoint import write_pbseq


def _point_all_at_first(path, *slots) -> None:
    """Make every entry of the table vector at `slots` (a path of table fields) the first one."""
    data = bytearray(path.read_bytes())
    table = FlatBuffer(bytes(data), "x").root()
    for slot in slots[:-1]:
        table = table.table(slot)
    start, count = table.vector(slots[-1], 4)
    first = start + struct.unpack_from("<I", data, start)[0]
    for i in range(1, count):
        struct.pack_into("<I", data, start + 4 * i, first - (start + 4 * i))
    path.write_bytes(bytes(data))


def test_a_checkpoint_listing_one_tensor_many_times_is_refused(tmp_path):
    path = write_checkpoint(tmp_path / "ckpt", {f"w{i}": np.zeros(0, np.float32) for i in range(4)})
    _point_all_at_first(path, C.CKPT_MODULE_STATE, C.MS_REQUIRES_GRAD)
    with pytest.raises(CorruptFileError, match="lists one table more than once"):
        read_checkpoint(path)


def test_a_property_bag_listing_one_entry_many_times_is_refused(tmp_path):
    path = write_checkpoint(tmp_path / "ckpt", {"w": np.ones(2, np.float32)}, properties={"a": 1, "b": 2, "c": 3})
    assert read_checkpoint(path).properties == {"a": 1, "b": 2, "c": 3}
    _point_all_at_first(path, C.CKPT_PROPERTY_BAG, C.PB_INTS)
    with pytest.raises(CorruptFileError, match="lists one table more than once"):
        read_checkpoint(path)


def test_tables_over_the_cap_are_refused_before_they_are_read(tmp_path, monkeypatch):
    path = write_checkpoint(tmp_path / "ckpt", {f"w{i}": np.ones(1, np.float32) for i in range(3)},
                            properties={"a": 1, "b": 2})
    monkeypatch.setattr(flatbuf, "TABLES_MAX", 5)
    assert len(read_checkpoint(path)) == 3  # 3 tensors + 2 properties: at the cap
    monkeypatch.setattr(flatbuf, "TABLES_MAX", 4)
    with pytest.raises(CorruptFileError, match="lists over 4 tensors, states, properties or strings"):
        read_checkpoint(path)


def _record(name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(2, np.float32), name)


def test_a_legacy_file_repeating_one_record_is_refused_at_the_second_copy(tmp_path):
    write_pbseq(tmp_path / "paramtrain_tensors.pbseq", [_record("w")] * 3)
    with pytest.raises(CorruptFileError, match="tensor 'w' appears twice"):
        read_checkpoint(tmp_path)


def test_a_legacy_file_declaring_more_records_than_it_holds_is_refused_at_once(tmp_path):
    body = _record("w").SerializeToString()
    (tmp_path / "paramtrain_tensors.pbseq").write_bytes(varint(2_000_000) + varint(len(body)) + body)
    with pytest.raises(CorruptFileError, match="declares 2,000,000 records"):
        read_checkpoint(tmp_path)


def test_an_npz_over_the_member_cap_or_naming_an_array_twice_is_refused(tmp_path, monkeypatch):
    arrays = {f"a{i}": np.ones(2, np.float32) for i in range(3)}
    np.savez(tmp_path / "three.npz", **arrays)
    monkeypatch.setattr(npz_reader, "MEMBERS_MAX", 3)
    assert [m.name for m in list_npz(tmp_path / "three.npz")] == ["a0", "a1", "a2"]
    monkeypatch.setattr(npz_reader, "MEMBERS_MAX", 2)
    with pytest.raises(CorruptFileError, match="holds 3 arrays; onnxport reads at most 2"):
        list_npz(tmp_path / "three.npz")
    buf = io.BytesIO()
    np.save(buf, np.ones(2, np.float32))
    write_zip(tmp_path / "twice.npz", [stored("w.npy", buf.getvalue()), stored("w.npy", buf.getvalue())])
    with pytest.raises(CorruptFileError, match="array 'w' appears twice"):
        list_npz(tmp_path / "twice.npz")


def test_a_legacy_folders_records_share_one_budget(tmp_path, monkeypatch):
    from onnxport.core.io import checkpoint_legacy

    write_pbseq(tmp_path / "paramtrain_tensors.pbseq", [_record("a"), _record("b")])
    write_pbseq(tmp_path / "optim_g_momentum0_tensors.pbseq", [_record("a"), _record("b")])
    monkeypatch.setattr(checkpoint_legacy, "RECORDS_MAX", 4)
    assert sorted(read_checkpoint(tmp_path)) == ["a", "b"]
    monkeypatch.setattr(checkpoint_legacy, "RECORDS_MAX", 3)  # each file fits, the folder does not
    with pytest.raises(CorruptFileError, match="reads at most 3 in one folder"):
        read_checkpoint(tmp_path)


def test_an_archive_declaring_too_many_members_is_refused_before_zipfile_lists_them(tmp_path, monkeypatch):
    from onnxport.core.io import archive_bounds

    np.savez(tmp_path / "three.npz", **{f"a{i}": np.ones(2, np.float32) for i in range(3)})
    monkeypatch.setattr(archive_bounds, "ARCHIVE_MEMBERS_MAX", 2)
    listed = []
    monkeypatch.setattr(archive_bounds.zipfile.ZipFile, "infolist", lambda self: listed.append(1) or [])
    with pytest.raises(CorruptFileError, match="a .npz of 3 members; onnxport reads at most 2"):
        list_npz(tmp_path / "three.npz")
    monkeypatch.setattr(archive_bounds.zipfile.ZipFile, "namelist", lambda self: listed.append(1) or [])
    with pytest.raises(CorruptFileError, match="a zip archive of 3 members"):
        sniff(tmp_path / "three.npz")  # what every open does first
    assert not listed


def test_string_vectors_count_against_the_same_cap(tmp_path, monkeypatch):
    path = write_checkpoint(tmp_path / "ckpt", {"s": np.array(["a", "b", "c"], dtype=object)})
    monkeypatch.setattr(flatbuf, "TABLES_MAX", 4)  # 1 tensor table + 3 strings
    assert read_checkpoint(path)["s"].array().tolist() == ["a", "b", "c"]
    monkeypatch.setattr(flatbuf, "TABLES_MAX", 3)
    with pytest.raises(CorruptFileError, match="lists over 3"):
        read_checkpoint(path)
