"""`CompileOptions` as service.proto's `CompileOptions` message, both ways (the HTTP body's `options`
object is `CompileOptions.as_dict()`). Unchecked here: the daemon checks what it receives (`CompileOptions.check`)."""

from __future__ import annotations

from despina.compiler.options import DEFAULTS, CompileOptions
from despina.proto import service_pb2 as pb


def to_pb(options: CompileOptions) -> pb.CompileOptions:
    return pb.CompileOptions(num_warps=options.num_warps, num_stages=options.num_stages, debug=options.debug,
                             num_ctas=options.num_ctas, maxnreg=options.maxnreg or 0,
                             enable_fp_fusion=options.enable_fp_fusion)


def from_pb(message: pb.CompileOptions) -> CompileOptions:
    """The options a message carries; 0 (and an unset enable_fp_fusion) mean the default."""
    fusion = message.enable_fp_fusion if message.HasField("enable_fp_fusion") else DEFAULTS.enable_fp_fusion
    return CompileOptions(num_warps=message.num_warps or DEFAULTS.num_warps,
                          num_stages=message.num_stages or DEFAULTS.num_stages,
                          num_ctas=message.num_ctas or DEFAULTS.num_ctas, maxnreg=message.maxnreg or None,
                          enable_fp_fusion=fusion, debug=message.debug)

