"""Plain data: only harmless values cross from the learner's kernel to the judge."""

import math

import numpy as np
import pytest

from course_utils.exercises import plain


def test_plain_values_round_trip_through_json_and_npz(tmp_path):
    data = {
        "shape": [2, 3],
        "ok": True,
        "name": "x",
        "nothing": None,
        "values": np.arange(6, dtype=np.float32).reshape(2, 3),
        "cases": [{"got": np.array([1, 2]), "inf": math.inf}],
        "nan": math.nan,
    }
    plain.save(data, tmp_path / "probe.json")
    back = plain.load(tmp_path / "probe.json")
    assert back["shape"] == [2, 3] and back["ok"] is True and back["nothing"] is None
    np.testing.assert_array_equal(back["values"], data["values"])
    assert back["values"].dtype == np.float32
    np.testing.assert_array_equal(back["cases"][0]["got"], [1, 2])
    assert back["cases"][0]["inf"] == math.inf and math.isnan(back["nan"])


def test_tuples_become_lists_and_numpy_scalars_become_python_numbers():
    assert plain.to_plain((1, np.float64(2.5), np.bool_(True))) == [1, 2.5, True]


class RiggedInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [RiggedInt(3), object(), {1: "non-str key"}, np.array([object()]), np.array(["text"])],
    ids=["int subclass", "object", "int key", "object array", "string array"],
)
def test_anything_else_is_refused(value):
    with pytest.raises(plain.NotPlainData):
        plain.to_plain(value)


def test_tensors_are_not_plain_data():
    torch = pytest.importorskip("torch")
    with pytest.raises(plain.NotPlainData, match="torch.Tensor"):
        plain.to_plain({"t": torch.zeros(2)})


def test_load_never_unpickles(tmp_path):
    (tmp_path / "probe.json").write_text('{"x": {"__array__": "a0"}}')
    np.savez(tmp_path / "probe.npz", a0=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        plain.load(tmp_path / "probe.json")


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    plain.save({"a": np.zeros(2)}, tmp_path / "p.json")
    plain.save({"a": np.ones(2)}, tmp_path / "p.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.npz"]
    np.testing.assert_array_equal(plain.load(tmp_path / "p.json")["a"], [1, 1])
