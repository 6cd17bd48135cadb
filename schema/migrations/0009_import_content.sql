-- import_runs: what each run's input held once decompressed, so that the store's
-- line counts (`continuity report`, reports/continuity.ts) count each content once.
--
-- content_hash (0002) is over the bytes as read: a file and its gzip differ there.
-- decoded_hash is the SHA-256 of the decompressed bytes and decoded_bytes their
-- length. prefix_hashes holds the decoded_hash of each earlier run of the same kind
-- whose content is a proper prefix of this run's (the same log, imported before it
-- grew): the importer hashes the new input's first L bytes, in the one pass it
-- reads them in, for each length L of an earlier run (collectors/caddy/import.ts).
--
-- Runs recorded before this migration have decoded_hash '' and decoded_bytes 0:
-- they are matched by content_hash only, and no later import can extend them.
ALTER TABLE import_runs ADD COLUMN IF NOT EXISTS decoded_bytes UInt64 DEFAULT 0;
ALTER TABLE import_runs ADD COLUMN IF NOT EXISTS decoded_hash String DEFAULT '';
ALTER TABLE import_runs ADD COLUMN IF NOT EXISTS prefix_hashes Array(String) DEFAULT [];
