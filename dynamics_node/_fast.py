"""The optional C shim (dynamics_node/_fastcall.c): present when the package was built with a C
compiler (`make setup` builds it). Without it dynamics_node/dispatch.py takes its Python route for
every call (numba's dispatchers), a little slower. The shim sizes its work arrays with _layout.h,
written from layout.py."""
try:
    from ._fastcall import (ContactRoute, Route, StepRoute, conform, finite, finite_all, invoke, invoke3s, set_model,
                            step_into)

    AVAILABLE = True
except ImportError:  # pragma: no cover - only on an install without a compiler
    ContactRoute = Route = StepRoute = conform = finite = finite_all = invoke = invoke3s = set_model = step_into = None
    AVAILABLE = False
