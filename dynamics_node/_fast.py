"""The optional C shim (dynamics_node/_fastcall.c): present when the package was built with a C
compiler (`make setup` builds it). Without it the wrappers call the numba dispatchers directly."""
try:
    from ._fastcall import call1, call1m, call3, call3s, set_layout

    from .layout import WORK_BODY, WORK_DOF, WORK_EXTRA

    set_layout(WORK_BODY, WORK_DOF, WORK_EXTRA)
    AVAILABLE = True
except ImportError:  # pragma: no cover - only on an install without a compiler
    call1 = call1m = call3 = call3s = None
    AVAILABLE = False
