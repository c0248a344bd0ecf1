-- The route a run's call came in by (runs.Run.Surface: chat, messages, responses, embeddings,
-- completions); '' for the runs recorded before.
ALTER TABLE runs ADD COLUMN surface TEXT NOT NULL DEFAULT '';
