"""The kernel build leaves numba's cache complete: after `make kernels` (or colcon build) a process
compiles nothing, whatever public function it calls on whatever robot.

`python -m dynamics_node._jit_build build` calls every public function once on small models written
in dynamics_node/warm.py (its table CALLS, with NO_KERNEL for the names that compute nothing).
Checked here:
- that table names every entry of dn.__all__ (the next public function cannot be forgotten);
- in a fresh process, on a copy of this checkout's numba cache, every public function called with
  its options on robots the build never saw (arm7; the Panda of example-robot-data with its mimic
  finger; Solo-12 on a floating base; urdf/fourbar.urdf and the dual arm of urdf/dual_arm_object.urdf
  for the loop functions), and the node's own warm-ups and simulated robot in-process, write
  nothing into the cache: numba writes an index (.nbi) and a data file (.nbc) for every kernel it
  compiles, so an unchanged listing (names, sizes, time stamps) means every kernel was loaded.
The copy keeps a failure from filling the real cache (the next run would pass). Needs the kernels
built for this checkout (`make kernels`, which `make test` runs first): skipped otherwise, an
error under `make test` (DYNAMICS_REQUIRE_AOT=1).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_the_warm_table_names_every_public_function():
    import dynamics_node as dn
    from dynamics_node.warm import entries as warm

    assert not set(warm.CALLS) & set(warm.NO_KERNEL)
    missing = set(dn.__all__) - set(warm.CALLS) - set(warm.NO_KERNEL)
    assert not missing, f"add {sorted(missing)} to dynamics_node/warm.py's CALLS (or NO_KERNEL, with why)"
    assert not (set(warm.CALLS) | set(warm.NO_KERNEL)) - set(dn.__all__)


def test_each_entry_meets_the_same_states_whatever_ran_before():
    """The build shares the table's entries among its processes, so an entry's states must not depend
    on the entries run before it: the same entry after others draws the same numbers as alone."""
    from dynamics_node.warm import entries as warm

    M = warm.Models()
    M.reseed("contact_forward_dynamics")
    alone = M.state(M.tree)
    M.rng.uniform(size=17)   # another entry's draws
    M.reseed("contact_forward_dynamics")
    again = M.state(M.tree)
    assert all(np.array_equal(a, b) for a, b in zip(alone, again))
    M.reseed("impact")
    assert not np.array_equal(M.state(M.tree)[0], alone[0])


def test_the_contact_entry_goes_on_where_a_state_has_no_contact_forces():
    """With Coulomb friction some states have no contact forces (Painlevé's paradox), about a third
    of the random ones of the contact entry: the entry passes on every one of these 40 seeds (it
    raised on 13 of them when it did not expect a refusal, and failed a build in processes whose
    entries ran in another order)."""
    from dynamics_node.warm import entries as warm

    M = warm.Models()
    for seed in range(40):
        M.rng = np.random.default_rng(seed)
        warm._contacts(M)


# ---------------------------------------------------------------------------------------------
# the fresh process: every public function on robots of other shapes than the build's
def _robots():
    import warnings

    import dynamics_node as dn
    sys.path.insert(0, str(REPO / "test"))
    import urdfgen as ug

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dn.ModelWarning)
        arm = dn.load_model(REPO / "urdf" / "arm7.urdf")
        panda = dn.load_model(ug.erd("panda_description/urdf/panda.urdf"))
        solo = dn.load_model(ug.erd("solo_description/robots/solo12.urdf"), floating_base=True)
        four = dn.load_model(REPO / "urdf" / "fourbar.urdf")
        dual = dn.load_model(REPO / "urdf" / "dual_arm_object.urdf")
    return {"arm7": (arm, "tool0"), "panda": (panda, "panda_hand_tcp"), "solo12": (solo, "FL_FOOT")}, four, dual


def _state(m, rng, n=None, wrap=None):
    import dynamics_node as dn

    def one():
        return (dn.integrate(m, np.asarray(m.neutral(), dtype=float), rng.uniform(-0.8, 0.8, m.nv)),
                rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv))
    if n is None:
        out = one()
    else:
        rows = [one() for _ in range(n)]
        out = tuple(np.array([r[i] for r in rows]) for i in range(4))
    return out if wrap is None else tuple(wrap(a) for a in out)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _strided(a):
    """The same values as a view of every other entry of a bigger array (not contiguous)."""
    b = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
    b[..., ::2] = a
    return b[..., ::2]


def _tree_calls(dn, m, link, rng, wrap=None):
    """Every public function of a tree, with the options that choose other kernels; wrap: the
    state's arrays as a caller may hold them (read-only, strided)."""
    q, qd, qdd, tau = _state(m, rng, wrap=wrap)
    Q, QD, QDD, TAU = _state(m, rng, 12, wrap=wrap)
    f = {link: (1.0, -2.0, 3.0, 0.1, 0.2, -0.3)}
    d = dn.Data(m)
    fl = ([dn.ROOT_JOINT] if m.floating_base else []) + list(m.joint_names[1:3])
    limits = np.tile([-np.inf, np.inf], (m.nv, 1))
    j = m.joint_names[0]
    limits[m.v_slice(j).start] = (q[m.q_slice(j).start], np.inf)
    feet = [dn.Contact(link, (0.0, 0.0, 0.01), friction=0.4), dn.Contact(m.link_names[-2], friction=0.0)]
    soft = [dn.Contact(link, surface_point=(0.0, 0.0, 3.0)), dn.Contact(m.link_names[-2], surface_point=(0, 0, -3.0))]
    yield "load_model", lambda: m.with_payload(link, 1.0, (0, 0, 0.1), (0.01, 0, 0, 0.01, 0, 0.01)).with_gravity(
        (0, 0, -9.8))
    for name, args in (("inverse_dynamics", (q, qd, qdd)), ("gravity", (q,)), ("bias_forces", (q, qd)),
                       ("mass_matrix", (q,)), ("center_of_mass", (q,)), ("link_poses", (q,)),
                       ("coriolis_matrix", (q, qd)), ("regressor", (q, qd, qdd)), ("forward_dynamics", (q, qd, tau)),
                       ("hybrid_dynamics", (q, qd, qdd, tau, fl))):
        fn = getattr(dn, name)
        yield name, lambda fn=fn, args=args: (fn(m, *args), fn(m, *[list(a) for a in args], data=d))
    yield "inverse_dynamics", lambda: dn.inverse_dynamics(m, q, qd, qdd, f)
    yield "forward_dynamics", lambda: [dn.forward_dynamics(m, q, qd, tau, f, method=k) for k in ("aba", "crba")]
    if not m.has_mimic:
        yield "forward_dynamics", lambda: dn.forward_dynamics(m, q, qd, tau, method="sparse")
    yield "hybrid_dynamics", lambda: dn.hybrid_dynamics(m, q, qd, qdd, tau, fl, f)
    if m.floating_base:
        fb = dn.floating_base_inverse_dynamics
        yield "floating_base_inverse_dynamics", lambda: (fb(m, q, qd, qdd[6:]), fb(m, q, qd, qdd[6:], f, data=d))
    for name, args in (("link_pose", (q,)), ("link_velocity", (q, qd)), ("bias_acceleration", (q, qd)),
                       ("jacobian", (q,)), ("jacobian_derivative", (q, qd)), ("manipulability", (q,)),
                       ("jacobian_singular_values", (q,)), ("analytic_jacobian", (q,)),
                       ("link_regressor", (q, qd, qdd)), ("operational_space_inertia", (q,))):
        fn = getattr(dn, name)
        yield name, lambda fn=fn, args=args: (fn(m, *args, link), fn(m, *[list(a) for a in args], link, data=d))
    yield "jacobian", lambda: dn.jacobian(m, q, link, (0.1, 0, 0), "link")
    yield "jacobian_derivative", lambda: dn.jacobian_derivative(m, q, qd, link, (0.1, 0, 0), "link")
    yield "analytic_jacobian", lambda: dn.analytic_jacobian(m, q, link, "zyz")
    yield "operational_space_inertia", lambda: dn.operational_space_inertia(m, q, link, (0, 0.1, 0), ("x", "rz"))
    for name, args in (("inverse_dynamics_batch", (Q, QD, QDD)), ("gravity_batch", (Q,)),
                       ("regressor_batch", (Q, QD, QDD)), ("inverse_dynamics_derivatives_batch", (Q, QD, QDD)),
                       ("linearize_batch", (Q, QD, TAU, 0.01))):
        yield name, lambda fn=getattr(dn, name), args=args: fn(m, *args)
    for name, args in (("inverse_dynamics_derivatives", (q, qd, qdd)), ("forward_dynamics_derivatives", (q, qd, tau))):
        yield name, lambda fn=getattr(dn, name), args=args: (fn(m, *args), fn(m, *args, f))
    yield "gravity_derivatives", lambda: dn.gravity_derivatives(m, q)
    yield "linearize", lambda: dn.linearize(m, q, qd, tau, 0.01)
    yield "inertial_parameters", lambda: dn.inertial_parameters(m)
    yield "identify_payload", lambda: dn.identify_payload(m, link, Q, QD, QDD, TAU)
    yield "simplify_inertias", lambda: dn.inverse_dynamics(dn.simplify_inertias(m), q, qd, qdd)
    yield "integrate", lambda: dn.integrate(m, q, qd)
    yield "difference", lambda: dn.difference(m, q, dn.integrate(m, q, qd))
    yield "joint_friction", lambda: (dn.joint_friction(m, qd), dn.joint_friction(m, QD))
    yield "joint_friction_slope", lambda: (dn.joint_friction_slope(m, qd), dn.joint_friction_slope(m, QD))
    if not m.floating_base:
        yield "MomentumObserver", lambda: [dn.MomentumObserver(m, 5.0).update(t, q, qd, tau) for t in (0.0, 1e-3)]
        yield "external_wrench", lambda: dn.external_wrench(m, q, link, tau)
    yield "contact_forward_dynamics", lambda: (dn.contact_forward_dynamics(m, q, qd, tau, feet[:1]),
                                               dn.contact_forward_dynamics(m, q, 0 * qd, tau, feet, f, data=d))
    yield "impact", lambda: (dn.impact(m, q, qd, feet), dn.impact(m, q, -qd, feet[:1], 0.5))
    yield "soft_contact_forces", lambda: dn.soft_contact_forces(m, q, qd, soft, np.full((2, 3), 1e-3))
    yield "simulate_step", lambda: (dn.simulate_step(m, q, qd, tau, soft, 1e-3),
                                    dn.simulate_step(m, q, -np.abs(qd), tau, soft, 1e-3, limits=limits,
                                                     restitution=0.3, speculative=True))


def _loop_calls(dn, four, dual, rng):
    q4 = dn.close_loops(four, np.array([0.3, -0.8, 1.2]), ["crank_joint"])
    qd4 = dn.close_loop_velocities(four, q4, np.array([0.5, 0.0, 0.0]), ["crank_joint"])
    d0 = json.loads((REPO / "test" / "data" / "loops" / "dual_arm_q0.json").read_text())["q0"]
    qd_ = np.array([d0[n] for n in dual.joint_names])
    for m, q, qd in ((four, q4, qd4), (dual, qd_, np.zeros(dual.nv))):
        tau = rng.uniform(-1, 1, m.nv)
        yield "closed_loop_forward_dynamics", lambda m=m, q=q, qd=qd, tau=tau: [
            dn.closed_loop_forward_dynamics(m, q, qd, tau, method=k) for k in ("spanning_tree", "sparse")]
        yield "closed_loop_inverse_dynamics", lambda m=m, q=q, qd=qd: dn.closed_loop_inverse_dynamics(m, q, qd, 0 * qd)
        yield "loop_state", lambda m=m, q=q, qd=qd: dn.loop_state(m, q, qd)
        yield "loop_position_errors", lambda m=m, q=q: dn.loop_position_errors(m, q)
        yield "loop_constraints", lambda m=m, q=q, qd=qd: dn.loop_constraints(m, q, qd, 0.1)
        yield "constraint_basis", lambda m=m, q=q, qd=qd: dn.constraint_basis(m, q, qd)
        yield "mobility", lambda m=m, q=q: dn.mobility(m, q)
    yield "closed_loop_gravity", lambda: dn.closed_loop_gravity(four, q4)
    yield "close_loops", lambda: dn.close_loops(four, q4 + 0.01, ["crank_joint"])
    yield "close_loop_velocities", lambda: dn.close_loop_velocities(four, q4, qd4, ["crank_joint"])
    z, t = np.zeros(dual.nv), rng.uniform(-1, 1, dual.nv)
    for name, args in (("dual_arm_terms", (qd_, z)), ("sphere_force", (qd_, z, t)), ("delta_matrix", (qd_,)),
                       ("dual_arm_forward_dynamics", (qd_, z, t)), ("pseudovelocity_basis", (qd_, z)),
                       ("reduced_order_dynamics", (qd_, z[3:], t)), ("dual_arm_inverse_dynamics", (qd_, z, z)),
                       ("decoupled_control", (qd_, z, t[:3], t[3:]))):
        yield name, lambda fn=getattr(dn, name), args=args: fn(dual, *args)


def _node_calls(arm):
    """The node's own paths without ROS: the services' warm-up, the stream's (gravity, observer,
    model_terms) and the simulated robot's steps."""
    from dynamics_node.ros.model_state import build_state, load, warm_up
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.sim.world import World
    from dynamics_node.ros.stream_process import warm

    for values in ({"observer_gain": 10.0, "model_terms_links": ["tool0"]}, {"simulation": True}):
        c = validate({"urdf_path": str(REPO / "urdf" / "arm7.urdf"), **values})
        st = build_state(load(c), c, {})
        yield "node", lambda st=st, c=c: (warm_up(st, rest=False), warm_up(st), warm(st, c))
        if c.simulation:
            w = World(st, c)
            w.started = True
            yield "node", lambda w=w: [w.step() for _ in range(20)]


def _child():
    """Run in the fresh process: every call above; a failing call is printed and makes the exit non-zero."""
    import dynamics_node as dn

    rng = np.random.default_rng(3)
    robots, four, dual = _robots()
    calls = [c for m, link in robots.values() for c in _tree_calls(dn, m, link, rng)]
    for wrap in (_read_only, _strided):
        calls += list(_tree_calls(dn, *robots["arm7"], rng, wrap))
    calls += list(_loop_calls(dn, four, dual, rng))
    try:
        calls += list(_node_calls(robots["arm7"][0]))
    except ImportError as e:  # the node's modules need the ROS messages
        print(f"node paths not run: {e}")
    failed = 0
    for name, call in calls:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - named, then the test fails
            failed += 1
            print(f"FAILED {name}: {type(e).__name__}: {e}")
    print("called:", json.dumps(sorted({n for n, _ in calls})))
    sys.exit(1 if failed else 0)


def _cache_dirs(cache):
    """This checkout's folders in numba's cache (numba's own locator names them after the source
    folders), and the ahead-of-time library's."""
    from numba.core.caching import _CacheLocator

    pkg = REPO / "dynamics_node"
    subs = {_CacheLocator.get_suitable_cache_subpath(str(d / "x.py")) for d in [pkg, *pkg.rglob("*")] if d.is_dir()}
    return [s for s in sorted(subs) + ["aot", "ready"] if (cache / s).is_dir()]


def _listing(root):
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_a_fresh_process_compiles_nothing(tmp_path):
    import dynamics_node  # noqa: F401 - sets NUMBA_CACHE_DIR
    from dynamics_node import _jit_build

    cache = pathlib.Path(os.environ["NUMBA_CACHE_DIR"])
    if not _jit_build.ready(str(cache)):
        if os.environ.get("DYNAMICS_REQUIRE_AOT") == "1":
            pytest.fail(f"the kernels are not built for this checkout in {cache}: `make kernels`")
        pytest.skip(f"the kernels are not built for this checkout in {cache}: `make kernels` builds them")
    copy = tmp_path / "cache"
    for sub in _cache_dirs(cache):
        shutil.copytree(cache / sub, copy / sub, copy_function=shutil.copy2)
    before = _listing(copy)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(copy), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, __file__, "child"], env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    import dynamics_node as dn
    from dynamics_node.warm import entries as warm

    called = set(json.loads(r.stdout.split("called:", 1)[1]))
    assert called - {"node"} | set(warm.NO_KERNEL) == set(dn.__all__), "call the new public function above"
    after = _listing(copy)
    written = sorted(k for k in after if before.get(k) != after[k])
    kernels = sorted({pathlib.Path(k).name.split(".py3")[0] for k in written if k.endswith(".nbi")})
    assert not written, (f"a fresh process compiled {len(kernels)} kernel(s) that the build left out "
                         f"(dynamics_node/warm.py's CALLS must reach them): {kernels}")


if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    _child()
