import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
# The compile cache is off in tests (the default folder is the user's ~/.cache): a test
# that uses it passes options={"cache_dir": tmp_path} (explicit options beat this).
os.environ["NPU_INDUCTOR_CACHE_DIR"] = "off"


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
