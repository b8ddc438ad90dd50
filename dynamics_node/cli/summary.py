"""dynamics_summary: load a URDF with the core (no ROS) and print its model and a dynamics example.

    dynamics_summary urdf/arm7.urdf [--floating-base] [--xacro-arg name:=value ...]
    dynamics_summary --check robot.urdf     # what a user should fix: exit 0 clean, 1 warnings, 2 no load

``--check`` prints, per link, the inertia problems (triangle inequality, indefinite), where the mass
matrix is singular, what the model merged (fixed joints) and what it ignored (transmission and mimic
entries naming unknown joints; visual, collision, gazebo and other content dynamics does not read).
"""
from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np


def _xacro_args(pairs):
    out = {}
    for p in pairs or ():
        name, sep, value = p.partition(":=")
        if not sep:
            name, sep, value = p.partition("=")
        out[name] = value
    return out or None


def check(path, floating_base=False, xacro_args=None, out=sys.stdout) -> int:
    import dynamics_node as dn
    from dynamics_node.urdf import load_with_report

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dn.ModelWarning)
            model, rep = load_with_report(path, floating_base=floating_base, xacro_args=xacro_args)
    except dn.ModelError as e:
        print(f"does not load: {e}", file=out)
        return 2
    print(f"{rep.source}: model '{model.name}', {len(model.joint_names)} joints, {len(model.link_names)} links",
          file=out)
    if rep.inertia:
        print(f"inertia problems ({len(rep.inertia)} links):", file=out)
        for link, msg in rep.inertia.items():
            print(f"  link '{link}': {msg}", file=out)
    else:
        print("inertias: every link is physically consistent", file=out)
    other = [w for w in rep.warnings if not any(f"link '{n}': " in w for n in rep.inertia)]
    if other:
        print("warnings:", file=out)
        for w in other:
            print(f"  {w}", file=out)
    if rep.merged:
        print(f"merged ({len(rep.merged)} fixed joints):", file=out)
        for j, child, into in rep.merged:
            print(f"  fixed joint '{j}': link '{child}' merged into '{into}'", file=out)
    if rep.ignored:
        print("ignored:", file=out)
        for msg in rep.ignored:
            print(f"  {msg}", file=out)
    if rep.ignored_elements:
        els = ", ".join(f"{n} <{t}>" for t, n in sorted(rep.ignored_elements.items()))
        print(f"not read by dynamics: {els}", file=out)
    print(f"{len(rep.warnings)} warning(s)" if rep.warnings else "clean", file=out)
    return 1 if rep.warnings else 0


def main(argv=None) -> int:
    import dynamics_node as dn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("urdf", nargs="?", default="urdf/arm7.urdf")
    ap.add_argument("--floating-base", action="store_true")
    ap.add_argument("--check", action="store_true", help="report the description's problems (exit 0 clean, 1 "
                    "warnings, 2 does not load)")
    ap.add_argument("--xacro-arg", action="append", metavar="NAME:=VALUE", help="argument of a *.xacro file")
    args = ap.parse_args(argv)
    xargs = _xacro_args(args.xacro_arg)
    if args.check:
        return check(args.urdf, args.floating_base, xargs)
    try:
        model = dn.load_model(args.urdf, floating_base=args.floating_base, xacro_args=xargs)
    except dn.ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(model.summary())
    q = model.neutral()
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    print("\nat the zero configuration:")
    print("  gravity torques  ", dn.gravity(model, q))
    print("  mass matrix diag ", np.diag(dn.mass_matrix(model, q)))
    try:
        print("  free fall qdd    ", dn.forward_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv)))
    except dn.SingularMassMatrixError as e:
        print(f"  free fall qdd     refused: {e}")
    print("  centre of mass   ", dn.center_of_mass(model, q))
    return 0


if __name__ == "__main__":
    sys.exit(main())
