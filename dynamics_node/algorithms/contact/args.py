"""What the contact functions take and give: ``dn.Contact`` (checked when made), the packing of a
list of contacts for the kernels (per model: body index, point in body coordinates, local axes),
and the results. The algorithms are in forward_dynamics.py (rigid contact and impact) and soft.py."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ...dispatch import vec
from ...errors import InputError, clip

DEFAULT_STIFFNESS = 1e4  # N/m: soft contact, normal and tangential (soft.py says why)
DEFAULT_DAMPING = 100.0  # N s/m


def tangent_frame(n):
    """R = [t1 t2 n] (columns, world) for a unit normal n: t1 along the world axis least aligned with
    n, made orthogonal to it."""
    e = np.zeros(3)
    e[int(np.argmin(np.abs(n)))] = 1.0
    t1 = e - n * float(n @ e)
    t1 /= np.linalg.norm(t1)
    return np.column_stack((t1, np.cross(n, t1), n))



def _real(x, name, *, lo=0.0, allow_inf=False):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a real number, got {type(x).__name__}")
    x = float(x)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise InputError(f"{name} must be finite{' or inf' if allow_inf else ''}, got {x}")
    if not x >= lo:
        raise InputError(f"{name} must be >= {lo:g}, got {x:g}")
    return x


def _vec3(x, name):
    v = vec(x, name)
    if v.shape[0] != 3:
        raise InputError(f"{name} must have 3 numbers (x y z), got {v.shape[0]}")
    if not np.all(np.isfinite(v)):
        raise InputError(f"{name} is not finite (NaN or inf): {v.tolist()}")
    if not np.all(np.abs(v) <= 1e30):
        raise InputError(f"{name} is out of range (|x| > 1e30): {v.tolist()}")
    return v


class Contact:
    """A point of a link touching a fixed surface (Featherstone §11.1-11.3).

    link: the link's name; point: (x y z) in the link frame; normal: the surface's normal in the world
    frame, pointing toward the robot (any non-zero length: it is normalised); friction: Coulomb's mu
    (0 = frictionless, float("inf") = no slip). For soft contact (dn.soft_contact_forces,
    dn.simulate_step) also: surface_point (a point of the surface plane, world; the plane is the one
    through it with that normal), stiffness and damping (N/m, N s/m, > 0: normal and tangential,
    Featherstone Eqs. 11.75-11.79). Immutable once made."""

    __slots__ = ("link", "point", "normal", "friction", "surface_point", "stiffness", "damping", "frame",
                 "_resolved")

    def __init__(self, link, point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0), friction=0.5, *,
                 surface_point=(0.0, 0.0, 0.0), stiffness=DEFAULT_STIFFNESS, damping=DEFAULT_DAMPING):
        if not isinstance(link, str):
            raise InputError(f"link must be a link name (str), got {type(link).__name__}")
        n = _vec3(normal, "normal")
        size = float(np.linalg.norm(n))
        if not size > 1e-12 * max(float(np.max(np.abs(n))), 1e-300) or not size > 0.0:
            raise InputError(f"normal must be a non-zero vector, got {n.tolist()}")
        n = n / size
        p = _vec3(point, "point")
        s = _vec3(surface_point, "surface_point")
        setattr_ = object.__setattr__
        setattr_(self, "link", link)
        setattr_(self, "point", p)
        setattr_(self, "normal", n)
        setattr_(self, "friction", _real(friction, "friction", allow_inf=True))
        setattr_(self, "surface_point", s)
        setattr_(self, "stiffness", _real(stiffness, "stiffness"))
        setattr_(self, "damping", _real(damping, "damping"))
        if not self.stiffness > 0.0 or not self.damping > 0.0:
            raise InputError(f"stiffness and damping must be > 0, got {self.stiffness:g}, {self.damping:g}")
        for a in (p, n, s):
            a.flags.writeable = False

        fr = tangent_frame(n)
        fr.flags.writeable = False
        setattr_(self, "frame", fr)  # [t1 t2 n] as columns, world
        setattr_(self, "_resolved", (None, None))

    def __setattr__(self, name, value):
        raise AttributeError("a dn.Contact is immutable: make a new one")

    def __repr__(self):
        return (f"Contact(link={clip(self.link, 60)!r}, point={tuple(self.point)}, normal={tuple(self.normal)}, "
                f"friction={self.friction!r})")

    def resolve(self, model):
        """(body index, point in body coordinates) on ``model``, cached for the last model as one
        (model, answer) pair, so that threads resolving on different models never mix them."""
        m, out = self._resolved
        if m is model:
            return out
        k = model.link_index(self.link)
        b = int(model.link_body[k])
        pb = np.array(model.link_p[3 * k:3 * k + 3]) + model.link_R[9 * k:9 * k + 9].reshape(3, 3) @ self.point
        out = (b, pb)
        object.__setattr__(self, "_resolved", (model, out))
        return out


class Packed(NamedTuple):
    contacts: tuple
    body: np.ndarray    # (k,) int64
    point: np.ndarray   # (3k,) body coordinates
    frame: np.ndarray   # (9k,) R_j row-major, columns [t1 t2 n] (world)
    mu: np.ndarray      # (k,)
    k: int


_CACHE: dict = {}
_CACHE_MAX = 256


def cached_pack(model, contacts):
    """pack() of a list of contacts already seen on this model (a contact is immutable, so the
    packing of the same objects is the same), or None when the argument is not a plain list or tuple
    of dn.Contact or fails to pack (the checked route then says why). The cache keeps at most
    _CACHE_MAX entries, and its keys hold the model and the contacts."""
    t = type(contacts)
    if t is not list and t is not tuple:
        return None
    key = (model, *contacts)
    p = _CACHE.get(key)
    if p is None:
        try:
            p = pack(model, contacts)
        except InputError:
            return None
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = p
    return p


def pack(model, contacts, name="contacts") -> Packed:
    """The contacts as the kernels take them, or InputError naming the bad entry."""
    if isinstance(contacts, (Contact, str, bytes, Mapping)) or not hasattr(contacts, "__iter__"):
        raise InputError(f"{name} must be a list of dn.Contact, got {type(contacts).__name__}")
    cs = tuple(contacts)
    k = len(cs)
    body = np.empty(k, dtype=np.int64)
    point = np.empty(3 * k)
    frame = np.empty(9 * k)
    mu = np.empty(k)
    for j, c in enumerate(cs):
        if type(c) is not Contact:
            raise InputError(f"{name}[{j}] must be a dn.Contact, got {type(c).__name__}")
        try:
            b, pb = c.resolve(model)
        except InputError as e:
            raise InputError(f"{name}[{j}]: {e}") from None
        if b < 0:
            raise InputError(f"{name}[{j}]: link '{clip(c.link, 60)}' is fixed to the world: a contact on it "
                             "can neither move nor be pushed")
        body[j] = b
        point[3 * j:3 * j + 3] = pb
        frame[9 * j:9 * j + 9] = c.frame.reshape(-1)
        mu[j] = c.friction
    return Packed(cs, body, point, frame, mu, k)  # shared by the cache: never written


def to_world(packed, f_local):
    """(k x 3) world vectors from the local [t1 t2 n] components."""
    k = packed.body.shape[0]
    R = packed.frame.reshape(k, 3, 3)
    return np.einsum("kij,kj->ki", R, f_local.reshape(k, 3))


class ContactResult(NamedTuple):
    """contact_forward_dynamics: qdd (nv), forces (k x 3, world: the environment on the robot at each
    point), states (one of "separating", "sticking", "sliding" per contact)."""
    qdd: np.ndarray
    forces: np.ndarray
    states: tuple


class ImpactResult(NamedTuple):
    """impact: qd after the impact (nv), impulses (k x 3, world, N s), states per contact."""
    qd: np.ndarray
    impulses: np.ndarray
    states: tuple
