"""dynamics_cli: call the services of a running dynamics_node from a shell and print the answer.

There is no `ros2` command line on pip-installed ROS 2, so this client stands in for
`ros2 service call` / `ros2 param` / `ros2 topic echo` for this node:

    dynamics_cli inverse_dynamics -q 0 0.5 0 -1.2 0 0.8 0 -v 0 0 0 0 0 0 0 -a 1 0 0 0 0 0 0
    dynamics_cli inverse_dynamics -n joint2 joint1 ... -q ... -w tool0 0 0 -10 0 0 0
    dynamics_cli forward_dynamics -q ... -e ...
    dynamics_cli hybrid_dynamics -q ... -a ... -e ... --forward-joints joint7
    dynamics_cli gravity_compensation [-q ...]          (no -q: the latest joint_states)
    dynamics_cli mass_matrix -q ...
    dynamics_cli jacobian -q ... --link tool0 [--point 0 0 0.1] [--axes link]
    dynamics_cli model_terms -q ... -v ... --links tool0 [--point 0 0 0.1]
    dynamics_cli set_payload --link tool0 --mass 2 --com 0 0 0.05 --inertia 0.002 0 0 0.002 0 0.002
    dynamics_cli trajectory_inverse_dynamics --file traj.yaml
    dynamics_cli linearized_dynamics -q ... -v ... -e ... --dt 0.01    (A and B of the step, for MPC)
    dynamics_cli identify_payload --link tool0 --record 10 [--apply]   (records joint states with efforts)
    dynamics_cli closed_loop_forward_dynamics / closed_loop_inverse_dynamics ...
    dynamics_cli param list | param get gravity | param set gravity "[0, 0, -1.62]"
    dynamics_cli echo gravity_torques [--count 1]      (also: diagnostics, markers)
    dynamics_cli publish_description robot.urdf        (latched on /robot_description)

Exit code 0 when the service answered success=true, 1 when it answered success=false, 2 when it
could not be reached. ROS_AUTOMATIC_DISCOVERY_RANGE defaults to LOCALHOST here (as in the node);
ROS_DOMAIN_ID must match the node's (`make run` prints it).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

from ..ros.services import SERVICES  # the node's table: name -> (srv type, handler, help)
from .calls import call_service


def _floats(xs):
    return [float(x) for x in xs] if xs else []


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dynamics_cli", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Run `dynamics_cli SERVICE -h` for a service's options.")
    p.add_argument("--node", default="/dynamics_node", help="node path (default /dynamics_node)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for discovery and the answer (default 10)")
    sub = p.add_subparsers(dest="command", required=True)

    def state_args(sp, vel=True, acc=False, eff=False, wrench=False, pos_required=True):
        sp.add_argument("-n", "--name", nargs="+", default=[], metavar="JOINT",
                        help="joint order of the arrays (default: the model's order)")
        sp.add_argument("-q", "--position", nargs="+", type=float, default=[], metavar="Q",
                        required=pos_required)
        if vel:
            sp.add_argument("-v", "--velocity", nargs="+", type=float, default=[], metavar="QD",
                            help="default: zeros")
        if acc:
            sp.add_argument("-a", "--acceleration", nargs="+", type=float, default=[],
                            metavar="QDD", help="default: zeros")
        if eff:
            sp.add_argument("-e", "--effort", nargs="+", type=float, default=[], metavar="TAU",
                            help="default: zeros")
        if wrench:
            sp.add_argument("-w", "--wrench", nargs=7, action="append", default=[],
                            metavar=("LINK", "FX", "FY", "FZ", "TX", "TY", "TZ"),
                            help="external wrench on LINK (link frame, torque about the link origin); "
                                 "repeatable")

    for name, (_, _h, desc) in SERVICES.items():
        sp = sub.add_parser(name, help=desc, description=desc)
        if name == "inverse_dynamics":
            state_args(sp, acc=True, wrench=True)
        elif name == "forward_dynamics":
            state_args(sp, eff=True, wrench=True)
        elif name == "hybrid_dynamics":
            state_args(sp, acc=True, eff=True)
            sp.add_argument("--forward-joints", nargs="+", default=[], metavar="JOINT")
        elif name == "gravity_compensation":
            state_args(sp, vel=False, pos_required=False)
        elif name == "mass_matrix":
            state_args(sp, vel=False)
        elif name == "jacobian":
            state_args(sp, vel=False)
            sp.add_argument("--link", required=True)
            sp.add_argument("--point", nargs=3, type=float, default=[0.0, 0.0, 0.0], metavar=("X", "Y", "Z"),
                            help="point in the link frame (default: its origin)")
            sp.add_argument("--axes", choices=["world", "link"], default="world",
                            help="axes of the Jacobian's rows (default: world)")
        elif name == "model_terms":
            state_args(sp)
            sp.add_argument("--links", nargs="+", default=[], metavar="LINK",
                            help="links whose J, dJ/dt and operational-space inertia are wanted")
            sp.add_argument("--point", nargs=3, type=float, action="append", default=[],
                            metavar=("X", "Y", "Z"), help="point of each link in its frame, one per "
                            "--links entry in order (default: the link origins)")
        elif name == "set_payload":
            sp.add_argument("--link", required=True)
            sp.add_argument("--mass", type=float, required=True)
            sp.add_argument("--com", nargs=3, type=float, default=[0.0, 0.0, 0.0],
                            metavar=("X", "Y", "Z"), help="centre of mass in the link frame")
            sp.add_argument("--inertia", nargs=6, type=float, default=[0.0] * 6,
                            metavar=("IXX", "IXY", "IXZ", "IYY", "IYZ", "IZZ"),
                            help="about the centre of mass, link axes")
        elif name == "closed_loop_forward_dynamics":
            state_args(sp, eff=True)
            sp.add_argument("--stabilization-time", type=float, default=0.0)
        elif name == "closed_loop_inverse_dynamics":
            state_args(sp, acc=True)
            sp.add_argument("--actuated", nargs="+", default=[], metavar="JOINT")
            sp.add_argument("-w", "--loop-wrench", nargs=7, action="append", default=[],
                            metavar=("LOOP_JOINT", "FX", "FY", "FZ", "TX", "TY", "TZ"))
        elif name in ("contact_dynamics", "impact"):
            state_args(sp, eff=name == "contact_dynamics", wrench=name == "contact_dynamics")
            sp.add_argument("-c", "--contact", nargs=8, action="append", default=[],
                            metavar=("LINK", "PX", "PY", "PZ", "NX", "NY", "NZ", "MU"),
                            help="a contact: point in the link frame, normal (world), friction; repeatable")
            if name == "impact":
                sp.add_argument("--restitution", type=float, default=0.0)
        elif name == "linearized_dynamics":
            from ..ros.linearized import cli_arguments
            cli_arguments(sp, state_args)
        elif name == "identify_payload":
            from .record import add_arguments
            add_arguments(sp)
        elif name == "trajectory_inverse_dynamics":
            sp.add_argument("--file", required=True,
                            help="YAML: {joint_names: [...], points: [{positions: [...], "
                                 "velocities: [...], accelerations: [...], time_from_start: 0.1}]}")
            sp.add_argument("--summary", action="store_true",
                            help="print only the number of points and the time inside the node")

    pp = sub.add_parser("param", help="list, get or set the node's parameters")
    psub = pp.add_subparsers(dest="param_command", required=True)
    psub.add_parser("list", help="every parameter with its value and description")
    g = psub.add_parser("get")
    g.add_argument("param_name")
    s = psub.add_parser("set")
    s.add_argument("param_name")
    s.add_argument("value", help="YAML value, e.g. 9.81, true, '[0, 0, -1.62]', urdf/arm7.urdf")

    e = sub.add_parser("echo", help="print messages of one of the node's topics")
    e.add_argument("topic", choices=["gravity_torques", "diagnostics", "markers"])
    e.add_argument("--count", type=int, default=1, help="messages to print (default 1)")
    d = sub.add_parser("publish_description", help="publish a URDF file on robot_description (latched, "
                       "as robot_state_publisher does) and keep it there")
    d.add_argument("file", help="URDF file")
    d.add_argument("--topic", default="/robot_description", help="topic (default /robot_description)")
    d.add_argument("--duration", type=float, default=0.0, help="seconds to stay (default: until Ctrl-C)")
    return p


# ----------------------------------------------------------------------------------- requests
def _wrench_msgs(rows):
    from geometry_msgs.msg import WrenchStamped
    out = []
    for row in rows:
        ws = WrenchStamped()
        ws.header.frame_id = row[0]
        v = [float(x) for x in row[1:]]
        (ws.wrench.force.x, ws.wrench.force.y, ws.wrench.force.z,
         ws.wrench.torque.x, ws.wrench.torque.y, ws.wrench.torque.z) = v
        out.append(ws)
    return out


def build_request(args, srv_type):
    req = srv_type.Request()
    cmd = args.command
    if cmd == "set_payload":
        req.link = args.link
        req.mass = args.mass
        req.center_of_mass.x, req.center_of_mass.y, req.center_of_mass.z = args.com
        req.inertia = [float(x) for x in args.inertia]
        return req
    if cmd == "trajectory_inverse_dynamics":
        import yaml
        from trajectory_msgs.msg import JointTrajectoryPoint
        with open(args.file) as f:
            data = yaml.safe_load(f) or {}
        req.trajectory.joint_names = [str(n) for n in data.get("joint_names", [])]
        for k, p in enumerate(data.get("points", [])):
            pt = JointTrajectoryPoint()
            pt.positions = _floats(p.get("positions"))
            pt.velocities = _floats(p.get("velocities"))
            pt.accelerations = _floats(p.get("accelerations"))
            t = float(p.get("time_from_start", 0.0))
            pt.time_from_start.sec = int(math.floor(t))
            pt.time_from_start.nanosec = int(round((t - math.floor(t)) * 1e9)) % 1000000000
            req.trajectory.points.append(pt)
        return req
    req.name = list(args.name)
    req.position = _floats(args.position)
    for field in ("velocity", "acceleration", "effort"):
        if hasattr(req, field) and hasattr(args, field):
            setattr(req, field, _floats(getattr(args, field)))
    if hasattr(args, "wrench") and args.wrench:
        req.external_wrenches = _wrench_msgs(args.wrench)
    if cmd == "hybrid_dynamics":
        req.forward_joints = list(args.forward_joints)
    if cmd == "jacobian":
        req.link = args.link
        req.point.x, req.point.y, req.point.z = (float(x) for x in args.point)
        req.axes = args.axes
    if cmd == "model_terms":
        from geometry_msgs.msg import Point
        req.links = list(args.links)
        req.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in args.point]
    if cmd in ("contact_dynamics", "impact"):
        from dynamics_interfaces.msg import Contact
        for row in args.contact:
            c = Contact(link=row[0], friction=float(row[7]))
            c.point.x, c.point.y, c.point.z, c.normal.x, c.normal.y, c.normal.z = (float(x) for x in row[1:7])
            req.contacts.append(c)
        if cmd == "impact":
            req.restitution = float(args.restitution)
    if cmd == "linearized_dynamics":
        req.dt = float(args.dt)
    if cmd == "closed_loop_forward_dynamics":
        req.stabilization_time = float(args.stabilization_time)
    if cmd == "closed_loop_inverse_dynamics":
        req.actuated = list(args.actuated)
        req.loop_wrenches = _wrench_msgs(args.loop_wrench)
    return req


# ----------------------------------------------------------------------------------- printing
def _fmt(x):
    return f"{x:.12g}"


def _vec(v):
    return "[" + ", ".join(_fmt(x) for x in v) + "]"


def format_response(cmd, res, summary=False) -> str:
    lines = [f"success: {'true' if res.success else 'false'}", f"message: {res.message!r}"]
    if not res.success:
        return "\n".join(lines)
    if cmd == "trajectory_inverse_dynamics":
        t = res.trajectory
        lines.append(f"compute_time: {res.compute_time * 1e3:.3f} ms for {len(t.points)} points")
        if not summary:
            lines.append(f"joint_names: [{', '.join(t.joint_names)}]")
            lines.append("points:")
            for k, p in enumerate(t.points):
                lines.append(f"  - positions: {_vec(p.positions)}")
                lines.append(f"    effort: {_vec(p.effort)}")
        return "\n".join(lines)
    if cmd == "identify_payload":
        from .record import format_response as identify_lines
        return "\n".join(lines + identify_lines(res))
    if hasattr(res, "name"):
        lines.append(f"name: [{', '.join(res.name)}]")
    n = len(getattr(res, "name", []))
    for field in ("position", "velocity", "acceleration", "effort"):
        if hasattr(res, field):
            lines.append(f"{field}: {_vec(getattr(res, field))}")
    for field in ("contact_forces", "contact_impulses"):
        if hasattr(res, field):
            lines.append(f"{field}:  # world, per contact: link, state, x y z")
            lines += [f"  - {k}, {s}: {_vec([v.x, v.y, v.z])}" for k, s, v in
                      zip(res.contact_links, res.contact_states, getattr(res, field))]
    if cmd == "mass_matrix":
        m = list(res.mass_matrix)
        k = int(round(math.sqrt(len(m))))
        lines.append(f"mass_matrix:  # {k} x {k}, row-major")
        lines += ["  - " + _vec(m[r * k:(r + 1) * k]) for r in range(k)]
    if cmd == "jacobian":
        j = list(res.jacobian)
        k = len(j) // 6 if j else n
        lines.append(f"jacobian:  # 6 x {k}, rows vx vy vz wx wy wz")
        lines += ["  - " + _vec(j[r * k:(r + 1) * k]) for r in range(6)]
    if cmd == "linearized_dynamics":
        from ..ros.linearized import cli_lines
        lines += cli_lines(res, _vec)
    if cmd == "model_terms":
        from ..ros.model_terms import format_terms
        lines += format_terms(res, n, _vec)
    if hasattr(res, "loop_wrenches"):
        lines.append("loop_wrenches:")
        for ws in res.loop_wrenches:
            w = ws.wrench
            lines.append(f"  - {ws.header.frame_id}: force {_vec([w.force.x, w.force.y, w.force.z])}"
                         f" torque {_vec([w.torque.x, w.torque.y, w.torque.z])}")
    return "\n".join(lines)


def _param_value_to_python(pv):
    from rcl_interfaces.msg import ParameterType as T
    return {
        T.PARAMETER_BOOL: lambda: pv.bool_value, T.PARAMETER_INTEGER: lambda: pv.integer_value,
        T.PARAMETER_DOUBLE: lambda: pv.double_value, T.PARAMETER_STRING: lambda: pv.string_value,
        T.PARAMETER_BOOL_ARRAY: lambda: list(pv.bool_array_value),
        T.PARAMETER_INTEGER_ARRAY: lambda: list(pv.integer_array_value),
        T.PARAMETER_DOUBLE_ARRAY: lambda: list(pv.double_array_value),
        T.PARAMETER_STRING_ARRAY: lambda: list(pv.string_array_value),
    }.get(pv.type, lambda: None)()


def _python_to_param_value(value, ptype):
    """A YAML-parsed value as a ParameterValue of the declared type (ints widen to doubles)."""
    from rcl_interfaces.msg import ParameterType as T, ParameterValue
    pv = ParameterValue(type=ptype)
    if ptype == T.PARAMETER_BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        pv.bool_value = value
    elif ptype == T.PARAMETER_INTEGER:
        pv.integer_value = int(value)
    elif ptype == T.PARAMETER_DOUBLE:
        pv.double_value = float(value)
    elif ptype == T.PARAMETER_STRING:
        pv.string_value = "" if value is None else str(value)
    elif ptype == T.PARAMETER_DOUBLE_ARRAY:
        pv.double_array_value = [float(x) for x in (value or [])]
    elif ptype == T.PARAMETER_STRING_ARRAY:
        pv.string_array_value = [str(x) for x in (value or [])]
    elif ptype == T.PARAMETER_INTEGER_ARRAY:
        pv.integer_array_value = [int(x) for x in (value or [])]
    elif ptype == T.PARAMETER_BOOL_ARRAY:
        pv.bool_array_value = [bool(x) for x in (value or [])]
    else:
        raise ValueError(f"unsupported parameter type {ptype}")
    return pv


def param_command(node, args) -> int:
    from rcl_interfaces.msg import Parameter as ParamMsg
    from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters, SetParameters
    base = args.node.rstrip("/")
    if args.param_command == "list":
        names = call_service(node, f"{base}/list_parameters", ListParameters,
                             ListParameters.Request(), args.timeout).result.names
        names = sorted(names)
        vals = call_service(node, f"{base}/get_parameters", GetParameters,
                            GetParameters.Request(names=names), args.timeout).values
        descs = call_service(node, f"{base}/describe_parameters", DescribeParameters,
                             DescribeParameters.Request(names=names), args.timeout).descriptors
        for n, v, d in zip(names, vals, descs):
            val = _param_value_to_python(v)
            if n == "robot_description" and isinstance(val, str) and len(val) > 60:
                val = val[:57] + "..."
            print(f"{n}: {val!r}" + (f"    # {d.description}" if d.description else ""))
        return 0
    if args.param_command == "get":
        vals = call_service(node, f"{base}/get_parameters", GetParameters,
                            GetParameters.Request(names=[args.param_name]), args.timeout).values
        if not vals or vals[0].type == 0:
            print(f"parameter {args.param_name!r} is not set or not declared", file=sys.stderr)
            return 1
        print(_param_value_to_python(vals[0]))
        return 0
    import yaml
    desc = call_service(node, f"{base}/describe_parameters", DescribeParameters,
                        DescribeParameters.Request(names=[args.param_name]), args.timeout)
    if not desc.descriptors or desc.descriptors[0].type == 0:
        print(f"parameter {args.param_name!r} is not declared by {base}", file=sys.stderr)
        return 1
    try:
        from rcl_interfaces.msg import ParameterType as T
        raw = args.value.lstrip().startswith("<") and desc.descriptors[0].type == T.PARAMETER_STRING
        # XML text (a robot_description) is taken as it is, not as YAML
        pv = _python_to_param_value(args.value if raw else yaml.safe_load(args.value), desc.descriptors[0].type)
    except (ValueError, TypeError, yaml.YAMLError) as e:
        print(f"cannot convert {args.value!r}: {e}", file=sys.stderr)
        return 1
    res = call_service(node, f"{base}/set_parameters", SetParameters,
                       SetParameters.Request(parameters=[ParamMsg(name=args.param_name, value=pv)]),
                       args.timeout)
    r = res.results[0]
    if r.successful:
        print(f"set {args.param_name}")
        return 0
    print(f"rejected: {r.reason}", file=sys.stderr)
    return 1


def echo_command(node, args) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from visualization_msgs.msg import MarkerArray
    base = args.node.rstrip("/")
    topic, mtype = {"gravity_torques": (f"{base}/gravity_torques", JointState),
                    "diagnostics": ("/diagnostics", DiagnosticArray),
                    "markers": (f"{base}/markers", MarkerArray)}[args.topic]
    got = []
    node.create_subscription(mtype, topic, got.append, 10)
    deadline = time.monotonic() + args.timeout
    printed = 0
    while printed < args.count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
        while got and printed < args.count:
            msg = got.pop(0)
            printed += 1
            if isinstance(msg, JointState):
                print(f"stamp: {msg.header.stamp.sec}.{msg.header.stamp.nanosec:09d}\n"
                      f"name: [{', '.join(msg.name)}]\nposition: {_vec(msg.position)}\n"
                      f"effort: {_vec(msg.effort)}\n---")
            elif isinstance(msg, DiagnosticArray):
                for s in msg.status:
                    lvl = int.from_bytes(s.level, "little") if isinstance(s.level, bytes) else int(s.level)
                    print(f"{s.name}: [{('OK', 'WARN', 'ERROR', 'STALE')[min(lvl, 3)]}] {s.message}")
                    for kv in s.values:
                        print(f"    {kv.key}: {kv.value}")
                print("---")
            else:
                for m in msg.markers:
                    p = m.pose.position
                    print(f"{m.ns}/{m.id} frame {m.header.frame_id}: ({_fmt(p.x)}, {_fmt(p.y)}, "
                          f"{_fmt(p.z)}) {m.text}")
                print("---")
    if printed < args.count:
        print(f"received {printed} of {args.count} messages on {topic} within {args.timeout:g} s",
              file=sys.stderr)
        return 2
    return 0


def publish_description(node, args) -> int:
    """Publish a URDF file's text on robot_description (std_msgs/String, reliable, transient local:
    robot_state_publisher's QoS, so a node started later still gets it) and keep it there."""
    import pathlib

    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    try:
        text = pathlib.Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        print(f"dynamics_cli: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    pub = node.create_publisher(String, args.topic, qos)
    pub.publish(String(data=text))
    print(f"published {args.file} ({len(text)} characters) on {pub.topic_name}; kept for late subscribers"
          + (f" for {args.duration:g} s" if args.duration > 0 else " until Ctrl-C"), flush=True)
    import rclpy
    deadline = time.monotonic() + args.duration if args.duration > 0 else float("inf")
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f"dynamics_cli_{os.getpid()}")
    try:
        if args.command == "param":
            return param_command(node, args)
        if args.command == "echo":
            return echo_command(node, args)
        if args.command == "publish_description":
            return publish_description(node, args)
        import dynamics_interfaces.srv as srvs
        srv_type = getattr(srvs, SERVICES[args.command].type_name)
        try:
            if args.command == "identify_payload":
                from .record import build_request as identify_request
                req = identify_request(node, args, srv_type)
            else:
                req = build_request(args, srv_type)
        except (OSError, ValueError, AssertionError) as e:
            print(f"dynamics_cli: bad arguments: {e}", file=sys.stderr)
            return 2
        path = f"{args.node.rstrip('/')}/{args.command}"
        res = call_service(node, path, srv_type, req, args.timeout)
        print(format_response(args.command, res, getattr(args, "summary", False)))
        return 0 if res.success else 1
    except TimeoutError as e:
        print(f"dynamics_cli: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
