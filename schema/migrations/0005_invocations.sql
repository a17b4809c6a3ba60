-- perfq run: the wall time of every benchmark invocation (process start included) and the tests it
-- measured, so that a budgeted plan can cost a test by the median of its share of those walls.
CREATE TABLE IF NOT EXISTS invocations (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    seconds DOUBLE NOT NULL,        -- wall time of the process
    tests TEXT NOT NULL,            -- JSON list of "benchmark/test" it measured
    started_at TIMESTAMP,
    PRIMARY KEY (run_id, seq)
);
