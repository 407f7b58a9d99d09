"""${name} against its reference ops. wheelfactory runs these against every built wheel (kernel.toml
[test]); they import the installed package, never the source tree (python/ is not on sys.path).
The CUDA cases run only where torch sees a GPU.
"""

from __future__ import annotations

import pytest
import torch

import ${name}
from ${name} import _reference

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def randn(*shape: int, device: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)


def test_the_ops_are_compiled_code() -> None:
    # In reference mode the tests below would compare the reference ops with themselves.
    info = ${name}.backend_info()
    assert info["mode"] in ("prebuilt", "jit"), info["reason"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_${op}_matches_the_reference(device: str, dtype: torch.dtype) -> None:
    x = randn(7, 129, device=device, dtype=dtype, seed=1)
    y = randn(7, 129, device=device, dtype=dtype, seed=2)
    expected = torch.empty_like(x)
    _reference.${op}(expected, x, y, 0.75)
    torch.testing.assert_close(${name}.${op}(x, y, alpha=0.75), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_${op}_writes_out_and_reads_strided_inputs(device: str) -> None:
    x = randn(65, 16, device=device, dtype=torch.float32, seed=3).t()  # not contiguous
    y = randn(16, 65, device=device, dtype=torch.float32, seed=4)
    out = torch.full((16, 65), float("nan"), device=device)
    assert ${name}.${op}(x, y, alpha=-1.5, out=out) is out
    torch.testing.assert_close(out, x + -1.5 * y)


def test_${op}_names_the_bad_argument() -> None:
    with pytest.raises(RuntimeError, match="same shape"):
        ${name}.${op}(torch.zeros(2, 3), torch.zeros(3, 2))
