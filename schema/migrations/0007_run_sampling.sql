-- perfq run: where each run's sequential sampling stopped a test (max_samples: a decided one; sample_ceiling:
-- the most samples a side, --max-repeat or 5 x max_samples within a budget), so compare gives run's reasons.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS max_samples INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS sample_ceiling INTEGER;
