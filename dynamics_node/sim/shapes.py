"""The simulated robot's collision points (no rclpy): what of each link's URDF <collision> touches the
floor and the obstacles.

Each <collision> element (its <origin> in the link frame) becomes points in the link frame:
- box: its eight corners;
- cylinder: eight points on the rim of each end (16), at 45 degree steps;
- sphere: one point, its lowest toward the surface it meets, found at every step (`Sphere`);
- capsule (a `<capsule radius length>`, or a cylinder with spheres at its ends, as URDFs write one):
  the cylinder's rims and the spheres;
- mesh: its axis-aligned bounding box (in the mesh's frame, times its scale) as a box, with a one-time
  warning naming the link; the vertices are read from STL (binary or ASCII) and OBJ files. A mesh file
  that is absent or of another format is said (a warning naming the link and the file) and the link
  falls back to its origin as one point.
Links fixed to the world have no points (nothing moves them). Self-collision is not simulated: the
links of the robot pass through each other; only the floor and the obstacles are touched.
"""
from __future__ import annotations

import math
import pathlib
import struct
from typing import NamedTuple

import numpy as np

RIM_POINTS = 8


class Sphere(NamedTuple):
    """A sphere of a link: centre in the link frame, radius."""
    link: str
    center: np.ndarray
    radius: float


class Shapes(NamedTuple):
    """points: [(link, (3,) point in the link frame)]; spheres: [Sphere]; notes: the warnings."""
    points: list
    spheres: list
    notes: list


def _origin(el):
    """(R, p) of an <origin xyz rpy> (identity when absent)."""
    o = el.find("origin") if el is not None else None
    xyz = [float(x) for x in (o.get("xyz") or "0 0 0").split()] if o is not None else [0.0] * 3
    rpy = [float(x) for x in (o.get("rpy") or "0 0 0").split()] if o is not None else [0.0] * 3
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    R = np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                  [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                  [-sp, cp * sr, cp * cr]])
    return R, np.asarray(xyz, dtype=float)


def box_corners(size):
    h = 0.5 * np.asarray(size, dtype=float)
    return np.array([[sx * h[0], sy * h[1], sz * h[2]] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])


def cylinder_rims(radius, length):
    a = 2 * math.pi * np.arange(RIM_POINTS) / RIM_POINTS
    ring = np.column_stack((radius * np.cos(a), radius * np.sin(a), np.zeros(RIM_POINTS)))
    return np.vstack([ring + [0, 0, -0.5 * length], ring + [0, 0, 0.5 * length]])


def _mesh_vertices(path):
    """The vertices (n x 3) of an STL or OBJ file; None for another format."""
    data = pathlib.Path(path).read_bytes()
    suffix = pathlib.Path(path).suffix.lower()
    if suffix == ".obj":
        v = [[float(x) for x in ln.split()[1:4]] for ln in data.decode("utf-8", "replace").splitlines()
             if ln.startswith("v ")]
        return np.asarray(v, dtype=float).reshape(-1, 3)
    if suffix != ".stl":
        return None
    if data[:5].lower() == b"solid" and b"vertex" in data[:2000]:
        v = [[float(x) for x in ln.split()[1:4]] for ln in data.decode("utf-8", "replace").splitlines()
             if ln.strip().startswith("vertex")]
        return np.asarray(v, dtype=float).reshape(-1, 3)
    n = struct.unpack_from("<I", data, 80)[0]
    if len(data) < 84 + 50 * n:
        raise ValueError(f"binary STL of {n} triangles is only {len(data)} bytes")
    rec = np.frombuffer(data, dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                        count=n, offset=84)
    return rec["v"].reshape(-1, 3).astype(float)


def _mesh_box(mesh, resolve):
    """(lo, hi) of a <mesh filename scale>'s vertices, or raise ValueError saying why not."""
    name = mesh.get("filename") or ""
    try:
        path = resolve(name)
    except Exception as e:  # noqa: BLE001 - package:// of a package that is not installed, and friends
        raise ValueError(f"its file '{name}' cannot be found ({e})") from None
    try:
        v = _mesh_vertices(path)
    except (OSError, ValueError, struct.error) as e:
        raise ValueError(f"its file '{name}' cannot be read ({type(e).__name__}: {e})") from None
    if v is None:
        raise ValueError(f"its file '{name}' is not STL or OBJ (the formats read for a bounding box)")
    v = v[np.isfinite(v).all(axis=1)]
    if not len(v):
        raise ValueError(f"its file '{name}' has no vertices")
    scale = np.asarray([float(x) for x in (mesh.get("scale") or "1 1 1").split()], dtype=float)
    return v.min(axis=0) * scale, v.max(axis=0) * scale


def collision_shapes(model, links, resolve, fallback_origin=True):
    """Shapes of `links` (names) from the model's URDF <collision> elements (module docstring). A link
    without any <collision> (or with only an unusable mesh) gets its origin as its one point when
    fallback_origin."""
    root = model.xml_root
    by_link = {el.get("name"): el for el in (root.findall("link") if root is not None else [])}
    points, spheres, notes = [], [], []
    for link in links:
        el = by_link.get(link)
        n0 = len(points) + len(spheres)
        for col in (el.findall("collision") if el is not None else []):
            R, p = _origin(col)
            g = col.find("geometry")
            g = list(g)[0] if g is not None and len(g) else None
            tag = g.tag if g is not None else ""
            local = None
            if tag == "box":
                local = box_corners([float(x) for x in g.get("size").split()])
            elif tag == "cylinder":
                local = cylinder_rims(float(g.get("radius")), float(g.get("length")))
            elif tag == "capsule":
                r, ln = float(g.get("radius")), float(g.get("length"))
                local = cylinder_rims(r, ln)
                for z in (-0.5 * ln, 0.5 * ln):
                    spheres.append(Sphere(link, R @ [0.0, 0.0, z] + p, r))
            elif tag == "sphere":
                spheres.append(Sphere(link, p.copy(), float(g.get("radius"))))
            elif tag == "mesh":
                try:
                    lo, hi = _mesh_box(g, resolve)
                    local = box_corners(hi - lo) + 0.5 * (lo + hi)
                    notes.append(f"link '{link}': its collision mesh '{g.get('filename')}' is simulated as its "
                                 f"axis-aligned bounding box ({', '.join(f'{x:.3g}' for x in hi - lo)} m)")
                except ValueError as e:
                    notes.append(f"link '{link}': collision mesh not used: {e}")
            if local is not None:
                points += [(link, R @ x + p) for x in local]
        if len(points) + len(spheres) == n0 and fallback_origin:
            points.append((link, np.zeros(3)))
    return Shapes(points, spheres, notes)


def has_collision(model, link):
    root = model.xml_root
    if root is None:
        return False
    return any(el.get("name") == link and el.find("collision") is not None for el in root.findall("link"))


def resolve_mesh(name):
    """A mesh filename as a path: package://pkg/rel (the package's share folder), file://, ~, absolute, or
    relative to the working directory. ValueError when a package is not found."""
    if name.startswith("package://"):
        pkg, _, rel = name[len("package://"):].partition("/")
        try:
            from ament_index_python.packages import get_package_share_directory
            return str(pathlib.Path(get_package_share_directory(pkg)) / rel)
        except Exception as e:  # noqa: BLE001 - PackageNotFoundError, ImportError
            raise ValueError(f"package '{pkg}' not found: {e}") from None
    if name.startswith("file://"):
        name = name[len("file://"):]
    return str(pathlib.Path(name).expanduser())


def shapes_of(model, cfg, resolve=resolve_mesh):
    """The collision points of the simulated robot: simulation_contact_points where given; else the
    <collision> shapes of simulation_contact_links (default: every moving link with one), a link without
    any at its origin; with no <collision> in the model, every moving link's origin. resolve: a mesh
    filename (package://, absolute, relative) to a path."""
    links = list(cfg.simulation_contact_links)
    pts = cfg.simulation_contact_points
    if pts:
        return Shapes([(lk, np.asarray(pts[3 * k:3 * k + 3], dtype=float)) for k, lk in enumerate(links)], [], [])
    if not links:
        moving = [lk for k, lk in enumerate(model.link_names) if model.link_body[k] >= 0]
        links = [lk for lk in moving if has_collision(model, lk)] or moving
    return collision_shapes(model, links, resolve)
