"""Every ``acl.*`` function the acl path calls (generated executors for static, dynamic and
gear models, ``AclDevice``, the allocator's ``AclBackend``) and every one the fake ``acl``
provides maps to a function declared in CANN's headers (torch-npu 2.13.0 wheel,
``torch_npu/include/acl``; fetched by ``tests/cann_headers.py``, never skipped)."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest
import torch
from cann_headers import acl_headers
from fakes.fixtures import fake_acl  # noqa: F401  (fixture)

from npu_inductor.codegen import executor_source
from npu_inductor.ge import GraphBuilder
from npu_inductor.gears import Gears
from npu_inductor.runtime import allocator, device

# pyACL names that do not follow the mechanical acl[rt|mdl]<CamelCase> rule
RENAMED = {"get_soc_name": "aclrtGetSocName"}
# pyACL-only helpers with no C counterpart (Python bytes <-> pointers)
PYTHON_ONLY = {"util.bytes_to_ptr", "util.ptr_to_bytes", "util.numpy_to_ptr"}
PREFIX = {"": "acl", "rt.": "aclrt", "mdl.": "aclmdl"}
ACL_REF = re.compile(r"\bacl\.((?:rt\.|mdl\.|util\.)?)([a-z][a-z0-9_]*)\b")


def c_name(namespace: str, name: str) -> str:
    if name in RENAMED:
        return RENAMED[name]
    return PREFIX[namespace] + "".join(p[:1].upper() + p[1:] for p in name.split("_"))


@pytest.fixture(scope="module")
def declared() -> set[str]:
    text = "\n".join(p.read_text(errors="replace") for p in Path(acl_headers()).rglob("*.h"))
    return set(re.findall(r"\b(acl\w+)\s*\(", text))


def _graph(shape: tuple[int, ...]):
    b = GraphBuilder("g")
    x = b.data(torch.float32, shape, "x")
    b.output([x])
    return b.build()


def _sources() -> dict[str, str]:
    gears = Gears(shapes=((0, (-1, 4)),), values=((2,), (4,)))
    return {"static executor": executor_source(_graph((2, 4)), "acl"),
            "dynamic executor": executor_source(_graph((-1, 4)), "acl"),
            "gear executor": executor_source(_graph((-1, 4)), "acl", gears),
            "AclDevice": inspect.getsource(device.AclDevice),
            "AclBackend": inspect.getsource(allocator.AclBackend)}


def _refs(source: str) -> set[tuple[str, str]]:
    return {(ns, name) for ns, name in ACL_REF.findall(source)
            if f"{ns}{name}" not in PYTHON_ONLY and not name.isupper()}


def test_every_acl_call_is_declared_in_the_cann_headers(declared):
    seen = set()
    for what, source in _sources().items():
        for ns, name in _refs(source):
            seen.add(f"{ns}{name}")
            assert c_name(ns, name) in declared, \
                f"{what}: acl.{ns}{name} -> {c_name(ns, name)} is not in the CANN headers"
    # the dynamic and gear paths are really covered
    for name in ("mdl.set_dataset_tensor_desc", "mdl.get_dataset_tensor_desc",
                 "mdl.set_input_dynamic_dims", "mdl.get_input_index_by_name",
                 "mdl.get_output_size_by_index", "mdl.get_cur_output_dims",
                 "create_tensor_desc", "get_tensor_desc_dim_v2", "get_soc_name"):
        assert name in seen, name


def test_the_mapping_rejects_an_undeclared_name(declared):
    assert c_name("mdl.", "get_output_size_by_index") in declared
    assert c_name("mdl.", "get_output_size") not in declared  # no such ACL function


def test_every_function_of_the_fake_acl_is_declared(declared, fake_acl):  # noqa: F811
    acl = fake_acl.acl
    for ns, space in (("", acl), ("rt.", acl.rt), ("mdl.", acl.mdl)):
        names = vars(space) if isinstance(space, types.SimpleNamespace) else {
            k: v for k, v in vars(space).items() if inspect.isfunction(v)
            and v.__module__ == acl.__name__ and not k.startswith("_") and k != "reset"}
        for name in names:
            assert c_name(ns, name) in declared, f"fake acl.{ns}{name}: {c_name(ns, name)}"
