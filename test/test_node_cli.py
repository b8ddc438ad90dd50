"""dynamics_cli (the stand-in for `ros2 service call` / `ros2 param`) against a running node.

Each CLI process costs a few seconds (interpreter, imports, discovery), so independent calls run
concurrently; calls that depend on each other run in sequence within one thread.
"""
from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed")

NAME = "cli_arm7"
Q = np.array([0.1, 0.7, -0.3, -1.1, 0.4, 0.9, -0.2])
SHUFFLED = ["joint3", "joint1", "joint2", "joint7", "joint5", "joint4", "joint6"]
IDX = [int(n[-1]) - 1 for n in SHUFFLED]


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ns.ARM7), "joint_states_topic": "/cli_test/js"})


def cli(*args, node=f"/{NAME}", timeout=120):
    """dynamics_cli with --timeout 60 (a call that waits that long hangs; its default 10 s is a user's, on an
    idle machine) unless args say otherwise."""
    wait = () if "--timeout" in args else ("--timeout", "60")
    p = subprocess.run([sys.executable, "-m", "dynamics_node.cli.dynamics_cli", "--node", node, *wait,
                        *map(str, args)],
                       cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def _field(out, name):
    m = re.search(rf"^{name}: \[(.*)\]$", out, re.M)
    assert m, f"no {name} in:\n{out}"
    return [float(x) for x in m.group(1).split(",")]


def _id_then_payload():
    """inverse_dynamics, then set_payload (in this order: the payload changes every result)."""
    return [cli("inverse_dynamics", "-n", *SHUFFLED, "-q", *Q[IDX], "-a", *np.ones(7),
                "-w", "tool0", 0, 0, -20, 0, 0, 0),
            cli("set_payload", "--link", "tool0", "--mass", 1.5, "--com", 0, 0, 0.05)]


def test_cli(node):
    import dynamics_node as dn
    model = dn.load_model(str(ns.ARM7))
    with ThreadPoolExecutor(max_workers=4) as pool:
        f_seq = pool.submit(_id_then_payload)
        f_bad = pool.submit(cli, "jacobian", "--link", "hand", "-q", *Q)
        f_reject = pool.submit(cli, "param", "set", "gravity", "[0, -9.81]")
        f_absent = pool.submit(cli, "--timeout", 1, "mass_matrix", "-q", *Q, node="/nobody_here")

    (rc, out, err), (rc_p, out_p, err_p) = f_seq.result()
    assert rc == 0 and "success: true" in out, out + err
    assert re.search(r"^name: \[joint3, joint1, joint2, joint7, joint5, joint4, joint6\]$", out, re.M)
    tau = dn.inverse_dynamics(model, Q, np.zeros(7), np.ones(7), {"tool0": (0, 0, -20, 0, 0, 0)})
    np.testing.assert_allclose(_field(out, "effort"), tau[IDX], rtol=1e-11, atol=1e-11)

    assert rc_p == 0 and "attached" in out_p, out_p + err_p
    from dynamics_interfaces.srv import GravityCompensation, SetPayload
    c = ns.ros()
    r = c.call(GravityCompensation, node.path("gravity_compensation"),
               GravityCompensation.Request(position=list(Q)))
    loaded = model.with_payload("tool0", 1.5, (0, 0, 0.05), (0,) * 6)
    np.testing.assert_allclose(r.effort, dn.gravity(loaded, Q), rtol=1e-12, atol=1e-12)
    assert c.call(SetPayload, node.path("set_payload"), SetPayload.Request(link="tool0", mass=0.0)).success

    rc, out, err = f_bad.result()
    assert rc == 1 and "success: false" in out and "link" in out, out + err
    rc, out, err = f_reject.result()
    assert rc == 1 and "rejected" in err and "gravity" in err, out + err
    rc, out, err = f_absent.result()
    assert rc == 2 and "not available" in err, out + err
