-- The history database starts empty; features add their tables in later migrations.
CREATE TABLE IF NOT EXISTS history_info (key TEXT PRIMARY KEY, value TEXT);
