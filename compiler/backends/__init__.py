"""Code generation backends: tile IR -> GPU IR with layouts (`gpuir`) -> target code.

`gpuir` is target-independent (axis analysis, layouts, layout assignment); `nvptx` lowers it
to LLVM IR, PTX and a cubin. Importing this package imports no LLVM binding: only
`despina.compiler.backends.nvptx` pulls in llvmlite.
"""
