/**
 * The ingest consumer's pipeline (DESIGN §2, §5): named steps composed top to bottom
 * in this one file, each answering with an explicit {@link Outcome} — `ok`, `drop`,
 * `dlq` or `retry` (built by {@link ok}, {@link drop}, {@link dlq}, {@link retryLater};
 * PostHog's ingestion-pipeline style):
 *
 *   decode   bytes → JSON            dlq: empty | too_large | not_utf8 | not_json
 *   validate JSON → contract event   dlq: invalid_event (zod, `parseEvent`)
 *   enrich   event → stored event    drop: duplicate_in_batch
 *   (an exception out of any of these three for one message → dlq: invalid_event)
 *   write    batch → store           ok | retry(err) (store or Kafka unavailable, a full disk);
 *                                    rows older than the store's retention → dlq: expired;
 *                                    rows the store refuses → dlq: store_rejected
 *
 * A batch is a contiguous offset range `[first, last]` of ONE partition. Its events go
 * to `events` in one INSERT carrying `insert_deduplication_token =
 * topic:partition:first-last:content` ({@link dedupToken}); dead letters go to the dead-letter
 * topic and the `dead_letters` table, once per record (offset and payload). The pipeline knows nothing of
 * consumer groups: the runner (runner.ts) decides the ranges, records its intent to
 * write a range before {@link runBatch} writes it, and commits offsets after.
 */
import { createHash } from 'node:crypto';
import { ContinuityError, isContinuityError } from '../../core/errors.ts';
import { retry } from '../../core/retry.ts';
import { parseEvent, type ContinuityEvent, type EventIssue } from '../../schema/index.ts';
import type { Retention, Store } from '../../store/index.ts';
import { createJsonLines, type JsonLines } from './json-lines.ts';

// ---------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------

/** Why a message went to the dead-letter topic and table (the `reason` column). */
export type DeadLetterReason = 'empty' | 'too_large' | 'not_utf8' | 'not_json' | 'invalid_event' | 'expired' | 'store_rejected';
/** Why a message was left out on purpose (counted, not dead-lettered). */
export type DropReason = 'duplicate_in_batch';

/** What one step made of its input. */
export type Outcome<T> =
  | { readonly kind: 'ok'; readonly value: T }
  | { readonly kind: 'drop'; readonly reason: DropReason }
  | { readonly kind: 'dlq'; readonly reason: DeadLetterReason; readonly detail: string }
  | { readonly kind: 'retry'; readonly error: Error };

export const ok = <T>(value: T): Outcome<T> => ({ kind: 'ok', value });
export const drop = <T>(reason: DropReason): Outcome<T> => ({ kind: 'drop', reason });
export const dlq = <T>(reason: DeadLetterReason, detail: string): Outcome<T> => ({ kind: 'dlq', reason, detail });
export const retryLater = <T>(error: Error): Outcome<T> => ({ kind: 'retry', error });

// ---------------------------------------------------------------------------
// Inputs and context
// ---------------------------------------------------------------------------

/** One Kafka record as the pipeline sees it (decoupled from kafkajs's type). */
export interface InputMessage {
  readonly offset: bigint;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Record timestamp (producer CreateTime), ms since the epoch, UTC. */
  readonly timestampMs: number;
  readonly headers: Readonly<Record<string, unknown>>;
}

/** A contiguous offset range of one partition, with the records in it. */
export interface MessageRange {
  readonly topic: string;
  readonly partition: number;
  /** First and last offset of the range (inclusive); the deduplication token names them. */
  readonly first: bigint;
  readonly last: bigint;
  readonly messages: readonly InputMessage[];
}

/** A message that goes to the dead-letter topic and table. */
export interface DeadLetter {
  readonly message: InputMessage;
  readonly reason: DeadLetterReason;
  /** Human-readable cause (zod issues, parse error), at most 2000 characters. */
  readonly detail: string;
}

/** Output of the per-message steps for one range: what `write` will store. */
export interface PreparedBatch {
  readonly range: MessageRange;
  readonly token: string;
  /**
   * The rows for `events` as JSONEachRow lines (UTF-8, each ending in '\n'), in offset
   * order; row i came from `rowMessages[i]`.
   */
  readonly rows: JsonLines;
  readonly rowMessages: InputMessage[];
  /** Event time of row i, µs since the epoch (UTC), and the earliest of them (+Infinity for no rows). */
  readonly rowTs: number[];
  readonly oldestTs: number;
  readonly deadLetters: DeadLetter[];
  readonly drops: Partial<Record<DropReason, number>>;
}

/** Where `write` puts things. */
export interface WriteTargets {
  readonly store: Store;
  /** The store's retention (store/retention.ts): rows older than it are dead-lettered as `expired`. */
  readonly retention: Pick<Retention, 'cutoffMicros' | 'explain'>;
  /**
   * Publishes dead letters to the dead-letter topic and resolves once the broker
   * acknowledged them (acks=all). Rejects with a retriable error when Kafka is down.
   */
  publishDeadLetters(range: MessageRange, letters: readonly DeadLetter[]): Promise<void>;
}

/** Settings of the steps. */
export interface PipelineContext {
  readonly targets: WriteTargets;
  /** Larger message values are dead-lettered as `too_large` (KAFKA_MAX_MESSAGE_BYTES). */
  readonly maxMessageBytes: number;
  /** Backoff of the write step while it answers retry: first and ceiling, ms. */
  readonly retryInitialDelayMs?: number;
  readonly retryMaxDelayMs?: number;
}

/** Hooks the runner lends {@link runBatch}. */
export interface BatchHooks {
  /**
   * Called after the per-message steps and before anything is written: the runner
   * makes its intent to write `[first, last]` durable here (see runner.ts).
   */
  beforeWrite(batch: PreparedBatch): Promise<void>;
  /**
   * Called when `write` answered retry, before each backoff: the first call pauses
   * consumption; every call keeps the group membership alive (heartbeat). Throwing
   * abandons the batch (e.g. a rebalance took the partition away).
   */
  onRetry(error: Error, attempt: number): Promise<void>;
  /** Called once the write succeeded after at least one retry (resume consumption). */
  onRecovered(): Promise<void>;
  /** Aborts the backoff (shutdown): the batch is then left unwritten and uncommitted. */
  readonly signal?: AbortSignal;
}

/** What {@link runBatch} did with one range. */
export interface BatchReport {
  readonly token: string;
  readonly messages: number;
  readonly rows: number;
  readonly deadLetters: Partial<Record<DeadLetterReason, number>>;
  readonly drops: Partial<Record<DropReason, number>>;
  /** Write attempts that answered retry before the batch went through. */
  readonly retries: number;
}

// ---------------------------------------------------------------------------
// The pipeline, top to bottom
// ---------------------------------------------------------------------------

/**
 * Runs one range through the pipeline: decode → validate → enrich for each message,
 * then write the batch, backing off with full jitter (core/retry.ts) while the write
 * answers retry, until it succeeds or `hooks.signal` aborts.
 * @throws the write step's non-retriable error (a programming or schema error: the
 *   consumer stops rather than dead-letter everything); an AbortError on shutdown;
 *   whatever a hook throws.
 */
export async function runBatch(range: MessageRange, ctx: PipelineContext, hooks: BatchHooks): Promise<BatchReport> {
  const batch = prepare(range, ctx);
  await hooks.beforeWrite(batch);
  let retries = 0;
  let lastRetry: Error | undefined;
  const written = await retry(
    async () => {
      const outcome = await write(batch, ctx.targets);
      if (outcome.kind === 'ok') return outcome.value;
      if (outcome.kind !== 'retry') throw new Error(`write answered ${outcome.kind}`);
      retries++;
      lastRetry = outcome.error;
      await hooks.onRetry(outcome.error, retries);
      throw outcome.error;
    },
    {
      // As long as it takes: the records wait in Kafka and the lag shows it; shutdown aborts.
      attempts: Number.POSITIVE_INFINITY,
      initialDelayMs: ctx.retryInitialDelayMs ?? 200,
      maxDelayMs: ctx.retryMaxDelayMs ?? 5000,
      // Only the write's own retry outcome is retried; a hook's error (a rebalance) is not.
      isRetriable: (err) => err !== undefined && err === lastRetry,
      ...(hooks.signal ? { signal: hooks.signal } : {}),
    },
  );
  if (retries > 0) await hooks.onRecovered();
  return { ...written, retries, messages: range.messages.length, drops: batch.drops, token: batch.token };
}

/**
 * The per-message steps over a whole range. Pure: equal ranges give equal batches.
 * Never throws because of a message: each one ends as a row, a dead letter or a drop.
 */
export function prepare(range: MessageRange, ctx: Pick<PipelineContext, 'maxMessageBytes'>): PreparedBatch {
  // Rows are about as long as the records they come from (defaults filled in, key order
  // the contract's), so the records' size is a fair first guess of the body's.
  let valueBytes = 0;
  for (const m of range.messages) valueBytes += m.value?.length ?? 0;
  const rows = createJsonLines(valueBytes + (valueBytes >> 3) + 64 * range.messages.length);
  const rowMessages: InputMessage[] = [];
  const rowTs: number[] = [];
  let oldestTs = Number.POSITIVE_INFINITY;
  const deadLetters: DeadLetter[] = [];
  const drops: Partial<Record<DropReason, number>> = {};
  const seen = new Set<string>();
  const content = createHash('sha256');
  for (const message of range.messages) {
    // (each record's length, then its bytes: records split differently digest differently)
    content.update(`${message.value?.length ?? -1}:`);
    if (message.value) content.update(message.value);
    const outcome = step(message, ctx.maxMessageBytes, seen);
    switch (outcome.kind) {
      case 'ok': {
        const ts = outcome.value.ts;
        rows.push(JSON.stringify(outcome.value));
        rowMessages.push(message);
        rowTs.push(ts);
        if (ts < oldestTs) oldestTs = ts;
        break;
      }
      case 'dlq':
        deadLetters.push({ message, reason: outcome.reason, detail: outcome.detail });
        break;
      case 'drop':
        drops[outcome.reason] = (drops[outcome.reason] ?? 0) + 1;
        break;
      case 'retry':
        throw outcome.error; // no per-message step retries
    }
  }
  const token = dedupToken(range.topic, range.partition, range.first, range.last, content.digest('hex').slice(0, 16));
  return { range, token, rows, rowMessages, rowTs, oldestTs, deadLetters, drops };
}

/**
 * decode → validate → enrich for one message; `ok` carries the event to store.
 * The steps answer with outcomes and are not meant to throw; should one throw anyway
 * (input nobody foresaw), that one message becomes an `invalid_event` dead letter
 * naming the exception: it must not stop the consumer, which would replay it on every
 * restart and stop again (DESIGN §5: bad input never crashes a component).
 */
function step(message: InputMessage, maxMessageBytes: number, seen: Set<string>): Outcome<ContinuityEvent> {
  let at = 'decode';
  try {
    const decoded = decode(message, maxMessageBytes);
    if (decoded.kind !== 'ok') return decoded;
    at = 'validate';
    const validated = validate(decoded.value, message);
    if (validated.kind !== 'ok') return validated;
    at = 'enrich';
    return enrich(validated.value, seen);
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    return dlq('invalid_event', clip(`the ${at} step failed on this record: ${e.name}: ${e.message}`));
  }
}

// ---------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * decode: the record value as JSON. Empty values (tombstones), values over
 * `maxMessageBytes`, invalid UTF-8 (RFC 3629) and invalid JSON (RFC 8259) are dead letters.
 */
export function decode(message: InputMessage, maxMessageBytes: number): Outcome<unknown> {
  const value = message.value;
  if (value === null || value.length === 0) return dlq('empty', 'the record has no value');
  if (value.length > maxMessageBytes) return dlq('too_large', `${value.length} bytes > max ${maxMessageBytes} (KAFKA_MAX_MESSAGE_BYTES)`);
  let text: string;
  try {
    text = utf8.decode(value);
  } catch {
    return dlq('not_utf8', 'the value is not valid UTF-8');
  }
  try {
    return ok(JSON.parse(text) as unknown);
  } catch (err) {
    return dlq('not_json', clip((err as Error).message));
  }
}

/**
 * validate: contract v1 via {@link parseEvent} (zod). "Now" for the future-time check
 * is the record's own timestamp, so a replayed record is judged as it was the first time.
 */
export function validate(input: unknown, message: InputMessage): Outcome<ContinuityEvent> {
  const nowMicros = Number.isFinite(message.timestampMs) && message.timestampMs > 0 ? message.timestampMs * 1000 : Date.now() * 1000;
  const result = parseEvent(input, { nowMicros });
  return result.ok ? ok(result.event) : dlq('invalid_event', formatIssues(result.issues));
}

/**
 * enrich: contract v1 adds nothing at ingest (keys are hashed at the source, DESIGN §3),
 * so this step only drops a second copy of an `event_id` within the same batch (a
 * producer retry that landed twice side by side). Copies in different batches are
 * collapsed by the table (ReplacingMergeTree on `event_id`, read with FINAL).
 */
export function enrich(event: ContinuityEvent, seenInBatch: Set<string>): Outcome<ContinuityEvent> {
  if (seenInBatch.has(event.event_id)) return drop('duplicate_in_batch');
  seenInBatch.add(event.event_id);
  return ok(event);
}

/**
 * write: inserts the batch's rows into `events` with the range's deduplication token,
 * then writes its dead letters (topic and table) for the offsets that have none yet.
 * A retried or replayed batch therefore stores nothing twice. When the store refuses
 * the rows as data (a parse or type error), the batch is bisected — sub-ranges carry
 * `<token>/<first>-<last>` tokens, deterministic on replay — and the refused rows
 * become `store_rejected` dead letters.
 *
 * Rows whose event time is older than the store's retention at this attempt become
 * `expired` dead letters instead of being inserted: the TTL would drop them unseen. It
 * is judged here, at the write, not when the record was produced: records can wait in
 * Kafka (lag, a store outage) until they pass the retention. The check is one
 * comparison per batch (its oldest row) and, only when that fails, one per row. A row
 * that expires between a write the store took and its replay is dead-lettered on the
 * replay too (the replay's insert is then dropped by the token): at worst a dead letter
 * for an event the TTL removes anyway, never a loss.
 * @returns ok, or retry(err) when the store or Kafka is unavailable (retriable errors,
 *   a full disk among them).
 * @throws non-retriable errors that are not about the rows (missing table, bad SQL).
 */
export async function write(batch: PreparedBatch, targets: WriteTargets): Promise<Outcome<Pick<BatchReport, 'rows' | 'deadLetters'>>> {
  try {
    const { rows, expired } = unexpired(batch, targets.retention);
    const refused = await insertRows(targets.store, rows, 0, rows.rows.length, batch.token);
    const extra = [...expired, ...refused];
    const letters = extra.length === 0 ? batch.deadLetters : [...batch.deadLetters, ...extra].sort(byOffset);
    if (letters.length > 0) await writeDeadLetters(targets, batch.range, letters);
    const deadLetters: Partial<Record<DeadLetterReason, number>> = {};
    for (const l of letters) deadLetters[l.reason] = (deadLetters[l.reason] ?? 0) + 1;
    return ok({ rows: rows.rows.length - refused.length, deadLetters });
  } catch (err) {
    if (isRetriable(err)) return retryLater(err as Error);
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Helpers of the steps
// ---------------------------------------------------------------------------

/**
 * The insert deduplication token of a range: `topic:partition:first-last:content`, where
 * `content` is a digest of the range's records (16 hex digits of SHA-256 over each
 * record's length and bytes). A replay of the range reads the same records and gets the
 * same token, so the store drops its insert; a topic deleted and created again (or a
 * broker whose data was wiped) numbers new records from 0 again, and by offsets alone
 * their batches took the tokens of the old ones and were dropped as copies, offsets
 * committed (a break-it pass: 100 acknowledged events lost). Topic names that would make
 * it longer than the store's 200-character limit are replaced by the first 24 hex digits
 * of their SHA-256.
 * @param content the records' digest ('' for none: the token is then the range alone).
 */
export function dedupToken(topic: string, partition: number, first: bigint, last: bigint, content = ''): string {
  const tail = `:${partition}:${first}-${last}${content ? `:${content}` : ''}`;
  const name = topic.length + tail.length <= 160 ? topic : createHash('sha256').update(topic).digest('hex').slice(0, 24);
  return `${name}${tail}`;
}

/** Rows to insert: row i is `rows.line(i)` and came from `rowMessages[i]`; `token` names the whole range. */
type RowSet = Pick<PreparedBatch, 'rows' | 'rowMessages' | 'token'>;

/**
 * The batch's rows still within the store's retention now, and `expired` dead letters
 * for the others. The batch itself when none is older than the cutoff (the usual case:
 * one comparison); otherwise a copy of the rows that are kept.
 */
function unexpired(batch: PreparedBatch, retention: WriteTargets['retention']): { rows: RowSet; expired: DeadLetter[] } {
  const cutoff = retention.cutoffMicros();
  if (!(batch.oldestTs < cutoff)) return { rows: batch, expired: [] };
  const kept = createJsonLines(batch.rows.byteLength);
  const keptMessages: InputMessage[] = [];
  const expired: DeadLetter[] = [];
  for (let i = 0; i < batch.rows.length; i++) {
    const ts = batch.rowTs[i]!;
    if (ts < cutoff) expired.push({ message: batch.rowMessages[i]!, reason: 'expired', detail: clip(retention.explain(ts, cutoff)) });
    else {
      kept.push(batch.rows.line(i));
      keptMessages.push(batch.rowMessages[i]!);
    }
  }
  return { rows: { rows: kept, rowMessages: keptMessages, token: batch.token }, expired };
}

/** Inserts rows [from, to) with `token`; returns the rows the store refused as data. */
async function insertRows(store: Store, batch: RowSet, from: number, to: number, token: string): Promise<DeadLetter[]> {
  if (to <= from) return [];
  try {
    await store.insertJsonEachRow('events', batch.rows.lines(from, to), { dedupToken: token });
    return [];
  } catch (err) {
    if (isRetriable(err) || !isDataError(err)) throw err;
    if (to - from === 1) {
      return [{ message: batch.rowMessages[from]!, reason: 'store_rejected', detail: clip((err as Error).message) }];
    }
    const mid = from + Math.floor((to - from) / 2);
    const sub = (a: number, b: number) =>
      `${batch.token}/${batch.rowMessages[a]!.offset}-${batch.rowMessages[b - 1]!.offset}`;
    const left = await insertRows(store, batch, from, mid, sub(from, mid));
    const right = await insertRows(store, batch, mid, to, sub(mid, to));
    return [...left, ...right];
  }
}

/** ClickHouse errors that blame the inserted data rather than the statement or the server. */
function isDataError(err: unknown): boolean {
  return /CANNOT_PARSE|INCORRECT_DATA|TYPE_MISMATCH|CANNOT_READ|VALUE_IS_OUT_OF_RANGE|ARGUMENT_OUT_OF_BOUND|TOO_LARGE_STRING|CANNOT_CONVERT|INCORRECT_JSON|Cannot parse/i.test(
    (err as Error)?.message ?? '',
  );
}

/**
 * Dead letters go to the topic first, then to the table; only records the table does
 * not hold yet are written, so a replayed batch adds none twice to the table (the
 * topic is at-least-once: a crash between the two writes republishes). A record is
 * held when a row has its offset and its payload: a topic created again starts its
 * offsets at 0, and its records are not the old ones (skipped by offset alone, they
 * were lost: a break-it pass), as the events' token names the records too ({@link dedupToken}).
 */
async function writeDeadLetters(targets: WriteTargets, range: MessageRange, letters: readonly DeadLetter[]): Promise<void> {
  const origin = `${range.topic}:${range.partition}`;
  const candidates = letters.map((letter) => {
    const value = letter.message.value ?? Buffer.alloc(0);
    return { letter, bytes: value.length, text: payloadText(value) };
  });
  const have = await targets.store.query<{ position: number | string; payload: string }>(
    `SELECT DISTINCT position, payload FROM dead_letters
     WHERE source = 'kafka' AND origin = {origin:String} AND position BETWEEN {first:UInt64} AND {last:UInt64}`,
    { origin, first: range.first.toString(), last: range.last.toString() },
  );
  const written = new Set(have.map((r) => `${r.position}\n${r.payload}`));
  const missing = candidates.filter((c) => !written.has(`${c.letter.message.offset}\n${c.text.payload}`));
  if (missing.length === 0) return;
  await targets.publishDeadLetters(range, missing.map((m) => m.letter));
  const rows = missing.map(({ letter: l, bytes, text }) =>
    JSON.stringify({
      source: 'kafka',
      origin,
      position: l.message.offset.toString(),
      reason: l.reason,
      detail: text.base64 ? `${l.detail} (payload is base64)` : l.detail,
      payload: text.payload,
      payload_bytes: bytes,
    }),
  );
  await targets.store.insertJsonEachRow('dead_letters', rows.join('\n'));
}

/** The payload as text: UTF-8 when it is valid UTF-8, base64 otherwise. */
function payloadText(value: Buffer): { payload: string; base64: boolean } {
  try {
    return { payload: utf8.decode(value), base64: false };
  } catch {
    return { payload: value.toString('base64'), base64: true };
  }
}

function isRetriable(err: unknown): boolean {
  if (isContinuityError(err)) return err.retriable;
  // kafkajs errors carry `retriable` too (a broker that is down, a leader election).
  return (err as { retriable?: unknown })?.retriable === true;
}

function formatIssues(issues: readonly EventIssue[]): string {
  return clip(issues.slice(0, 10).map((i) => `${i.path || '(event)'} ${i.code}: ${i.message}`).join('; '));
}

function clip(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function byOffset(a: DeadLetter, b: DeadLetter): number {
  return a.message.offset < b.message.offset ? -1 : a.message.offset > b.message.offset ? 1 : 0;
}

/** A retriable error for a dead-letter topic that cannot take messages. */
export function deadLetterTopicUnavailable(topic: string, err: unknown): ContinuityError {
  return new ContinuityError('CONT_ERR_KAFKA_UNAVAILABLE', `dead-letter topic ${topic}: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}
