"""Source files as the debug info and the cache keys name them."""

from __future__ import annotations

import pytest
from test_codec import all_ops, relocated, sample

from despina.compiler.ir.core import Loc
from despina.compiler.ir.filenames import MAX_FILES, MAX_PATH, files_error, short_names
from despina.compiler.ir.verifier import VerificationError, verify


def test_the_shortest_tail_that_tells_files_apart() -> None:
    assert short_names(["/home/a/k.py"]) == {"/home/a/k.py": "k.py"}
    assert short_names(["/x/a/k.py", "/y/b/k.py", "/x/a/h.py"]) == {"/x/a/k.py": "a/k.py", "/y/b/k.py": "b/k.py",
                                                                    "/x/a/h.py": "h.py"}
    assert short_names(['/tmp/q"uote\\d.py']) == {'/tmp/q"uote\\d.py': "q_uote_d.py"}


def test_too_many_files_or_too_long_a_path_is_refused_by_the_verifier() -> None:
    assert files_error(f"/f{i}.py" for i in range(MAX_FILES)) is None
    assert "257 source files; at most 256" in (files_error(f"/f{i}.py" for i in range(MAX_FILES + 1)) or "")
    m = relocated(sample(), "/k.py")
    for i, op in enumerate(all_ops(m.kernel.body)):
        op.loc = Loc(f"/{'d' * MAX_PATH}/k{i}.py", 1, 0)
    with pytest.raises(VerificationError, match=f"characters; at most {MAX_PATH}"):
        verify(m)
