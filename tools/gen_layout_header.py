#!/usr/bin/env python3
"""Write dynamics_node/_layout.h, the C shims' view of dynamics_node/layout.py's tables and of the status
codes of dynamics_node/_kernel_io.py, so that the C side names the same memory the kernels name.

    .venv/bin/python tools/gen_layout_header.py           # writes dynamics_node/_layout.h
    .venv/bin/python tools/gen_layout_header.py --check   # exit 1 when the committed header differs

test/test_core_layout.py checks that the committed header is what this writes. Run it after an edit of a
table of layout.py (or the status codes of _kernel_io.py), then rebuild the C shim (make setup).
"""
from __future__ import annotations

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
HEADER = REPO / "dynamics_node" / "_layout.h"


def header_text() -> str:
    sys.path.insert(0, str(REPO))
    from dynamics_node import layout as L
    from dynamics_node import _kernel_io as S

    out = ["/* _layout.h: the packed model's, the work arrays' and the status codes' layout for the C shims, written",
           " * by tools/gen_layout_header.py from dynamics_node/layout.py and _kernel_io.py: do not edit by hand",
           " * (test/test_core_layout.py checks it is what they give). DN_<name> is layout.<name>. */",
           "#ifndef DYNAMICS_LAYOUT_H", "#define DYNAMICS_LAYOUT_H", ""]
    for table, prefix, total in L.TABLES:
        off = 0
        for name, size, meaning in table:
            text = " ".join(meaning.replace("*/", "* /").split())
            out.append(f"#define DN_{prefix}_{name} {off} /* {size}: {text} */")
            off += size
        out.append(f"#define DN_{total} {off}")
        out.append("")
    out += [
        "/* the floats of one call's work array for the model whose int header is h (layout.py's docstring) */",
        "#define DN_WORK_SIZE(h) (DN_WORK_BODY * (Py_ssize_t)(h)[DN_H_NB] + DN_WORK_DOF * (Py_ssize_t)(h)[DN_H_NVT] \\",
        "                         + DN_WORK_EXTRA)",
        "/* the floats of a kernel's scratch, extra = {per body, per dof, per dof squared, constant} */",
        "#define DN_SCRATCH_SIZE(extra, h) ((extra)[0] * (Py_ssize_t)(h)[DN_H_NB] \\",
        "                                   + (extra)[1] * (Py_ssize_t)(h)[DN_H_NVT] \\",
        "                                   + (extra)[2] * (Py_ssize_t)(h)[DN_H_NVT] * (Py_ssize_t)(h)[DN_H_NVT] \\",
        "                                   + (extra)[3])",
        "",
        "/* status codes (_kernel_io.py): KIND * DN_KIND_UNIT + ARG * DN_ARG_UNIT + INDEX */",
        f"#define DN_KIND_UNIT {S.KIND_UNIT}LL",
        f"#define DN_ARG_UNIT {S.ARG_UNIT}LL",
    ]
    for name in ("BAD_LENGTH", "NOT_FINITE", "SINGULAR", "BAD_QUAT", "OVERFLOW"):
        out.append(f"#define DN_{name} {getattr(S, name)}")
    out += ["#define DN_STATUS(kind, arg, index) \\",
            "    ((long long)(kind) * DN_KIND_UNIT + (long long)(arg) * DN_ARG_UNIT + (long long)(index))",
            "", "#endif", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = header_text()
    if "--check" in argv:
        same = HEADER.exists() and HEADER.read_text() == text
        if not same:
            print(f"{HEADER} differs from what layout.py gives: run tools/gen_layout_header.py", file=sys.stderr)
        return 0 if same else 1
    HEADER.write_text(text)
    print(f"wrote {HEADER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
