"""Where a robot description comes from, read defensively: a file (regular files only, at most
:data:`MAX_BYTES`), ``package://pkg/path``, a ``*.xacro`` file run through xacro, or XML text.

Rules (docs/library.md "Loading a robot description"):

- A path must name a regular file of at most 64 MB: a FIFO, a device (``/dev/zero``) or a directory is
  refused by name before anything is read (the file is opened non-blocking, checked with ``fstat`` and
  read with a size cap, so swapping the file for a FIFO after a check does not block either).
- The text is UTF-8. A byte-order mark at the very start is dropped (files and text alike); so are
  whitespace and comments before the ``<?xml ...?>`` declaration. Any other text before the first
  ``<`` is a ModelError naming it, and so are NUL characters and lone surrogates.
- ``*.xacro`` files (and ``package://`` paths to them) run through xacro (the PyPI ``xacro`` package)
  with ``xacro_args``; ``$(find pkg)`` and ``package://pkg`` resolve through ament's index
  (``ament_index_python``, ``AMENT_PREFIX_PATH``), else a ModelError names the package. xacro given as
  *text* (``robot_description``) is refused: xacro evaluates expressions and reads files, which text
  from the ROS graph must not make this process do; run xacro where the description is made.
"""
from __future__ import annotations

import os
import pathlib
import re
import stat
import threading
import xml.etree.ElementTree as ET

from .errors import ModelError, clip

MAX_BYTES = 64 * 1024 * 1024  #: largest description read (file, xacro output or text), bytes
XACRO_NS = ("{http://www.ros.org/wiki/xacro}", "{http://ros.org/wiki/xacro}")
_LEAD = re.compile(r"\A(?:\s+|<!--.*?-->)*", re.S)  # whitespace and comments
_XACRO_LOCK = threading.Lock()  # xacro keeps its state (file stack, args) in module globals


def read_description(source, xacro_args=None) -> tuple[str, str]:
    """(XML text, name for messages) of a path, ``package://`` URI, bytes or XML text."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _decode(bytes(source), "<robot_description>"), "<robot_description>"
    if not isinstance(source, (str, os.PathLike)):
        raise ModelError(f"URDF source must be a file path or XML text, got {type(source).__name__}")
    if isinstance(source, str):
        body = source.lstrip("\ufeff \t\r\n")
        if body.startswith("<"):
            if xacro_args:
                raise ModelError("xacro_args given with XML text: xacro runs on *.xacro files only")
            return _clean_text(source, "<robot_description>"), "<robot_description>"
        if "<" in source and ("\n" in source or "<robot" in source):
            stray = source[:len(source) - len(body)] + body[:body.index("<")] if "<" in body else body
            raise ModelError(f"<robot_description>: text before the first '<': {clip(repr(stray.strip()), 80)} "
                             "(XML text must start with '<'; only whitespace, comments and a byte-order mark "
                             "may precede it)")
        if "\x00" in source:
            raise ModelError(f"URDF path contains a NUL character: {clip(repr(source), 120)}")
        if not source.strip():
            raise ModelError("URDF source is empty (give a file path or the robot_description XML)")
    path = str(os.fspath(source))
    if path.startswith("package://"):
        path = resolve_package_uri(path)
    is_xacro = path.endswith(".xacro")
    if xacro_args and not is_xacro:
        raise ModelError(f"xacro_args given, but '{clip(path, 120)}' is not a *.xacro file")
    data = read_regular_file(path)
    if is_xacro:
        return run_xacro(path, xacro_args or {}), path
    return _decode(data, path), path


def read_regular_file(path: str) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES; ModelError naming the file otherwise."""
    shown = clip(path, 160)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ModelError(f"URDF file '{shown}' not found") from None
    except (OSError, ValueError) as e:
        raise ModelError(f"URDF file '{shown}' cannot be opened: {clip(e, 120)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket"
                    if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise ModelError(f"URDF file '{shown}' is {kind}: only regular files are read")
        if st.st_size > MAX_BYTES:
            raise ModelError(f"URDF file '{shown}' has {st.st_size} bytes, more than the {MAX_BYTES} read")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            b = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not b:
                break
            chunks.append(b)
            size += len(b)
        if size > MAX_BYTES:
            raise ModelError(f"URDF file '{shown}' grew past the {MAX_BYTES} bytes read")
        return b"".join(chunks)
    except OSError as e:
        raise ModelError(f"URDF file '{shown}' cannot be read: {clip(e, 120)}") from None
    finally:
        os.close(fd)


def _decode(data: bytes, src: str) -> str:
    if len(data) > MAX_BYTES:
        raise ModelError(f"{src}: {len(data)} bytes, more than the {MAX_BYTES} read")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ModelError(f"{clip(src, 160)}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 4]!r})") from None
    return _clean_text(text, src)


def _clean_text(text: str, src: str) -> str:
    """Drop a leading BOM, and whitespace/comments before an XML declaration; refuse NUL, lone
    surrogates, oversize text and stray text before the first element."""
    src = clip(src, 160)
    if len(text) > MAX_BYTES:
        raise ModelError(f"{src}: {len(text)} characters, more than the {MAX_BYTES} read")
    text = text.removeprefix("\ufeff")
    k = text.find("\x00")
    if k >= 0:
        raise ModelError(f"{src}: a NUL character at offset {k} (not XML text)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ModelError(f"{src}: a lone surrogate {text[e.start]!r} at offset {e.start} "
                         "(not valid Unicode text)") from None
    lead = _LEAD.match(text).end()
    rest = text[lead:]
    if rest.startswith("<?xml"):
        return rest  # the declaration must come first: what precedes it was whitespace and comments
    if lead < len(text) and not rest.startswith("<"):
        raise ModelError(f"{src}: text before the first element: {clip(repr(rest[:60]), 80)} "
                         "(only whitespace, comments and a byte-order mark may precede it)")
    return text


def parse_xml(text: str, src: str) -> ET.Element:
    """The root element of ``text``; ModelError for malformed XML, xacro text or a root other than <robot>."""
    try:
        root = ET.fromstring(text)  # expat: no external entities, entity amplification refused
    except ET.ParseError as e:
        raise ModelError(f"{clip(src, 160)}: not valid XML ({clip(e, 160)})") from None
    except RecursionError:
        raise ModelError(f"{clip(src, 160)}: elements nested too deeply") from None
    if any(root.tag.startswith(ns) for ns in XACRO_NS) or any(
            el.tag.startswith(XACRO_NS) for el in root.iter() if isinstance(el.tag, str)):
        raise ModelError(f"{clip(src, 160)}: xacro, not URDF: give the *.xacro file's path (load_model runs xacro "
                         "on it) or run xacro first; xacro text is not expanded")
    if root.tag != "robot":
        raise ModelError(f"{clip(src, 160)}: the root element is <{clip(root.tag, 60)}>, expected <robot>")
    return root


# ---------------------------------------------------------------------------------------------
def _ament_share(pkg: str, what: str) -> str:
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        raise ModelError(f"{what}: package '{clip(pkg, 80)}' cannot be found: ament_index_python is not "
                         "installed (source a ROS 2 setup, or give a file path)") from None
    try:
        return get_package_share_directory(pkg)
    except OSError:   # ament_index_python: "Environment variable 'AMENT_PREFIX_PATH' is not set or empty"
        raise ModelError(f"{what}: package '{clip(pkg, 80)}' cannot be found: AMENT_PREFIX_PATH is not set "
                         "(no ROS workspace is sourced); source the workspace that installs it, or give "
                         "the file's path instead") from None
    except (PackageNotFoundError, KeyError, LookupError, ValueError):
        raise ModelError(f"{what}: package '{clip(pkg, 80)}' not found in the ament index "
                         "(AMENT_PREFIX_PATH; source the workspace that installs it)") from None


def resolve_package_uri(uri: str) -> str:
    """``package://pkg/rel/path`` -> the file in pkg's share folder (ament index)."""
    pkg, _, rel = uri[len("package://"):].partition("/")
    if not pkg or not rel:
        raise ModelError(f"'{clip(uri, 160)}': expected package://<package>/<path>")
    return str(pathlib.Path(_ament_share(pkg, clip(uri, 160))) / rel)


def run_xacro(path: str, args: dict) -> str:
    """Expand a xacro file (``xacro_args`` are its ``$(arg ...)`` values) to URDF text."""
    try:
        import xacro
        from xacro import substitution_args as xsa
    except ImportError:
        raise ModelError(f"{clip(path, 160)}: a xacro file, but the xacro package is not installed "
                         "(pip install xacro)") from None
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise ModelError(f"xacro_args must be a dict of name -> value, got {clip(repr(args), 120)}")
    mappings = {k: str(v) for k, v in args.items()}
    missing = []

    def find(pkg):
        try:
            return _ament_share(pkg, f"{clip(path, 160)}: $(find {clip(pkg, 80)})")
        except ModelError as e:
            missing.append(e)
            raise

    with _XACRO_LOCK:
        old_find = xsa._eval_find
        xsa._eval_find = find
        try:
            doc = xacro.process_file(path, mappings=mappings)
            text = doc.toxml()
        except ModelError:
            raise missing[0] if missing else ModelError(f"{clip(path, 160)}: xacro failed") from None
        except RecursionError:
            raise ModelError(f"{clip(path, 160)}: xacro failed: macros or includes nested too deeply") from None
        except Exception as e:  # xacro raises XacroException, ExpatError, NameError, ... for a bad file
            if missing:  # a $(find) that failed, wrapped by xacro: say which package
                raise missing[0] from None
            msg = " ".join(str(e).split()) or type(e).__name__
            raise ModelError(f"{clip(path, 160)}: xacro failed: {clip(msg, 200)}") from None
        finally:
            xsa._eval_find = old_find
    return _clean_text(text, path)
