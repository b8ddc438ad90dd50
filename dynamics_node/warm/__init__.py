"""What the kernel build (``dynamics_node._jit_build``) runs to leave numba's cache complete: every
public function called once (``entries``) on small robots (``robots``)."""
