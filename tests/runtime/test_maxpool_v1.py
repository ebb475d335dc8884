"""The host device's MaxPoolWithArgmaxV1 / MaxPoolGradWithArgmaxV1: the uint16 window mask
the 910B produces, and a backward that consumes only that mask. Expected masks are written
out by hand from the format (bit p % 16 of [n, c, tap, p // 16])."""

import pytest
import torch

from npu_inductor.lowering.pool import mask_shape
from npu_inductor.runtime.kernels import KERNELS


def _pool(x, k, s=None, p=(0, 0), d=(1, 1), ceil_mode=False):
    s = s or k
    return KERNELS["MaxPoolWithArgmaxV1"](x, ksize=[1, *k, 1], strides=[1, *s, 1],
                                          pads=[1, *p, 1], dilation=[1, *d, 1],
                                          ceil_mode=ceil_mode)


def test_mask_shape_matches_cann_shape_inference():
    # CANN's maxpool_with_argmax_v1 infer test: x [1, 64, 672, 672], 2x2 window, stride 1
    assert mask_shape(1, 64, [2, 2], [671, 671]) == (1, 64, 4, 28142)


def test_mask_marks_the_window_offset_of_the_max():
    x = torch.tensor([[[[1.0, 2.0], [5.0, 3.0]]]])
    y, mask = _pool(x, [2, 2])
    assert y.tolist() == [[[[5.0]]]]
    assert mask.dtype == torch.uint16 and tuple(mask.shape) == (1, 1, 4, 2)
    expected = torch.zeros(1, 1, 4, 2, dtype=torch.int32)
    expected[0, 0, 2, 0] = 1  # output 0 took its max at tap 2 = (row 1, col 0)
    assert torch.equal(mask.to(torch.int32), expected)


def test_mask_packs_sixteen_positions_per_element():
    x = torch.arange(17.0).reshape(1, 1, 1, 17)
    _, mask = _pool(x, [1, 1])
    assert mask.to(torch.int32).tolist() == [[[[0xFFFF, 1, 0]]]]  # 17 positions + 1 spare


def test_mask_with_padding_stride_and_dilation():
    x = torch.tensor([[[[9.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 7.0]]]])
    _, mask = _pool(x, [2, 2], s=[2, 2], p=[1, 1], d=[2, 2])
    # 2x2 outputs; windows start at (-1, -1), (-1, 1), (1, -1), (1, 1) and read rows and
    # cols +0 and +2 (taps 0..3 row-major; the 9 at (0, 0) is on no window's grid).
    # (0,0): only (1,1) is inside -> tap 3; (0,1): (1,1), (1,3) are 0 -> first: tap 2;
    # (1,0): (1,1), (3,1) -> tap 1; (1,1): the 7 at (3,3) -> tap 3.
    m = mask.to(torch.int32)[0, 0]
    per_output = [[(int(m[t, 0]) >> q) & 1 for t in range(4)].index(1) for q in range(4)]
    assert per_output == [3, 2, 1, 3]


def test_backward_consumes_the_mask():
    x = torch.randn(2, 3, 7, 7)
    y, mask = _pool(x, [3, 3], s=[2, 2], p=[1, 1])
    grad = torch.randn_like(y)
    dx = KERNELS["MaxPoolGradWithArgmaxV1"](x, grad, mask, ksize=[1, 3, 3, 1],
                                            strides=[1, 2, 2, 1], pads=[1, 1, 1, 1])
    xr = x.clone().requires_grad_()
    torch.nn.functional.max_pool2d(xr, 3, 2, 1).backward(grad)
    torch.testing.assert_close(dx, xr.grad)


def test_backward_refuses_a_mask_without_one_bit_per_output():
    x = torch.tensor([[[[1.0, 2.0], [5.0, 3.0]]]])
    bad = torch.zeros(1, 1, 4, 2, dtype=torch.int32)
    bad[0, 0, 0, 0] = bad[0, 0, 2, 0] = 1
    with pytest.raises(ValueError, match="exactly one window offset"):
        KERNELS["MaxPoolGradWithArgmaxV1"](x, torch.ones(1, 1, 1, 1), bad.to(torch.uint16),
                                           ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                           pads=[1, 0, 0, 1])
