"""Exceptions of the dynamics core. Every message names what is wrong (file, element, joint, link, field)."""


class DynamicsError(Exception):
    """Base class of every error raised by dynamics_node."""


class ModelError(DynamicsError):
    """The robot description cannot be turned into a valid model (names the file, element, joint or link)."""


class InputError(DynamicsError, ValueError):
    """An argument of a dynamics call is invalid: wrong length, unknown joint or link, NaN or inf."""


class SingularMassMatrixError(InputError):
    """A computation had to invert the joint-space inertia H, and H is singular (names the massless link)."""
