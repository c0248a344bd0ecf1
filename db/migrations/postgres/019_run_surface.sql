-- PostgreSQL dialect of sqlite/019_run_surface.sql: the route a run's call came in by (runs.Run.Surface).
ALTER TABLE runs ADD COLUMN surface TEXT NOT NULL DEFAULT '';
