"""GE IR: records, builder, op-spec table, device rules, dtype numberings and ModelDef
serialization."""

from npu_inductor.ge.device_rules import DeviceRuleError
from npu_inductor.ge.dump import format_graph
from npu_inductor.ge.ir import Attr, Graph, GraphBuilder, OpNode, TensorDesc, Value
from npu_inductor.ge.op_specs import OpSpecError
from npu_inductor.ge.serialize import from_air, from_pbtxt, to_air, to_pbtxt

__all__ = ["Attr", "DeviceRuleError", "Graph", "GraphBuilder", "OpNode", "OpSpecError",
           "TensorDesc", "Value", "format_graph", "from_air", "from_pbtxt", "to_air", "to_pbtxt"]
