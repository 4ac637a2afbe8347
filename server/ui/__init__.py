"""The daemon's web viewer under /ui: the kernels it caches, one kernel's stages beside its source with
their lines linked both ways, a diff of two kernels, and its cache and worker statistics over time.

Pages are HTML rendered on the server (every shown value escaped) with one small script and one
stylesheet shipped in this package: no build step, no CDN, nothing fetched from another host.

    GET  /ui                       the kernels (?q=name or glob, &target=sm_90); check two to diff them
    GET  /ui/kernels/{key}         one kernel: resources and occupancy, source, tile IR, GPU IR, LLVM IR, PTX, SASS
    GET  /ui/kernels/{key}/{stage}.txt   one stage's whole text
    GET  /ui/diff?k={key}&k={key}  two kernels' facts and stages, line by line
    GET  /ui/stats                 counters, cache answers by tier and compiles over time, compile latency
    GET, POST /ui/login; POST /ui/logout   the session of a daemon with a token (session.py)
"""

from .routes import add_viewer
from .session import is_viewer_path, refusal, tenant
