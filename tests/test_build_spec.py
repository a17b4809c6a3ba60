"""The index build is a frozen spec and named passes over one state (indexer/build_spec.py,
indexer/build.py, indexer/relink.py): the spec decides between a patch and a re-link, and the
passes run in their order, the C++ link while the pool still parses the other files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from common.config import Config
from indexer import relink as relink_module
from indexer.build import build_index
from indexer.build_info import BuildEvents
from indexer.build_spec import ExtractJob, specify_build
from tests.aten_fixture import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def _plan(repo: Path, db: Path, cfg: Config | None = None, **options):
    settings = {"jobs": 1, "quiet": True, "full": False, "trace": False, "events": None, "native": False, **options}
    return specify_build(repo, cfg or Config(), db, **settings)


def test_only_an_existing_index_that_nothing_asks_to_relink_is_patchable(repo, tmp_path):
    db = tmp_path / "index.duckdb"
    assert not _plan(repo, db).patchable  # nothing to patch yet
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    spec = _plan(repo, db)
    assert spec.patchable
    assert not _plan(repo, db, full=True).patchable
    assert not _plan(repo, db, trace=True).patchable  # new traces are due
    assert not _plan(repo, db, cfg=Config(compile_commands="build/compile_commands.json")).patchable
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.full = True  # type: ignore[misc]


def test_a_plan_reads_the_inputs_that_decide_a_patch(repo, tmp_path):
    spec = _plan(repo, tmp_path / "index.duckdb")
    yaml = repo / "aten/src/ATen/native/native_functions.yaml"
    assert spec.yaml_keys[yaml.resolve()][0] == f"yaml:{yaml.resolve()}"
    assert spec.inputs["source_sha:aten/src/ATen/native/native_functions.yaml"] == spec.yaml_keys[yaml.resolve()][1]
    assert {"config", "canaries", "config:linker"} <= set(spec.inputs)


def test_an_extract_jobs_facts_are_cached_under_its_kind_path_and_prefix():
    assert ExtractJob("/r", "cpp", "a/b.cpp").cache_key == "cpp:a/b.cpp"
    assert ExtractJob("/up", "python", "torch/x.py", key_prefix="up:").cache_key == "up:python:torch/x.py"


class _Phases(BuildEvents):
    def __init__(self) -> None:
        self.names: list[str] = []

    def phase(self, name: str, detail: str = "") -> None:
        self.names.append(name)


def test_the_relink_passes_run_in_order_and_link_cpp_while_the_pool_parses(repo, tmp_path, monkeypatch):
    at_hand_off: list[tuple[int, int, int]] = []  # (C++ facts in, C++ jobs, files not C++ still to take)
    link_native = relink_module.link_native

    def observed(spec, state):
        jobs = state.extract_jobs
        cpp_in = sum(1 for key in state.kept if key.startswith("cpp:"))
        others_in = sum(1 for key in state.kept if key.startswith(("python:", "benchmark:")))
        at_hand_off.append((cpp_in, sum(job.kind == "cpp" for job in jobs), len(jobs) - cpp_in - others_in))
        link_native(spec, state)

    monkeypatch.setattr(relink_module, "link_native", observed)
    events = _Phases()
    build_index(repo, Config(), tmp_path / "index.duckdb", jobs=1, quiet=True, trace=False, events=events)
    assert events.names == ["extract", "link-cpp", "link", "write"]
    ((cpp_in, cpp_jobs, still_to_take),) = at_hand_off
    assert cpp_in == cpp_jobs > 0  # every C++ file, in
    assert still_to_take > 0  # the Python and benchmark files not yet taken from the pool
