"""dynamics_identify: identify a robot's inertial parameters and friction from a rosbag2 recording.

    dynamics_identify fit BAG --urdf ROBOT.urdf --output OUT.urdf [--friction {coulomb,smooth,stribeck,auto}]
                          [--topic /joint_states] [--from S] [--to S] [--report FIT.json] [--plot FIT.png]
                          (writes OUT.urdf and OUT.yaml, the joint law as the node's parameter file)
    dynamics_identify evaluate BAG [--urdf OUT.urdf] [--params OUT.yaml | none] [--topic ...] [--from S]
                               [--to S] [--report ...] [--plot ...]
    dynamics_identify excite --urdf ROBOT.urdf --output TRAJ.yaml [--duration S] [--period S]

Exit code 0 on success, 1 with one line naming the problem on bad input (nothing written), 2 with one
line on an internal error.
"""
from __future__ import annotations

import argparse
import os
import sys

# The fit's linear algebra is on small matrices (some 100 x 100, hundreds of times while the friction
# class is chosen), where OpenBLAS's threads cost more than they give on a machine shared with other
# processes (an 80 x 80 eigen-decomposition: tens of times slower with the default threads than with one).
# Before numpy is first imported (the console script), unless the user chose.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _parser():
    p = argparse.ArgumentParser(prog="dynamics_identify", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, what in (("fit", "identify inertia and friction, write OUT.urdf"),
                       ("evaluate", "compare a URDF's torques (friction on) with a recording")):
        s = sub.add_parser(name, help=what)
        s.add_argument("bag", help="rosbag2 folder (sqlite3 or MCAP) or a bare .db3 / .mcap file")
        s.add_argument("--urdf", required=name == "fit", default=None,
                       help=None if name == "fit" else "the URDF (default: the urdf_path of --params)")
        if name == "fit":
            s.add_argument("--output", required=True, help="the identified URDF")
            s.add_argument("--prior-weight", type=float, default=1.0,
                           help="weight of the URDF's values where the data say little (default 1: one equation)")
            s.add_argument("--friction", choices=("coulomb", "smooth", "stribeck", "auto"), default="auto",
                           help="the joint law's class (docs/identify.md); auto: chosen by cross-validation")
        else:
            s.add_argument("--params", default=None,
                           help="the node's parameter file with the joint law, which brings the URDF its urdf_path "
                                "names (default: OUT.yaml beside --urdf, if there); none: the URDF alone")
        s.add_argument("--topic", default="/joint_states")
        s.add_argument("--from", dest="t_from", type=float, default=None, help="s after the topic's first message")
        s.add_argument("--to", dest="t_to", type=float, default=None, help="s after the topic's first message")
        s.add_argument("--report", default=None, help="JSON report")
        s.add_argument("--plot", default=None, help="PNG plot of measured and predicted torques")
    s = sub.add_parser("excite", help="an exciting trajectory (JointTrajectory YAML)")
    s.add_argument("--urdf", required=True)
    s.add_argument("--output", required=True)
    s.add_argument("--duration", type=float, default=None, help="s of excitation (default: two periods)")
    s.add_argument("--period", type=float, default=10.0, help="s, period of the Fourier series")
    s.add_argument("--harmonics", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from ..errors import DynamicsError, clip

    try:
        if args.command in ("fit", "evaluate"):
            import math

            pw = getattr(args, "prior_weight", 1.0)
            for opt, v in (("--from", args.t_from), ("--to", args.t_to), ("--prior-weight", pw)):
                if v is not None and not math.isfinite(v):
                    raise DynamicsError(f"{opt} must be a finite number, got {v!r}")
            if pw < 0:
                raise DynamicsError(f"--prior-weight must be >= 0, got {args.prior_weight:g}")
            if args.t_from is not None and args.t_to is not None and args.t_to <= args.t_from:
                raise DynamicsError(f"--to ({args.t_to:g}) must be after --from ({args.t_from:g})")
        if args.command == "fit":
            from .run import fit_command

            fit_command(args)
        elif args.command == "evaluate":
            from .run import evaluate_command

            evaluate_command(args)
        else:
            from .excite import excite_command

            excite_command(args)
    except (DynamicsError, OSError) as e:
        print(f"dynamics_identify {args.command}: error: {_line(clip(e, 1500))}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a bug of ours: still one line, and a different exit code
        print(f"dynamics_identify {args.command}: internal error: {type(e).__name__}: {_line(clip(e, 600))} "
              "(please report it with the command line)", file=sys.stderr)
        return 2
    return 0


def _line(text):
    """One line: the message's own line breaks as spaces."""
    return " ".join(str(text).split())


if __name__ == "__main__":
    sys.exit(main())
