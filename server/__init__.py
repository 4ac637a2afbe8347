"""The Despina daemon: one transport-free `CompileService` (core.py) behind thin gRPC and HTTP transports.

    despina serve --grpc-port 50051 --http-port 8000 --redis-url redis://localhost:6379/0

The cache lookup order is memory LRU -> Redis (shared by every daemon) -> compile in a worker
process; see core.py for the request path and cache/ for the tiers. Execute runs a kernel on the
host's GPU in a GPU worker process of its own (execute.py, gpu.py).
"""
