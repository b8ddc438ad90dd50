"""dynamics_summary: load a URDF with the core (no ROS) and print its model and a dynamics example.

    dynamics_summary urdf/arm7.urdf [--floating-base]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    import dynamics_node as dn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("urdf", nargs="?", default="urdf/arm7.urdf")
    ap.add_argument("--floating-base", action="store_true")
    args = ap.parse_args(argv)
    try:
        model = dn.load_model(args.urdf, floating_base=args.floating_base)
    except dn.ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(model.summary())
    q = model.neutral()
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    print("\nat the zero configuration:")
    print("  gravity torques  ", dn.gravity(model, q))
    print("  mass matrix diag ", np.diag(dn.mass_matrix(model, q)))
    print("  free fall qdd    ", dn.forward_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv)))
    print("  centre of mass   ", dn.center_of_mass(model, q))
    return 0


if __name__ == "__main__":
    sys.exit(main())
