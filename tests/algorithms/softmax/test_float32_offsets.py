"""float32 softmax, log-softmax and logsumexp far from 0: no cancellation beyond the result's own.

Issue 28 audits every float32 path for the kind of cancellation that made EM's float32
likelihood wrong. Here the shift ``z = x − max`` is exact for entries near the max (Sterbenz)
and ``log Σ exp(z)`` lies in ``[0, log n]``, so rows offset by up to 1e7 must keep the standard
error bounds (Blanchard, Higham & Higham 2021, https://doi.org/10.1093/imanum/draa038), with
``u = 2^-24`` and a naive sum's ``(n − 1) u`` so that they hold for any summation order:

- ``|LSE − LSE*| <= u (|LSE*| + log n + n + 2)``;
- ``|log_softmax_i − ls*_i| <= u (2 |ls*_i| + n + 2)`` (``x_i − max`` rounds once when the two
  are far apart, e.g. of opposite signs);
- ``|softmax_i / s*_i − 1| <= u (|z_i| + n + 3)``;

against float64 on the same float32 inputs. An expanded or unshifted formula would lose
``u·|offset|`` absolutely (0.6 at offset 1e7) in log-softmax.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.algorithms.softmax import log_softmax, logsumexp, stable_softmax

U = 2.0**-24


@st.composite
def offset_rows(draw: st.DrawFn) -> torch.Tensor:
    n = draw(st.sampled_from([2, 3, 17, 64]))
    offset = draw(st.floats(-7.0, 7.0))
    spread = draw(st.floats(-3.0, 3.0))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = (np.sign(offset) * 10.0 ** abs(offset) + 10.0 ** spread * rng.normal(size=(3, n)))
    return torch.as_tensor(x.astype(np.float32))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(offset_rows())
def test_float32_rows_far_from_zero_keep_the_rounding_error_bounds(x: torch.Tensor) -> None:
    n = x.shape[-1]
    x64 = x.double()  # the same numbers
    z = x64 - x64.amax(-1, keepdim=True)
    lse_ref = torch.logsumexp(x64, -1)
    err = (logsumexp(x).double() - lse_ref).abs()
    assert (err <= U * (lse_ref.abs() + math.log(n) + n + 2)).all(), err.max()
    ls_ref = torch.log_softmax(x64, -1)
    err = (log_softmax(x).double() - ls_ref).abs()
    assert (err <= U * (2 * ls_ref.abs() + n + 2)).all(), err.max()
    sm_ref = torch.softmax(x64, -1)
    kept = sm_ref > 1e-30  # below float32's normal range the relative bound does not apply
    rel = (stable_softmax(x).double() / sm_ref - 1).abs()[kept]
    assert (rel <= U * (z.abs()[kept] + n + 3)).all(), rel.max()
