"""Exceptions of the dynamics core. Every message names what is wrong (file, element, joint, link, field)."""


class ConfigError(Exception):
    """A parameter value of the node or the simulator is invalid; the message names the parameter, the
    value and what to do."""


class DynamicsError(Exception):
    """Base class of every error raised by dynamics_node."""


class ModelError(DynamicsError):
    """The robot description cannot be turned into a valid model (names the file, element, joint or link)."""


class InputError(DynamicsError, ValueError):
    """An argument of a dynamics call is invalid: wrong length, unknown joint or link, NaN or inf."""


class SingularMassMatrixError(InputError):
    """A computation had to invert the joint-space inertia H, and H is singular (names the massless link)."""


class RangeError(InputError):
    """A computation from finite inputs failed as numbers beyond float64's range or precision make it
    fail: its result overflowed, a factorisation met inf or NaN, a matrix is singular or rank-deficient to
    working precision, an iteration could not converge. The call route (dispatch.py, batch_errors.py)
    names the input entry out of range (field, index, joint, value) when there is one; ``symptom`` is
    what failed, short."""

    def __init__(self, message, symptom=None):
        super().__init__(message)
        self.symptom = symptom


class ModelWarning(UserWarning):
    """The robot description loads, but something in it is not physical or is ignored: an inertia that
    breaks the triangle inequality or is indefinite, a massless subtree on a movable joint, a
    ``<transmission>`` or ``<mimic>`` naming an unknown joint. Names the file, the link or joint and by
    how much. ``load_model(..., strict=True)`` raises each as a ModelError instead."""


MESSAGE_CLIP = 200  # characters of an echoed value or name list kept in a message


def clip(text, limit: int = MESSAGE_CLIP) -> str:
    """``text`` cut to about ``limit`` characters, saying its length and how many were left out
    (messages stay short, and still say what was given)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters, {len(text) - limit} more characters not shown)"


def clip_names(names, limit: int = MESSAGE_CLIP, quote: bool = True) -> str:
    """A comma-separated name list cut to about ``limit`` characters, with a count of the names left out."""
    names = list(names)
    out, size = [], 0
    for k, n in enumerate(names):
        s = repr(clip(n, 60)) if quote else clip(n, 60)
        if out and size + len(s) + 2 > limit:
            return ", ".join(out) + f" and {len(names) - k} more"
        out.append(s)
        size += len(s) + 2
    return ", ".join(out)
