"""Values the kernels read as module attributes (``cfg.OFFSET``): Triton compiles them in, and its own cache key
does not see them; aot's digest does (docs/triton.md)."""

import triton.language as tl

OFFSET = tl.constexpr(0.5)
