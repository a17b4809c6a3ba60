"""Objects kept until the process ends: only in a process that ends without freeing them."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

from common import lifetime
from common.config import load_config
from indexer.build import build_index
from tests.aten_fixture import make_repo


class Big:
    pass


def test_nothing_is_kept_where_the_process_frees_its_objects():
    assert not lifetime._enabled  # tests call perfq.cli.main, never run()
    obj = Big()
    ref = weakref.ref(obj)
    lifetime.keep_until_exit(obj)
    del obj
    assert ref() is None and lifetime._kept == []


def test_a_quick_exit_process_keeps_them_out_of_the_collectors_sight():
    code = """
import gc, weakref
from common import lifetime
class Big: pass
lifetime.free_at_exit()
obj = Big(); ref = weakref.ref(obj)
before = gc.get_freeze_count()
lifetime.keep_until_exit(obj)
del obj
print(ref() is not None, gc.get_freeze_count() > before)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_an_index_build_in_process_keeps_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    build_index(repo, load_config(repo), tmp_path / "index.duckdb", jobs=1, quiet=True, trace=False)
    gc.collect()
    assert lifetime._kept == []


def test_no_collection_runs_while_the_collector_is_paused_and_it_resumes_after():
    runs = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with lifetime.collector_paused():
            cycles = [[] for _ in range(50_000)]
            for c in cycles:
                c.append(c)  # cyclic garbage once dropped
            assert not gc.isenabled()
            during = len(runs)
        assert during == 0 and gc.isenabled()
        del cycles
        gc.disable()
        with lifetime.collector_paused():
            pass
        assert not gc.isenabled()  # a collector disabled before stays disabled
    finally:
        gc.enable()
        gc.callbacks.remove(count)
