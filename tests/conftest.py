import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield


@pytest.fixture(autouse=True)
def _host_device_unless_asked():
    # tests run on the host device unless they ask for acl (options={"device": "acl"})
    from npu_inductor import config

    with config.patch(device="host"):
        yield
