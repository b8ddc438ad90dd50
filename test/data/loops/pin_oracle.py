"""Pinocchio (test-only oracle) for closed loops: constraintDynamics with a RigidConstraintModel
between the two joint frames of a loop joint (CONTACT_3D for a point/spherical closure, CONTACT_6D
for a weld).  Works in OUR coordinates: joints are matched by name."""
from __future__ import annotations

import numpy as np
import pinocchio as pin


class PinLoop:
    def __init__(self, urdf_path, our_model, loop_name, contact="3D", max_iter=20):
        self.pm = pin.buildModelFromUrdf(str(urdf_path))
        self.pd = self.pm.createData()
        names = list(self.pm.names)[1:]
        assert sorted(names) == sorted(our_model.joint_names), (names, our_model.joint_names)
        self.perm = np.array([self.pm.joints[self.pm.getJointId(n)].idx_v for n in our_model.joint_names])
        # position slots (continuous joints are (cos, sin) in Pinocchio)
        self.qslots = [(self.pm.joints[self.pm.getJointId(n)].idx_q, self.pm.joints[self.pm.getJointId(n)].nq)
                       for n in our_model.joint_names]
        lj = {l.name: l for l in our_model.loops}[loop_name]
        fp = self.pm.frames[self.pm.getFrameId(lj.predecessor)]
        fs = self.pm.frames[self.pm.getFrameId(lj.successor)]
        P1 = fp.placement * pin.SE3(np.asarray(lj.X_P))
        P2 = fs.placement * pin.SE3(np.asarray(lj.X_S))
        ct = pin.ContactType.CONTACT_3D if contact == "3D" else pin.ContactType.CONTACT_6D
        self.cm = pin.RigidConstraintModel(ct, self.pm, fp.parentJoint, P1, fs.parentJoint, P2,
                                           pin.ReferenceFrame.LOCAL)
        self.cms = pin.StdVec_RigidConstraintModel()
        self.cms.append(self.cm)
        self.cds = pin.StdVec_RigidConstraintData()
        self.cds.append(self.cm.createData())
        pin.initConstraintDynamics(self.pm, self.pd, self.cms, self.cds)
        self.prox = pin.ProximalSettings(1e-14, 1e-12, max_iter)
        self.contact = contact

    def _to_pin(self, x):
        out = np.zeros(self.pm.nv)
        out[self.perm] = x
        return out

    def q_to_pin(self, q):
        out = np.zeros(self.pm.nq)
        for (iq, nq), x in zip(self.qslots, q):
            if nq == 1:
                out[iq] = x
            else:
                out[iq], out[iq + 1] = np.cos(x), np.sin(x)
        return out

    def forward(self, q, qd, tau):
        """(qdd in our order, wrench (f, n) the predecessor exerts on the successor, world axes, about
        the successor-side contact point)."""
        a = pin.constraintDynamics(self.pm, self.pd, self.q_to_pin(q), self._to_pin(qd), self._to_pin(tau),
                                   self.cms, self.cds, self.prox)
        cd = self.cds[0]
        R1 = cd.oMc1.rotation
        f = np.array(cd.contact_force.vector)  # on the joint-1 (predecessor) side, c1 frame
        w = np.zeros(6)
        w[:3] = -R1 @ f[:3]
        if self.contact == "6D":
            w[3:] = -R1 @ f[3:]
        return np.asarray(a)[self.perm], w

    def call(self, q, qd, tau):
        return pin.constraintDynamics(self.pm, self.pd, q, qd, tau, self.cms, self.cds, self.prox)
