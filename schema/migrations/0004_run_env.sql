-- perfq run: what each run ran on (machine, interpreter, torch build and config, commit), as JSON.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS env TEXT;
