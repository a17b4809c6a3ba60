-- perfq bisect: one row per session, one row per benchmark measurement (a commit's batch
-- of runs), so an interrupted session can be replayed and continued with --resume.
CREATE TABLE IF NOT EXISTS bisect_sessions (
    id TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    good TEXT NOT NULL,             -- full hash
    bad TEXT NOT NULL,              -- full hash
    commits TEXT NOT NULL,          -- JSON list of full hashes, GOOD first, BAD last
    command TEXT NOT NULL,          -- JSON list (argv)
    build TEXT,
    options TEXT NOT NULL,          -- JSON: metric, polarity, search knobs, prune...
    status TEXT NOT NULL,           -- running | interrupted | found | ambiguous | noise | swapped | failures | ...
    result TEXT,                    -- JSON report when finished
    started_at TIMESTAMP DEFAULT current_timestamp,
    updated_at TIMESTAMP DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS bisect_steps (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    commit_sha TEXT NOT NULL,
    requested INTEGER NOT NULL,     -- runs asked for
    ok BOOLEAN NOT NULL,
    run_values TEXT,                -- JSON list of floats (NULL when the build or a run failed)
    error TEXT,
    unit TEXT,                      -- unit the benchmark printed, if any (polarity on --resume)
    created_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (session_id, seq)
);
