"""The simulated robot's environment (no rclpy): the floor, the box obstacles, and which collision
points touch them at a step (issue 30 §2-3).

Surfaces: the floor plane `simulation_floor` and the boxes of `simulation_obstacles` (x y z sx sy sz:
centre and size in the root link's frame, axis-aligned: a table, a wall). Points: the collision
points of sim_shapes.py, or the explicit `simulation_contact_points`.

At every step `select(q)` finds the (point, surface) pairs within MARGIN of touching: a point against
the floor plane; against a box, the face it is nearest to leaving through (the axis where it is
farthest out, or least deep), only while it lies within the face's extent along the two other axes
(so a point past the table's edge is free and falls); a sphere by its lowest point toward that
surface. Each pair is a dn.Contact with the floor's friction, stiffness and damping
(`simulation_friction`, `simulation_stiffness`, `simulation_damping`), Featherstone §11.8 as before;
its surface state (x1 x2 z) is kept while the pair stays within MARGIN and taken as recovered (zero)
after (the surface recovers at K/D = 100 /s by default, and the pair is at least MARGIN apart then).
dn.simulate_step's speculative contacts then act from the step in which a point would reach its
surface. MARGIN covers |v| dt up to 10 m/s at 1 kHz.
"""
from __future__ import annotations

import numpy as np

import dynamics_node as dn
from ..algorithms.kinematics import body_poses

MARGIN = 0.01  # m


class Environment:
    def __init__(self, model, cfg, shapes):
        self.model = model
        self.kw = {"friction": cfg.simulation_friction, "stiffness": cfg.simulation_stiffness,
                   "damping": cfg.simulation_damping}
        floor = cfg.simulation_floor
        self.floor = None
        if floor:
            n = np.asarray(floor[3:], dtype=float)
            self.floor = (np.asarray(floor[:3], dtype=float), n / np.linalg.norm(n))
        ob = np.asarray(cfg.simulation_obstacles, dtype=float).reshape(-1, 6)
        self.boxes = [(b[:3].copy(), 0.5 * b[3:].copy()) for b in ob]
        self.links = sorted({lk for lk, _ in shapes.points} | {s.link for s in shapes.spheres})
        self.point_link = [lk for lk, _ in shapes.points]
        self.point_local = np.asarray([p for _, p in shapes.points], dtype=float).reshape(-1, 3)
        # each point in its body's frame (the link's fixed offset applied once): P = R_b pb + p_b
        self.point_body, self.point_pb = self._in_bodies(model, self.point_link, self.point_local)
        self.spheres = list(shapes.spheres)
        self.sphere_body, self.sphere_pb = self._in_bodies(model, [s.link for s in self.spheres],
                                                           [s.center for s in self.spheres])
        self.npoints = len(shapes.points) + len(self.spheres)
        self.cache = {}   # key -> dn.Contact of a fixed point
        self.state = {}   # key -> surface state (3,)
        self.keys, self.contacts, self.world_points = [], [], np.zeros((0, 3))

    @staticmethod
    def _in_bodies(model, links, pts):
        body = np.asarray([model.link_body[model.link_index(lk)] for lk in links], dtype=np.intp)
        pb = np.empty((len(links), 3))
        for k, (lk, x) in enumerate(zip(links, pts)):
            i = model.link_index(lk)
            pb[k] = model.link_R[9 * i:9 * i + 9].reshape(3, 3) @ x + model.link_p[3 * i:3 * i + 3]
        return body, pb

    def active(self):
        return bool(self.npoints) and (self.floor is not None or bool(self.boxes))

    def _contact(self, key, link, point, normal, surface_point, cache):
        c = self.cache.get(key) if cache else None
        if c is None:
            c = dn.Contact(link, point=point, normal=normal, surface_point=surface_point, **self.kw)
            if cache:
                self.cache[key] = c
        return c

    def _faces(self, P, pad):
        """Per box, for points P (n x 3): (candidate mask, axis, sign, distance beyond the face)."""
        out = []
        for c, h in self.boxes:
            d = P - c
            u = np.abs(d) - h
            a = np.argmax(u, axis=1)
            r = np.arange(len(P))
            um = u[r, a] - pad
            u2 = u.copy()
            u2[r, a] = -np.inf
            ok = (um < MARGIN) & (u2.max(axis=1) <= 0.0)
            out.append((ok, a, np.where(d[r, a] >= 0.0, 1.0, -1.0), um))
        return out

    def select(self, q):
        """The contacts of this step and their surface states (module docstring)."""
        Rb, pb = body_poses(self.model, q)
        keys, contacts, pts = [], [], []
        Pw = np.einsum("kij,kj->ki", Rb[self.point_body], self.point_pb) + pb[self.point_body]
        pid = np.arange(len(Pw))
        if self.floor is not None and len(Pw):
            p0, n = self.floor
            for k in pid[(Pw - p0) @ n < MARGIN]:
                key = ("f", int(k))
                contacts.append(self._contact(key, self.point_link[k], self.point_local[k], n, p0, True))
                keys.append(key)
                pts.append(Pw[k])
        for b, (ok, a, sg, _um) in enumerate(self._faces(Pw, 0.0) if len(Pw) else ()):
            c, h = self.boxes[b]
            for k in pid[ok]:
                ax, s = int(a[k]), float(sg[k])
                n = np.zeros(3)
                n[ax] = s
                sp = c.copy()
                sp[ax] += s * h[ax]
                key = ("b", b, int(k), ax, s)
                contacts.append(self._contact(key, self.point_link[k], self.point_local[k], n, sp, True))
                keys.append(key)
                pts.append(Pw[k])
        for i, sph in enumerate(self.spheres):
            b = self.sphere_body[i]
            C = Rb[b] @ self.sphere_pb[i] + pb[b]
            T = dn.link_pose(self.model, q, sph.link)
            surf = []
            if self.floor is not None:
                p0, n = self.floor
                if (C - p0) @ n - sph.radius < MARGIN:
                    surf.append((("sf", i), n, p0))
            for b, (ok, a, sg, _um) in enumerate(self._faces(C[None, :], sph.radius)):
                if ok[0]:
                    c, h = self.boxes[b]
                    n = np.zeros(3)
                    n[int(a[0])] = sg[0]
                    sp = c.copy()
                    sp[int(a[0])] += sg[0] * h[int(a[0])]
                    surf.append((("sb", i, b, int(a[0]), float(sg[0])), n, sp))
            for key, n, sp in surf:
                P = C - sph.radius * n
                contacts.append(self._contact(key, sph.link, T[:3, :3].T @ (P - T[:3, 3]), n, sp, False))
                keys.append(key)
                pts.append(P)
        self.keys, self.contacts = keys, contacts
        self.world_points = np.asarray(pts, dtype=float).reshape(-1, 3)
        st = np.asarray([self.state.get(k, (0.0, 0.0, 0.0)) for k in keys], dtype=float).reshape(-1, 3)
        return contacts, st

    def points_at(self, q):
        """World positions of the fixed collision points, then the spheres' centres, at q."""
        Rb, pb = body_poses(self.model, q)
        P = np.einsum("kij,kj->ki", Rb[self.point_body], self.point_pb) + pb[self.point_body]
        C = np.einsum("kij,kj->ki", Rb[self.sphere_body], self.sphere_pb) + pb[self.sphere_body]
        return np.vstack((P, C))

    def store(self, state):
        self.state = {k: state[j].copy() for j, k in enumerate(self.keys)}

    def reset(self):
        self.state = {}
        self.keys, self.contacts, self.world_points = [], [], np.zeros((0, 3))

    def penetration(self, q):
        """The deepest penetration (m, >= 0) of any collision point into the floor or a box at q."""
        self.select(q)
        deep = 0.0
        for c, P in zip(self.contacts, self.world_points):
            deep = max(deep, -float(c.normal @ (P - c.surface_point)))
        return deep
