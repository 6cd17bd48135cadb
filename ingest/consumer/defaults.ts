/** The consumer's fetch defaults, apart from the consumer (kafkajs), so a command's help can name them without loading it. */

/**
 * Default time bound of a batch, ms: how long the broker may hold a fetch that has less
 * than `fetchMinBytes` to return. A partition's records are written apart from every
 * other partition's (the deduplication token names one partition's range), so at a
 * steady rate the writes per second are up to partitions ÷ this bound, and every write
 * costs the embedded engine a fixed amount on top of its rows: a one-row INSERT into
 * `events` took 29 ms of CPU with migrations 0001–0005 and 61 ms with 0006–0007 (each
 * view plans its SELECT per INSERT, even for no rows). At a steady 10,000 events/s over
 * 6 partitions (`npm run bench:ingest`), 250 ms let the consumer spend 162 µs of CPU per
 * event and the machine carry only 7,900 events/s; 1000 ms, 119 µs and 9,800 events/s.
 */
export const DEFAULT_FETCH_MAX_WAIT_MS = 1000;

/**
 * Default bytes a fetch waits for before the broker answers it (as stored: gzip record
 * batches, about 37 bytes per event of `npm run bench:ingest`, so 256 KiB ≈ 7,000 events).
 * The broker answers as soon as this much waits, or after {@link DEFAULT_FETCH_MAX_WAIT_MS}.
 * kafkajs fetches again only when the previous fetch's batches are written; with 1 MiB
 * (≈ 28,000 events, more than 10,000 events/s bring in a second) every fetch after a
 * write waited the whole second, so a batch's delay was the write time plus a second:
 * event→queryable p50 2.1–2.3 s and p99 3.7–4.2 s at 10,000 events/s. With 256 KiB the
 * fetch after a write returns at once when a write's worth arrived meanwhile: p50
 * 0.93–0.95 s and p99 1.70–1.74 s (two runs each, side by side, 2026-11-30), for about
 * three times as many (smaller) writes. A slow flow still waits the full second, so it
 * is not written a record at a time.
 */
export const DEFAULT_FETCH_MIN_BYTES = 256 << 10;

/**
 * Default interval of the consumer's lag check, ms: how often it reads its partitions'
 * ends and committed offsets from the cluster between fetches (two admin requests; the
 * same `continuity status` makes). A paused consumer fetches nothing, so its lag would
 * otherwise stay at the last batch's, 0 after a batch that caught up, while records wait.
 */
export const DEFAULT_LAG_CHECK_MS = 5000;
