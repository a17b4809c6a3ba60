-- perfq run / compare: one row per side of a labelled comparison, its samples and failures.
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,            -- uuid, stable across export/import (dedupe key)
    label TEXT NOT NULL,
    side TEXT NOT NULL,             -- base | head
    ref TEXT,
    commit_sha TEXT,
    torch_version TEXT,
    python TEXT,
    host TEXT,
    cpu TEXT,
    started_at TIMESTAMP,
    ended_at TIMESTAMP,
    command TEXT,
    status TEXT NOT NULL,           -- running | complete | incomplete
    notes TEXT
);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    repeat_index INTEGER,
    benchmark TEXT NOT NULL,
    test TEXT NOT NULL,
    mode TEXT,
    device TEXT,
    metric TEXT,
    unit TEXT,
    value DOUBLE NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS failures (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    benchmark TEXT,
    command TEXT,
    returncode INTEGER,
    stderr_tail TEXT,
    failed_at TIMESTAMP,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS samples_bench ON samples (benchmark, test);
CREATE INDEX IF NOT EXISTS runs_label ON runs (label);
