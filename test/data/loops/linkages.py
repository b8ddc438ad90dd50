"""URDF generators of closed-loop mechanisms for the loop-cluster and sparse-method tests and benches:
a chain carrying k four-bar linkages (k independent loops, §8.9), coupled linkages (loops
that share tree joints), and Fig. 8.4's ladder (every loop coupled to the next: one cluster).

Each generator returns (urdf_text, expected_clusters), the clusters written down from the
construction (which loop joints share a tree joint), not computed."""
from __future__ import annotations


def _inertial(mass, com, ixx, iyy, izz):
    return (f'<inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>')


def _joint(name, parent, child, xyz, axis, jtype="continuous"):
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}"/><axis xyz="{axis[0]} {axis[1]} {axis[2]}"/></joint>')


def _fourbar(tag, ground, at, loop_type="revolute"):
    """urdf/fourbar.urdf's crank-rocker (x-z plane, joints about y) with its ground pivots on link
    ``ground`` at x = at[0] and at[0] + 0.5; loop joint 'pin_<tag>' between coupler and rocker."""
    x, y, z = at
    return "\n".join([
        f'<link name="crank_{tag}">{_inertial(0.8, (0.1, 0, 0), 0.0002, 0.003, 0.003)}</link>',
        f'<link name="coupler_{tag}">{_inertial(1.2, (0.3, 0, 0.02), 0.0004, 0.037, 0.037)}</link>',
        f'<link name="rocker_{tag}">{_inertial(1.0, (0.225, 0, 0), 0.0003, 0.017, 0.017)}</link>',
        _joint(f"crank_{tag}", ground, f"crank_{tag}", (x, y, z), (0, 1, 0)),
        _joint(f"coupler_{tag}", f"crank_{tag}", f"coupler_{tag}", (0.2, 0, 0), (0, 1, 0)),
        _joint(f"rocker_{tag}", ground, f"rocker_{tag}", (x + 0.5, y, z), (0, 1, 0)),
        f'<loop_joint name="pin_{tag}" type="{loop_type}"><predecessor link="coupler_{tag}">'
        f'<origin xyz="0.6 0 0"/></predecessor><successor link="rocker_{tag}"><origin xyz="0.45 0 0"/>'
        f'</successor><axis xyz="0 1 0"/></loop_joint>',
    ])


def chain_with_fourbars(k, loop_type="revolute"):
    """A chain of k links (joints about z, then x, alternating) each carrying a four-bar: k
    independent loops (their tree joints are the four-bar's own three; the chain joints are in no
    loop), so k clusters of one loop each.  Tree joints: 4k; loop constraints: 5k (revolute pins)."""
    parts = ['<robot name="fourbar_chain">', '<link name="base"/>']
    prev = "base"
    for i in range(k):
        parts.append(f'<link name="link_{i}">{_inertial(2.0, (0.25, 0, 0), 0.01, 0.05, 0.05)}</link>')
        parts.append(_joint(f"chain_{i}", prev, f"link_{i}", (0.5 if i else 0.0, 0, 0),
                            (0, 0, 1) if i % 2 == 0 else (1, 0, 0)))
        parts.append(_fourbar(str(i), f"link_{i}", (0.0, 0.1, 0.0), loop_type))
        prev = f"link_{i}"
    parts.append("</robot>")
    return "\n".join(parts), tuple((f"pin_{i}",) for i in range(k))


def coupled_linkages():
    """Five loops in three clusters, all planar (x-z planes, joints about y), on two ground links:
      * 'pin_a' and 'pin_b': two four-bars driven by one crank (coupler_b hangs on crank_a), so they
        share tree joint crank_a: one cluster;
      * 'pin_c': a lone four-bar on the second ground link: a cluster of its own;
      * 'pin_d' and 'tie': a four-bar whose rocker is joined by a two-link dyad (pend, pend2) back to
        the ground (a Watt six-bar): both loops contain rocker_d: one cluster.
    The ground links' own joints (about z) are in no loop."""
    parts = ['<robot name="coupled">', '<link name="base"/>',
             f'<link name="g1">{_inertial(2.0, (0, 0, 0), 0.01, 0.01, 0.01)}</link>',
             f'<link name="g2">{_inertial(2.0, (0, 0, 0), 0.01, 0.01, 0.01)}</link>',
             _joint("g1_joint", "base", "g1", (0, 0, 0), (0, 0, 1)),
             _joint("g2_joint", "base", "g2", (0, 2, 0), (0, 0, 1)),
             _fourbar("a", "g1", (0, 0, 0)),
             f'<link name="coupler_b">{_inertial(1.0, (0.3, 0, 0), 0.0004, 0.03, 0.03)}</link>',
             f'<link name="rocker_b">{_inertial(1.0, (0.2, 0, 0), 0.0003, 0.015, 0.015)}</link>',
             _joint("coupler_b", "crank_a", "coupler_b", (0.2, 0.1, 0), (0, 1, 0)),
             _joint("rocker_b", "g1", "rocker_b", (0.5, 0.1, 0), (0, 1, 0)),
             '<loop_joint name="pin_b" type="revolute"><predecessor link="coupler_b"><origin xyz="0.6 0 0"/>'
             '</predecessor><successor link="rocker_b"><origin xyz="0.45 0 0"/></successor>'
             '<axis xyz="0 1 0"/></loop_joint>',
             _fourbar("c", "g2", (0, 0, 0)),
             _fourbar("d", "g2", (0, 0.5, 0)),
             f'<link name="pend">{_inertial(0.5, (0.2, 0, 0), 0.0002, 0.007, 0.007)}</link>',
             f'<link name="pend2">{_inertial(0.4, (0.2, 0, 0), 0.0002, 0.005, 0.005)}</link>',
             _joint("pend_joint", "g2", "pend", (1.2, 0.5, 0), (0, 1, 0)),
             _joint("pend2_joint", "pend", "pend2", (0.4, 0, 0), (0, 1, 0)),
             '<loop_joint name="tie" type="revolute"><predecessor link="pend2"><origin xyz="0.4 0 0"/>'
             '</predecessor><successor link="rocker_d"><origin xyz="0.3 0 0"/></successor>'
             '<axis xyz="0 1 0"/></loop_joint>',
             "</robot>"]
    return "\n".join(parts), (("pin_a", "pin_b"), ("pin_c",), ("pin_d", "tie"))


def ladder(cells, rail=0.4, rung=0.3):
    """Fig. 8.4's ladder: a top rail of bodies t_0 .. t_{cells-1} (a chain, joints about z), a rung
    hanging from each (two bodies r_i, b_i: joints about x then z), and spherical <loop_joint>s
    'bottom_i' joining b_i to b_{i+1} along the bottom rail.  Loop i's tree joints are rung i, rail
    i+1 and rung i+1, so each loop shares a rung with the next: one cluster.  Bodies: 3 cells;
    loop constraints 3 (cells - 1): with two rung joints per cell the mechanism moves (mobility 3)
    and K has full row rank at a generic configuration."""
    parts = ['<robot name="ladder">', '<link name="base"/>']
    prev = "base"
    for i in range(cells):
        parts.append(f'<link name="t_{i}">{_inertial(1.0, (rail / 2, 0, 0), 0.002, 0.015, 0.015)}</link>')
        parts.append(_joint(f"rail_{i}", prev, f"t_{i}", (rail if i else 0.0, 0, 0), (0, 0, 1)))
        parts.append(f'<link name="r_{i}">{_inertial(0.3, (0, -rung / 4, 0), 0.001, 0.0005, 0.001)}</link>')
        parts.append(_joint(f"rung_x_{i}", f"t_{i}", f"r_{i}", (0, 0, 0), (1, 0, 0)))
        parts.append(f'<link name="b_{i}">{_inertial(0.7, (rail / 4, -rung, 0), 0.004, 0.003, 0.005)}</link>')
        parts.append(_joint(f"rung_z_{i}", f"r_{i}", f"b_{i}", (0, 0, 0), (0, 0, 1)))
        prev = f"t_{i}"
    for i in range(cells - 1):
        parts.append(f'<loop_joint name="bottom_{i}" type="spherical"><predecessor link="b_{i}">'
                     f'<origin xyz="{rail} {-rung} 0"/></predecessor><successor link="b_{i + 1}">'
                     f'<origin xyz="0 {-rung} 0"/></successor></loop_joint>')
    parts.append("</robot>")
    return "\n".join(parts), (tuple(f"bottom_{i}" for i in range(cells - 1)),) if cells > 1 else ()
