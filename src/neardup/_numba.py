"""Numba helpers every compiled kernel uses: LLVM intrinsics (POPCNT, prefetch) and a portable popcount."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic as _numba_intrinsic

# typed as returning Any: mypy would otherwise read an intrinsic's (typingctx, ...) signature as
# the one its callers in jitted code use
intrinsic: Callable[[Callable[..., Any]], Any] = _numba_intrinsic


@intrinsic
def popcount64(typingctx, x):  # type: ignore[no-untyped-def]
    """LLVM ctpop: one instruction on CPUs with POPCNT."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def prefetch(typingctx, arr, idx):  # type: ignore[no-untyped-def]
    """LLVM prefetch (read, keep in all cache levels) of ``arr[idx]``'s cache line: a hint,
    never a fault, whatever the index."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


