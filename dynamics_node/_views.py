"""The kernels' numba extensions (intrinsics), imported by dynamics_node._jit once numba is loaded: view and
ints, cheap views of a kernel's scratch (see make_view)."""
from __future__ import annotations


def make_view(numba, as_int=False):
    """view(a, o, shape): a C-contiguous view of a[o : o + prod(shape)] with that shape, as
    ``a[o:o + prod(shape)].reshape(shape)`` but without reshape's general machinery (numba calls two
    helpers per reshape, about 18 ns, where this costs nothing: the kernels of the derivatives take a
    dozen views of their scratch per call). a: 1-d C-contiguous; the caller guarantees the extent (the
    kernels check their scratch's length against its layout before they take views). as_int: ints(a, o, shape),
    the same floats' memory as int64 (8 bytes each too): integer scratch inside a float work array."""
    from numba import types as nt
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed
    from numba.extending import intrinsic
    from numba.np.arrayobj import make_array, populate_array

    @intrinsic
    def view(typingctx, a, o, shape):
        if not (isinstance(a, nt.Array) and a.ndim == 1 and a.layout == "C" and isinstance(o, nt.Integer)
                and (not as_int or a.dtype == nt.float64)
                and isinstance(shape, nt.BaseTuple) and all(isinstance(t, nt.Integer) for t in shape)):
            return None

        def codegen(context, builder, sig, args):
            ary = make_array(sig.args[0])(context, builder, args[0])
            dims = [context.cast(builder, d, t, nt.intp)
                    for d, t in zip(cgutils.unpack_tuple(builder, args[2]), sig.args[2])]
            itemsize = context.get_constant(nt.intp, context.get_abi_sizeof(context.get_data_type(a.dtype)))
            strides = [itemsize]
            for d in reversed(dims[1:]):   # C order: the last index is the contiguous one
                strides.insert(0, builder.mul(strides[0], d))
            out = make_array(sig.return_type)(context, builder)
            data = builder.gep(ary.data, [context.cast(builder, args[1], sig.args[1], nt.intp)])
            if as_int:
                data = builder.bitcast(data, context.get_data_type(nt.int64).as_pointer())
            populate_array(out, data=data,
                           shape=dims, strides=strides, itemsize=itemsize, meminfo=ary.meminfo, parent=None)
            return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

        return nt.Array(nt.int64 if as_int else a.dtype, len(shape), "C")(a, o, shape), codegen

    return view
