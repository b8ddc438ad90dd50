"""The simulated robot's environment (no rclpy): the floor, the box obstacles, and which collision
points touch them at a step.

Surfaces: the floor plane `simulation_floor` and the boxes of `simulation_obstacles` (x y z sx sy sz:
centre and size in the root link's frame, axis-aligned: a table, a wall). Points: the collision
points of shapes.py, or the explicit `simulation_contact_points`.

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

The same environment packed for the compiled step (`envi`, `envf`: layout.SIM_*, a WORLD environment,
whose selection sim/select.py does in compiled code as select() does here), and the surface
states as one array: a row per (object, surface) pair, object = point then sphere, surface 0 = the floor,
1 + 6 b + face = box b's face (2 axis + 0 on its + side, 1 on its - side); `slot(key)` maps a pair's key to
its row. `took(...)` records the pairs of a step made by the compiled kernel (their world points and
rows); `keys` and `contacts` are then made from them when asked (contacts by select() at that q).
"""
from __future__ import annotations

import numpy as np

import dynamics_node as dn
from ..algorithms.tree.kinematics import body_poses
from ..layout import (SB_C, SB_FACE_R, SB_FACE_S, SB_H, SE_FLOOR, SE_MODE, SE_NBOX, SE_NPT, SE_NSPH, SF_D,
                      SF_FLOOR_R, SF_FLOOR_S, SF_K, SF_MARGIN, SF_MU, SIM_BOX, SIM_FACES, SIM_HEAD_F, SIM_HEAD_I,
                      SIM_PT_I, SIM_SPHERE, SIM_WORLD, SIM_WPOINT, SP_BODY, SQ_C, SQ_P, SQ_R, SQ_RUN, SR_P,
                      SR_RADIUS)

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
        self.nslot = 1 + SIM_FACES * len(self.boxes)
        self.cache = {}   # key -> dn.Contact of a fixed point
        self._lazy = None  # took_lazily's buffers, until slots or world_points are read
        self.state = np.zeros((self.npoints * self.nslot, 3))  # the surface state of every pair (module docstring)
        self.envi, self.envf = self._pack()
        self.reset()

    @staticmethod
    def _in_bodies(model, links, pts):
        body = np.asarray([model.link_body[model.link_index(lk)] for lk in links], dtype=np.intp)
        pb = np.empty((len(links), 3))
        for k, (lk, x) in enumerate(zip(links, pts)):
            i = model.link_index(lk)
            pb[k] = model.link_R[9 * i:9 * i + 9].reshape(3, 3) @ x + model.link_p[3 * i:3 * i + 3]
        return body, pb

    def _surface(self, normal, point):
        """(surface point, axes [t1 t2 n] row-major) of a plane as its dn.Contact holds them."""
        c = dn.Contact("surface", normal=normal, surface_point=point)
        return c.surface_point, c.frame.reshape(-1)

    def _pack(self):
        """(envi, envf): this environment as the compiled step takes it (a WORLD environment, layout.py)."""
        npt, nsph, nbox = len(self.point_link), len(self.spheres), len(self.boxes)
        envi = np.zeros(SIM_HEAD_I + SIM_PT_I * (npt + nsph), dtype=np.int64)
        envi[SE_MODE], envi[SE_NPT], envi[SE_NSPH], envi[SE_NBOX] = SIM_WORLD, npt, nsph, nbox
        envi[SE_FLOOR] = int(self.floor is not None)
        envi[SIM_HEAD_I + SP_BODY::SIM_PT_I] = np.concatenate((self.point_body, self.sphere_body))
        envf = np.zeros(SIM_HEAD_F + SIM_WPOINT * npt + SIM_SPHERE * nsph + SIM_BOX * nbox)
        envf[SF_K], envf[SF_D], envf[SF_MU] = self.kw["stiffness"], self.kw["damping"], self.kw["friction"]
        envf[SF_MARGIN] = MARGIN
        if self.floor is not None:
            sp, R = self._surface(self.floor[1], self.floor[0])
            envf[SF_FLOOR_S:SF_FLOOR_S + 3], envf[SF_FLOOR_R:SF_FLOOR_R + 9] = sp, R
        o = SIM_HEAD_F
        W = envf[o:o + SIM_WPOINT * npt].reshape(npt, SIM_WPOINT)
        W[:, SQ_P:SQ_P + 3] = self.point_pb
        for j in range(npt):  # each point's run: it and the points after it of the same body, in one sphere
            e = j + 1
            while e < npt and self.point_body[e] == self.point_body[j]:
                e += 1
            P = self.point_pb[j:e]
            c = 0.5 * (P.min(axis=0) + P.max(axis=0))
            W[j, SQ_C:SQ_C + 3], W[j, SQ_R], W[j, SQ_RUN] = c, float(np.sqrt(((P - c) ** 2).sum(axis=1)).max()), e - j
        o += SIM_WPOINT * npt
        S = envf[o:o + SIM_SPHERE * nsph].reshape(nsph, SIM_SPHERE)
        S[:, SR_P:SR_P + 3] = self.sphere_pb
        S[:, SR_RADIUS] = [sph.radius for sph in self.spheres]
        o += SIM_SPHERE * nsph
        for b, (c, h) in enumerate(self.boxes):
            B = envf[o + SIM_BOX * b:o + SIM_BOX * (b + 1)]
            B[SB_C:SB_C + 3], B[SB_H:SB_H + 3] = c, h
            for f in range(SIM_FACES):
                ax, sg = divmod(f, 2)
                n = np.zeros(3)
                n[ax] = 1.0 if sg == 0 else -1.0
                sp = c.copy()
                sp[ax] += n[ax] * h[ax]
                B[SB_FACE_S + 3 * f:SB_FACE_S + 3 * f + 3], B[SB_FACE_R + 9 * f:SB_FACE_R + 9 * f + 9] = \
                    self._surface(n, sp)
        return envi, envf

    def slot(self, key):
        """The state row of a pair's key (select's keys)."""
        npt = len(self.point_link)
        if key[0] in ("f", "sf"):
            return self.nslot * (key[1] + (npt if key[0] == "sf" else 0))
        obj = key[2] + (npt if key[0] == "sb" else 0)
        return self.nslot * obj + 1 + SIM_FACES * key[1] + 2 * key[3] + (0 if key[4] > 0 else 1)

    def key(self, slot):
        """The key of a state row (slot's inverse)."""
        npt = len(self.point_link)
        obj, sf = divmod(int(slot), self.nslot)
        sphere = obj >= npt
        i = obj - npt if sphere else obj
        if sf == 0:
            return ("sf" if sphere else "f", i)
        b, face = divmod(sf - 1, SIM_FACES)
        ax, side = divmod(face, 2)
        return ("sb", i, b, ax, 1.0 if side == 0 else -1.0) if sphere else ("b", b, i, ax, 1.0 if side == 0 else -1.0)

    def took(self, q, slots, points):
        """The pairs of a step made by the compiled kernel at q: their state rows and world points."""
        self._q, self.slots, self.world_points = q, slots, points
        self._keys = self._contacts = None

    def took_lazily(self, q, info, n0, P, k):
        """took(q, info[n0:n0 + k], P[:3 k] as k x 3) with the copies made only when slots or world_points are
        read: info and P are the kernel's output buffers of this step, which the world does not write again
        before it has called this once more (sim/world.py: two sets of outputs, used in turn)."""
        self._q, self._lazy = q, (info, n0, P, k)
        self._keys = self._contacts = None

    def _made(self):
        lz = self._lazy
        if lz is not None:
            self._lazy = None
            info, n0, P, k = lz
            self._slots, self._world_points = info[n0:n0 + k].copy(), P[:3 * k].reshape(k, 3).copy()

    @property
    def slots(self):
        self._made()
        return self._slots

    @slots.setter
    def slots(self, value):
        self._made()  # a pending step's points first, so that world_points stays of the same step
        self._slots = value

    @property
    def world_points(self):
        self._made()
        return self._world_points

    @world_points.setter
    def world_points(self, value):
        self._made()
        self._world_points = value

    @property
    def count(self):
        """The pairs in the last step's problem."""
        return len(self.slots)

    @property
    def keys(self):
        if self._keys is None:
            self._keys = [self.key(s) for s in self.slots]
        return self._keys

    @property
    def contacts(self):
        """The last step's dn.Contact of every pair (made by select() at its q when the compiled kernel
        took the step)."""
        if self._contacts is None:
            self.select(self._q)
        return self._contacts

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
        self._q, self._keys, self._contacts = q, keys, contacts
        self.slots = np.asarray([self.slot(k) for k in keys], dtype=np.intp)
        self.world_points = np.asarray(pts, dtype=float).reshape(-1, 3)
        return contacts, self.state[self.slots]

    def points_at(self, q):
        """World positions of the fixed collision points, then the spheres' centres, at q."""
        Rb, pb = body_poses(self.model, q)
        P = np.einsum("kij,kj->ki", Rb[self.point_body], self.point_pb) + pb[self.point_body]
        C = np.einsum("kij,kj->ki", Rb[self.sphere_body], self.sphere_pb) + pb[self.sphere_body]
        return np.vstack((P, C))

    def store(self, state):
        """The states after a step of select()'s pairs; every other pair's surface has recovered (zero)."""
        self.state[:] = 0.0
        self.state[self.slots] = state

    def reset(self):
        self.state[:] = 0.0
        self.took(None, np.zeros(0, dtype=np.intp), np.zeros((0, 3)))
        self._keys, self._contacts = [], []

    def penetration(self, q):
        """The deepest penetration (m, >= 0) of any collision point into the floor or a box at q."""
        self.select(q)
        deep = 0.0
        for c, P in zip(self.contacts, self.world_points):
            deep = max(deep, -float(c.normal @ (P - c.surface_point)))
        return deep
