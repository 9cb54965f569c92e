"""Debugging habits, as functions: look at what you have before you reason about it.

The tools of chapter 06, one module each (this module only gathers them, so that
``from course_utils.diagnose import ...`` keeps working):

- ``course_utils.describe``: ``describe(*tensors)`` prints each tensor's shape, dtype, device,
  layout and autograd state, aligned; ``tensor_summary(t)`` gives the same facts as a dict.
- ``course_utils.shape_trace``: ``shape_trace(model, *inputs)``, each layer's input and output
  shapes in the order they ran, stopping at the layer that failed, with its error.
- ``course_utils.grad_norms``: ``gradient_norms(model)``, after ``backward()``, each
  parameter's gradient norm, the ones that got none, and the total ``clip_grad_norm_`` measures.
- ``course_utils.nonfinite``: ``first_non_finite(model, *inputs)``, where the first nan or inf
  appears: in a parameter, in the data, or in the output of which layer.
- ``course_utils.forward_hooks``: the forward pass watched by hooks that the shape trace and the
  nan search share.

Nothing is moved to another device, and each model is left as it was found (its mode, its
hooks, its buffers, its gradients). Each result prints as an aligned table (``str``) and renders
as HTML in a notebook (``_repr_html_``), so ``show(result)`` or ending a cell with it both work.
"""

from course_utils.describe import describe, tensor_summary
from course_utils.forward_hooks import MODEL
from course_utils.grad_norms import GradientNorms, ParameterGradient, gradient_norms
from course_utils.nonfinite import NonFinite, first_non_finite
from course_utils.shape_trace import LayerCall, ShapeTrace, shape_trace

__all__ = [
    "MODEL",
    "GradientNorms",
    "LayerCall",
    "NonFinite",
    "ParameterGradient",
    "ShapeTrace",
    "describe",
    "first_non_finite",
    "gradient_norms",
    "shape_trace",
    "tensor_summary",
]
