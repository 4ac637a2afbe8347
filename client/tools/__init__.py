"""Host-side helpers for kernels, at Triton's paths (`despina.tools.tensor_descriptor`)."""
