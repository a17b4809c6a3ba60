-- perfq run: what the machine did during every benchmark invocation (PSI stall shares, steal, run
-- queue) and the process's own rusage (CPU share of its wall, faults, context switches), as JSON.
ALTER TABLE invocations ADD COLUMN IF NOT EXISTS machine TEXT;
