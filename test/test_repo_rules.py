"""Rules of the house that a reviewer would otherwise check by hand (issue 12)."""
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 500


def test_no_module_of_the_package_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / "dynamics_node").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_core_imports_no_ros():
    """The core knows nothing of ROS: only dynamics_node/ros/ may import rclpy or ROS messages.
    (ament_index_python, a plain Python package, may resolve package:// where it is installed.)"""
    ros_words = ("import rclpy", "from rclpy", "_msgs", "dynamics_interfaces")
    offenders = []
    for p in sorted((REPO / "dynamics_node").rglob("*.py")):
        rel = p.relative_to(REPO / "dynamics_node")
        if rel.parts[0] == "ros":
            continue
        for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if any(w in code for w in ros_words) and ("import" in code):
                offenders.append(f"{rel}:{k}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
