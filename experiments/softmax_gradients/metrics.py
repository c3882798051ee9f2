"""What each metric the softmax_gradients experiment logs means (its ``METRICS``).

Logged once per logit scale (``step`` is the index into ``params.scales``), for inputs drawn
at random (``grad_random``) and with tied row maxima (``grad_tied``), in each dtype.
"""

from toolkit.lab.results.schema import MetricDoc

_KIND = "{kind:random|tied}"
_DTYPE = "{dtype:float64|float32|bfloat16|float16}"

METRICS = (
    MetricDoc(key=f"{{variant}}/grad_{_KIND}/{_DTYPE}_max_abs_err",
              meaning="largest absolute error of the gradient of Σ w ⊙ softmax(x) in that "
                      "dtype, blocked or unblocked, against torch.softmax's float64 gradient "
                      "of the same input; empty when the gradient is not finite"),
    MetricDoc(key=f"torch/grad_{_KIND}/{_DTYPE}_max_abs_err",
              meaning="the same error for torch.softmax's own gradient in that dtype: the "
                      "library's baseline"),
    MetricDoc(key=f"upcast/grad_{_KIND}/{{dtype:bfloat16|float16}}_max_abs_err",
              meaning="the same error for the blocked softmax computed in float32 "
                      "(dtype=torch.float32) on a half-precision input"),
    MetricDoc(key=f"blocked_vs_unblocked/grad_{_KIND}/{_DTYPE}_max_abs_diff",
              meaning="largest absolute difference between the blocked and the unblocked "
                      "gradient (zero in exact arithmetic: softmax is shift-invariant)"),
)
