"""GE IR: build-time spec checks, serialization round trips, the op-spec table itself."""

import json
from pathlib import Path

import pytest
import torch

from npu_inductor.ge import (
    GraphBuilder,
    OpSpecError,
    dtypes,
    format_graph,
    from_air,
    from_pbtxt,
    ge_ir_pb2,
    to_air,
    to_pbtxt,
)
from npu_inductor.ge.op_specs import SPEC_FILE, get_spec, parse_types

REFERENCE = next((p / "shared" / "reference" for p in Path(__file__).resolve().parents
                  if (p / "shared" / "reference").is_dir()),
                 Path("shared/reference")) / "ge_op_protos.json"


def small_graph():
    b = GraphBuilder("g")
    x = b.data(torch.float32, (2, 3), "x")
    w = b.data(torch.float16, (3, 4), "w")
    wc, = b.op("Cast", "w_cast", [w], {"dst_type": dtypes.to_cpp(torch.float32)},
               [(torch.float32, (3, 4))])
    bias = b.const(torch.tensor([1.0, 2.0, 3.0, 4.0]), "bias")
    y, = b.op("MatMulV2", "mm", [x, wc, bias], {"transpose_x1": False}, [(torch.float32, (2, 4))])
    s, = b.op("SoftmaxV2", "sm", [y], {"axes": [-1]}, [(torch.float32, (2, 4))])
    b.output([s, y])
    return b.build()


def test_air_round_trip_is_byte_identical():
    air = to_air(small_graph())
    assert to_air(from_air(air)) == air
    assert from_air(air) == small_graph()


def test_pbtxt_round_trip():
    g = small_graph()
    assert to_air(from_pbtxt(to_pbtxt(g))) == to_air(g)


def test_air_uses_ge_field_numbers_and_dtype_enums():
    model = ge_ir_pb2.ModelDef()
    model.ParseFromString(to_air(small_graph()))
    ops = {o.name: o for o in model.graph[0].op}
    assert ops["w"].output_desc[0].dtype == 2  # proto enum DT_FLOAT16 = 2
    assert ops["w_cast"].attr["dst_type"].i == 0  # C++ ge::DataType DT_FLOAT = 0
    assert list(ops["mm"].input) == ["x:0", "w_cast:0", "bias:0"]
    assert [d.name for d in ops["mm"].input_desc] == ["x1", "x2", "bias"]
    assert ops["sm"].attr["axes"].list.val_type == ge_ir_pb2.AttrDef.ListValue.VT_LIST_INT
    # field 6 of GraphDef is `op`, field 7 of ModelDef is `graph`: check the raw wire tags
    raw = to_air(small_graph())
    assert b"\x3a" in raw[:64]  # ModelDef.graph: field 7, wire type 2 -> tag 0x3a


def test_golden_dump():
    assert format_graph(small_graph()) == """\
graph "g":
  %x = Data()[index=0] -> f32[2, 3]
  %w = Data()[index=1] -> f16[3, 4]
  %w_cast = Cast(%w)[dst_type=0] -> f32[3, 4]
  %bias = Const()[value=f32[4]{1, 2, 3, 4}] -> f32[4]
  %mm = MatMulV2(%x, %w_cast, %bias)[transpose_x1=false] -> f32[2, 4]
  %sm = SoftmaxV2(%mm)[axes=[-1]] -> f32[2, 4]
  return (%sm, %mm)
"""


def test_unfed_optional_input_and_unique_names():
    b = GraphBuilder("g")
    x = b.data(torch.float32, (2, 2), "x")
    y, = b.op("MatMulV2", "mm", [x, x, None, None], {}, [(torch.float32, (2, 2))])
    z, = b.op("MatMulV2", "mm", [x, y], {}, [(torch.float32, (2, 2))])
    b.output([z])
    g = b.build()
    assert [op.name for op in g.ops] == ["x", "mm", "mm_1", "NetOutput"]
    assert g.ops[1].inputs == ("x:0", "x:0")  # trailing unfed optionals are omitted


@pytest.mark.parametrize("build,message", [
    (lambda b, x: b.op("Relu", "r", [x], {"alpha": 1.0}, [(torch.float32, (2,))]), "unknown attr"),
    (lambda b, x: b.op("Cast", "c", [x], {}, [(torch.float32, (2,))]), "missing required attr"),
    (lambda b, x: b.op("Cast", "c", [x], {"dst_type": 1.5}, [(torch.float32, (2,))]),
     "must be Int"),
    (lambda b, x: b.op("MatMulV2", "m", [x], {}, [(torch.float32, (2,))]),
     "required input 'x2'"),
    (lambda b, x: b.op("SoftmaxV2", "s", [b.data(torch.int64, (2,), "i")], {},
                       [(torch.int64, (2,))]), "does not accept torch.int64"),
    (lambda b, x: b.op("NoSuchOp", "n", [x], {}, []), "not in npu_inductor's op-spec table"),
    (lambda b, x: b.op("Relu", "r", [x], {}, []), "0 outputs described"),
])
def test_spec_violations_fail_at_build_time(build, message):
    b = GraphBuilder("g")
    x = b.data(torch.float32, (2,), "x")
    with pytest.raises(OpSpecError, match=message):
        build(b, x)


def test_op_spec_table_is_a_verbatim_copy_of_the_reference():
    if not REFERENCE.exists():
        pytest.fail(f"reference prototypes missing at {REFERENCE}")
    reference = json.loads(REFERENCE.read_text())
    table = json.loads(SPEC_FILE.read_text())
    newer = _gen_op_specs().NEWER_PROTOS  # newer REG_OPs, cited in tools/gen_op_specs.py
    for op_type, proto in table.items():
        if op_type == "NetOutput":
            continue
        expected = newer.get(op_type, reference.get(op_type))
        assert expected == proto, f"{op_type} differs from the reference"


def _gen_op_specs():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "gen_op_specs.py"
    spec = importlib.util.spec_from_file_location("gen_op_specs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_type_strings_parse():
    assert parse_types("TensorType({DT_FLOAT, DT_FLOAT16})") == {torch.float32, torch.float16}
    assert torch.bool in parse_types("TensorType({BasicType(), DT_BOOL})")
    assert parse_types("TensorType::ALL()") is None
    assert parse_types('"T1"') is None
    assert torch.int64 in get_spec("Add").input("x1").dtypes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8,
                                   torch.uint8, torch.int32, torch.int64, torch.bool,
                                   torch.float64])
def test_dtype_numberings(dtype):
    # the two GE numberings differ (ge_ir_notes.md §1.1 vs §1.2) and both round-trip
    assert dtypes.from_proto(dtypes.to_proto(dtype)) == dtype
    assert dtypes.from_cpp(dtypes.to_cpp(dtype)) == dtype
    assert ge_ir_pb2.DataType.Name(dtypes.to_proto(dtype)) == dtypes.ge_name(dtype)


def test_const_payload_round_trips_all_dtypes():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool):
        b = GraphBuilder("g")
        t = torch.arange(6).reshape(2, 3).to(dtype)
        c = b.const(t, "c")
        b.output([c])
        back = from_air(to_air(b.build())).ops[0].attr("value")
        assert back.dtype == dtype and torch.equal(back, t)
