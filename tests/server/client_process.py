"""A client process: compiles `vector_add(salt=argv[1])` through DESPINA_SERVER, prints the service info."""

from __future__ import annotations

import json
import sys

from despina.remote import compile_remote

from .kernels import vector_add

if __name__ == "__main__":
    cubin, ptx, metadata = compile_remote(vector_add(salt=sys.argv[1]), target="sm_90")
    print(json.dumps(dict(metadata["service"], cubin=len(cubin))))
