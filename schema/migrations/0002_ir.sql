-- perfq ir: Triton IR collections. One row per collect/capture/harvest invocation, and one
-- row per stored IR text keyed by (label, kernel, specialization, target, stage).
CREATE TABLE IF NOT EXISTS ir_collections (
    id TEXT PRIMARY KEY,              -- uuid
    label TEXT NOT NULL,
    source TEXT NOT NULL,             -- manifest | capture | harvest
    triton_version TEXT,
    commit_sha TEXT,                  -- git commit of the repo the kernels came from
    created_at TIMESTAMP DEFAULT current_timestamp,
    details TEXT                      -- JSON: targets, stages, command or directory, errors
);
CREATE TABLE IF NOT EXISTS ir_records (
    label TEXT NOT NULL,
    kernel TEXT NOT NULL,             -- module:function
    specialization TEXT NOT NULL,     -- stable key: arg types, divisibility, constexprs; options
    target TEXT NOT NULL,             -- cuda:90, hip:gfx942
    stage TEXT NOT NULL,              -- ttir | ttgir | llir | ptx | amdgcn
    collection_id TEXT NOT NULL,
    source_file TEXT,
    function TEXT,
    source_hash TEXT,
    triton_version TEXT,
    commit_sha TEXT,
    spec_json TEXT,                   -- JSON: signature, constexprs, divisible, options
    raw_text TEXT NOT NULL,
    normalized_text TEXT NOT NULL,
    normalizer_version INTEGER,
    raw_sha TEXT,
    normalized_sha TEXT,
    PRIMARY KEY (label, kernel, specialization, target, stage)
);
