"""Gravity compensation checked in an independent simulator (MuJoCo, test-only).

MuJoCo loads urdf/arm7.urdf itself (visual/collision stripped; joint damping, Coulomb friction
loss and armature set to zero and constraints disabled, since the node compensates gravity only).
The simulation loop runs here: it publishes MuJoCo's joint states, waits for the node's
~/gravity_torques answer to that very message (matched by stamp), applies the torques as
qfrc_applied and steps. Nothing but the applied torque comes from our code. The arm must hold
still: drift under 1 mrad over 2 s of simulated time (uncompensated it falls by far more).
"""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

import node_support as ns

mujoco = pytest.importorskip("mujoco")

pytestmark = [
    pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed"),
    pytest.mark.skipif(not ns.core_available(), reason="the dynamics core is not importable"),
]

NAME = "mj_arm7"
JS_TOPIC = "/mujoco_test/joint_states"
DT = 0.001
SIM_TIME = 2.0
Q0 = {"joint1": 0.4, "joint2": 0.9, "joint3": -0.5, "joint4": -1.3, "joint5": 0.6, "joint6": 1.1,
      "joint7": -0.3}


def _mujoco_arm():
    xml = ns.ARM7.read_text()
    xml = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", xml, flags=re.S)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.timestep = DT
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.dof_armature[:] = 0.0
    d = mujoco.MjData(m)
    names = [m.joint(i).name for i in range(m.njnt)]
    for i, n in enumerate(names):
        d.qpos[m.jnt_qposadr[i]] = Q0[n]
    d.qvel[:] = 0.0
    mujoco.mj_forward(m, d)
    return m, d, names


def test_uncompensated_arm_falls():
    """The check below is meaningful: without torques the arm moves far more than 1 mrad."""
    m, d, _ = _mujoco_arm()
    q0 = d.qpos.copy()
    for _ in range(int(0.5 / DT)):
        mujoco.mj_step(m, d)
    assert np.max(np.abs(d.qpos - q0)) > 0.05


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ns.ARM7), "joint_states_topic": JS_TOPIC})


def test_mujoco_arm_holds_still_with_the_nodes_gravity_torques(node):
    from sensor_msgs.msg import JointState
    c = ns.ros()
    m, d, names = _mujoco_arm()
    dof = {n: m.jnt_dofadr[i] for i, n in enumerate(names)}
    qadr = {n: m.jnt_qposadr[i] for i, n in enumerate(names)}
    order = names[::-1]  # publish in an order of our own: the node must map by name
    pub = c.publisher(JointState, JS_TOPIC)
    torques, sub = c.subscribe(JointState, node.path("gravity_torques"))
    c.wait_for_subscriber(pub)
    # wait until the answer path is connected, then start from a clean queue
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pub.publish(ns.joint_state(order, [d.qpos[qadr[n]] for n in order], stamp_ns=1))
        if ns.drain(torques, timeout=0.1):
            break
    time.sleep(0.2)
    ns.drain(torques)

    q0 = d.qpos.copy()
    steps = int(round(SIM_TIME / DT))
    worst = 0.0
    t0 = time.monotonic()
    for k in range(steps):
        stamp = 10_000_000_000 + k * 1_000_000
        pub.publish(ns.joint_state(order, [d.qpos[qadr[n]] for n in order],
                                   velocities=[d.qvel[dof[n]] for n in order], stamp_ns=stamp))
        answer = None
        while answer is None:
            msg = torques.get(timeout=30.0)  # raises queue.Empty: no answer at all (a hang)
            if ns.stamp_ns(msg) == stamp:
                answer = msg
        d.qfrc_applied[:] = 0.0
        for n, tau in zip(answer.name, answer.effort):
            d.qfrc_applied[dof[n]] = tau
        mujoco.mj_step(m, d)
        worst = max(worst, float(np.max(np.abs(d.qpos - q0))))
    wall = time.monotonic() - t0
    c.node.destroy_subscription(sub)
    assert worst < 1e-3, f"drift {worst * 1e3:.4f} mrad over {SIM_TIME} s"
    print(f"\nMuJoCo hold test: max drift {worst * 1e3:.2e} mrad over {SIM_TIME} s simulated "
          f"({steps} round trips in {wall:.2f} s wall)")
