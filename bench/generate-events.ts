/**
 * Synthetic contract events for `bench:queries`: a deterministic simulation of MCP
 * servers behind a reverse proxy, emitting what collectors/mcp and collectors/caddy
 * emit (DESIGN §3), in contract shape (µs timestamps, keyed-hash-shaped keys).
 *
 * The world: `services` services, each restarting `bootsPerService` times over
 * `spanS` seconds (about a third by kill -9: no shutdown, arrivals left unsettled;
 * the rest by SIGTERM with a drain). Every restart has a down gap (0.3–5 s) in which
 * the proxy answers 502 itself. `sessions` sessions from `principals` principals
 * each make requests through the proxy: every request is an `arrival` and a
 * `settlement` on the server plus a `proxy_access` line. A session that outlives its
 * boot meets the next boot: on the first service the server re-mints it (alias,
 * a `remint` event); elsewhere it is refused (`session_refused` unknown_after_boot,
 * a 404 at the proxy) and the client re-initializes within seconds (70%), or gives up.
 * About 2% of requests get a 401 (`auth_challenge` at both server and proxy) and retry;
 * principals report `cap_snapshot`s and sessions have `session_lifecycle` events,
 * some of them evictions at a cap.
 *
 * Rows come out in batches of JSONEachRow text, ready for `store.insertJsonEachRow`.
 */

import { prng } from './prng.ts';

/** Options of {@link generateEvents}. */
export interface WorldOptions {
  /** Stop after about this many events. */
  readonly events: number;
  readonly sessions: number;
  readonly principals: number;
  readonly services: number;
  readonly bootsPerService: number;
  /** Simulated time span, seconds. */
  readonly spanS: number;
  /** First event time, µs since the epoch. */
  readonly t0Micros: number;
  /** Rows per yielded batch. */
  readonly batchRows: number;
}

export const DEFAULT_WORLD: WorldOptions = {
  events: 10_000_000,
  sessions: 60_000,
  principals: 40,
  services: 2,
  bootsPerService: 12,
  spanS: 2 * 86_400,
  t0Micros: Date.UTC(2026, 10, 1) * 1000,
  batchRows: 200_000,
};

const hex8 = (n: number): string => (n >>> 0).toString(16).padStart(8, '0');
/** A keyed-hash-shaped key (32 lowercase hex) for an id in a namespace. */
const key = (ns: number, n: number): string => hex8(Math.imul(n ^ 0x9e3779b9, 0x85ebca6b) ^ ns) + hex8(n) + hex8(ns * 7919 + 17) + hex8(Math.imul(n, 0xc2b2ae35));

interface Boot {
  readonly service: string;
  readonly bootId: string;
  readonly release: string;
  /** Boot time and the end of its life (start of the next gap), s from t0. */
  readonly up: number;
  readonly downAt: number;
  /** The next boot's time, s (Infinity for the last). */
  readonly nextUp: number;
  readonly killed: boolean;
}

interface Session {
  id: number;
  key: string;
  service: number;
  principal: number;
  ua: string;
  ip: string;
  boot: number;
  t: number;
  end: number;
  gapS: number;
  /** Its initialize was emitted (when the session first comes up in time order). */
  started: boolean;
}

const USER_AGENTS = ['claude-code/2.0.14', 'Claude-User/1.0', 'cursor/1.7.3', 'node', 'mcp-inspector/0.17.0', 'python-httpx/0.28.1'];
const TOOLS = ['search', 'fetch', 'create_issue', 'list_files', 'read_file', 'run_query', 'summarize'];

/**
 * Yields batches of JSONEachRow text (one event per line) until about
 * `options.events` events; returns nothing else. Deterministic for a given seed.
 */
export function* generateEvents(options: Partial<WorldOptions> = {}, seed = 1): Generator<{ body: string; rows: number }> {
  const o = { ...DEFAULT_WORLD, ...options };
  const rnd = prng(seed);
  const t0 = o.t0Micros;
  const us = (s: number): number => t0 + Math.round(s * 1e6);
  let eventN = 0;
  let arrivalN = 0;
  let sessionN = o.sessions;
  let rows: string[] = [];
  let total = 0;
  const out: Array<{ body: string; rows: number }> = [];
  const emit = (e: Record<string, unknown>): void => {
    eventN++;
    e.event_id = `${hex8(eventN)}-${hex8(seed).slice(0, 4)}-7000-8000-${hex8(eventN * 31)}${hex8(eventN).slice(4)}`;
    rows.push(JSON.stringify(e));
    if (rows.length >= o.batchRows) {
      total += rows.length;
      out.push({ body: rows.join('\n'), rows: rows.length });
      rows = [];
    }
  };

  // Boots: evenly spaced per service with jitter; each ends in a gap.
  const bootsBySvc: Boot[][] = [];
  for (let s = 0; s < o.services; s++) {
    const service = `mcp-svc-${s}`;
    const every = o.spanS / o.bootsPerService;
    const list: Boot[] = [];
    const ups: number[] = [];
    for (let b = 0; b < o.bootsPerService; b++) ups.push(b === 0 ? 0 : b * every + rnd() * every * 0.2);
    for (let b = 0; b < o.bootsPerService; b++) {
      const nextUp = b + 1 < o.bootsPerService ? ups[b + 1]! : Infinity;
      const gap = 0.3 + rnd() * 4.7;
      list.push({
        service,
        bootId: `${service}-boot-${b}-${hex8(seed)}`,
        release: `v1.${Math.floor(b / 2)}.${b % 2}`,
        up: ups[b]!,
        downAt: nextUp - gap,
        nextUp,
        killed: rnd() < 0.34,
      });
    }
    bootsBySvc.push(list);
  }
  const bootAt = (svc: number, t: number): number => {
    const list = bootsBySvc[svc]!;
    let lo = 0;
    let hi = list.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (list[mid]!.up <= t) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const principalKeys = Array.from({ length: o.principals }, (_, i) => key(2, i));
  const liveByPrincipal = new Int32Array(o.principals);

  const server = (b: Boot, s: Session | null, t: number, type: string, extra: Record<string, unknown>): void =>
    emit({
      event_type: type,
      ts: us(t),
      source: 'server',
      service: b.service,
      instance: `${b.service}-0`,
      boot_id: b.bootId,
      release: b.release,
      environment: 'prod',
      protocol_version: '2025-11-25',
      session_key: s?.key ?? '',
      principal_key: s ? principalKeys[s.principal] : '',
      user_agent: s?.ua ?? '',
      ...extra,
    });
  const proxy = (s: Session, t: number, extra: Record<string, unknown>): void =>
    emit({
      event_type: 'proxy_access',
      ts: us(t),
      source: 'proxy',
      service: bootsBySvc[s.service]![0]!.service,
      environment: 'prod',
      user_agent: s.ua,
      http_method: 'POST',
      url_path: '/mcp',
      client_address: s.ip,
      client_port: 40_000 + (s.id % 20_000),
      has_credential: true,
      ...extra,
    });
  const capCounts = (p: number): Record<string, number> => ({
    live_count: Math.max(0, liveByPrincipal[p]!),
    live_cap: 2000,
    durable_count: Math.max(0, liveByPrincipal[p]!) * 2,
    durable_cap: 5000,
    global_count: 900 + Math.floor(rnd() * 200),
    global_cap: 100_000,
  });

  // One request of a session at time t. Returns false when the session ends here.
  const request = (s: Session, t: number, method: string): boolean => {
    const svcBoots = bootsBySvc[s.service]!;
    const bi = bootAt(s.service, t);
    const b = svcBoots[bi]!;
    if (t >= b.downAt) {
      // In the gap: the proxy answers 502 itself; the client retries after the gap.
      proxy(s, t, { request_session_key: s.key, http_status: 502, proxy_generated: true, upstream_error: 'connection_refused', duration_ms: 0.4 + rnd() });
      s.t = b.nextUp + 0.2 + rnd() * 2;
      return true;
    }
    const arrival = `${hex8(++arrivalN)}-${hex8(bi).slice(4)}-7000-8000-${hex8(arrivalN * 13)}0000`;
    const dur = 5 + rnd() * rnd() * 800;
    const tool = method === 'tools/call' ? TOOLS[Math.floor(rnd() * TOOLS.length)]! : '';
    server(b, s, t, 'arrival', { arrival_id: arrival, http_method: 'POST', mcp_method: method, jsonrpc_id: String(arrivalN), tool_name: tool, has_credential: true });
    if (bi !== s.boot) {
      // The session was minted by an earlier boot.
      if (s.service === 0) {
        const replacement = key(1, ++sessionN);
        server(b, s, t + 0.001, 'remint', { arrival_id: arrival, stale_session_key: s.key, replacement_session_key: replacement, mode: 'alias', outcome: 'created' });
        server(b, s, t + dur / 1000, 'settlement', { arrival_id: arrival, http_status: 200, outcome: 'ok', duration_ms: dur, session_resolution: 'alias', minted_session_key: replacement });
        proxy(s, t + dur / 1000, { request_session_key: s.key, http_status: 200, duration_ms: dur + 0.5, bytes: 300 });
        s.boot = bi;
        return true;
      }
      server(b, s, t + 0.0005, 'session_refused', { arrival_id: arrival, reason: 'unknown_after_boot', http_status: 404 });
      server(b, s, t + 0.001, 'settlement', { arrival_id: arrival, http_status: 404, outcome: 'refused', duration_ms: 0.8, session_resolution: 'refused' });
      proxy(s, t + 0.001, { request_session_key: s.key, http_status: 404, duration_ms: 1.2, bytes: 80 });
      liveByPrincipal[s.principal]!--;
      if (rnd() < 0.3) return false; // the client gives up: an unrecovered stale session
      s.key = key(1, ++sessionN);
      s.boot = bi;
      initialize(s, t + 0.5 + rnd() * 2.5);
      return true;
    }
    if (rnd() < 0.02) {
      // An expired token: 401 at the server, the client refreshes and retries.
      const cls = rnd() < 0.7 ? 'invalid_token' : 'expired_token';
      server(b, s, t + 0.001, 'auth_challenge', { arrival_id: arrival, http_status: 401, challenge_class: cls, has_credential: true, has_resource_metadata: true });
      server(b, s, t + 0.002, 'settlement', { arrival_id: arrival, http_status: 401, outcome: 'auth_challenge', duration_ms: 1.5, session_resolution: 'known' });
      proxy(s, t + 0.002, { request_session_key: s.key, http_status: 401, duration_ms: 2 });
      emit({ event_type: 'auth_challenge', ts: us(t + 0.002), source: 'proxy', service: b.service, environment: 'prod', user_agent: s.ua, session_key: s.key, http_status: 401, challenge_class: 'invalid_token', has_credential: true, has_resource_metadata: true });
      s.t = t + 1 + rnd() * 3;
      return true;
    }
    const failed = rnd() < 0.01;
    const toolErr = !failed && rnd() < 0.03;
    server(b, s, t + dur / 1000, 'settlement', {
      arrival_id: arrival,
      http_status: failed ? 500 : 200,
      outcome: failed ? 'jsonrpc_error' : toolErr ? 'tool_error' : 'ok',
      rpc_status_code: failed ? '-32603' : '',
      error_type: failed ? 'internal_error' : toolErr ? 'tool_error' : '',
      duration_ms: dur,
      session_resolution: 'known',
    });
    proxy(s, t + dur / 1000, { request_session_key: s.key, http_status: failed ? 500 : 200, duration_ms: dur + 0.5, bytes: 200 + Math.floor(rnd() * 5000) });
    return true;
  };
  const initialize = (s: Session, t: number): void => {
    const bi = bootAt(s.service, t);
    const b = bootsBySvc[s.service]![bi]!;
    if (t >= b.downAt) {
      proxy(s, t, { http_status: 502, proxy_generated: true, upstream_error: 'connection_refused', duration_ms: 0.3 });
      t = b.nextUp + 0.5;
      return initialize(s, t);
    }
    const arrival = `${hex8(++arrivalN)}-${hex8(bi).slice(4)}-7000-8000-${hex8(arrivalN * 13)}0000`;
    s.boot = bi;
    server(b, null, t, 'arrival', { arrival_id: arrival, http_method: 'POST', mcp_method: 'initialize', jsonrpc_id: '0', has_credential: true, user_agent: s.ua, principal_key: principalKeys[s.principal] });
    server(b, null, t + 0.004, 'settlement', { arrival_id: arrival, http_status: 200, outcome: 'ok', duration_ms: 4, session_resolution: 'new', minted_session_key: s.key, user_agent: s.ua, principal_key: principalKeys[s.principal] });
    proxy(s, t + 0.004, { response_session_key: s.key, http_status: 200, duration_ms: 4.5, bytes: 420 });
    liveByPrincipal[s.principal]!++;
    const evict = rnd() < 0.01;
    server(b, s, t + 0.005, 'session_lifecycle', { action: 'created', cap_kind: 'none', ...capCounts(s.principal) });
    if (evict) {
      server(b, s, t + 0.006, 'session_lifecycle', {
        action: 'evicted',
        cap_kind: rnd() < 0.7 ? 'live' : 'durable',
        session_key: key(3, s.id),
        victim_idle_ms: rnd() < 0.2 ? rnd() * 50_000 : 60_000 + rnd() * 3_600_000,
        victim_in_flight: 0,
        ...capCounts(s.principal),
      });
    }
    s.t = t + 1;
  };

  // Sessions start over the span; each makes requests at its own pace until its end.
  // ~3.1 events per request on average; aim a little high: the loop stops at `events`
  const perSession = o.events / o.sessions / 2.8;
  const sessions: Session[] = [];
  for (let i = 0; i < o.sessions; i++) {
    const service = i % o.services;
    const start = rnd() * o.spanS * 0.95;
    const life = Math.min(o.spanS - start, 600 + rnd() * o.spanS * 0.4);
    const s: Session = {
      id: i,
      key: key(1, i),
      service,
      principal: Math.floor(rnd() * rnd() * o.principals),
      ua: USER_AGENTS[i % USER_AGENTS.length]!,
      ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      boot: 0,
      t: start,
      end: start + life,
      gapS: life / perSession,
      started: false,
    };
    sessions.push(s);
  }
  // Process sessions in time order of their next request (a simple binary heap),
  // each starting with its initialize, so events come out in about the order a
  // live pipeline stores them (a batch covers a stretch of time, as a consumer's
  // would; initializing every session up front put every session's first events,
  // across the whole span, in the first batches)
  const heap = sessions.slice().sort((a, b) => a.t - b.t);
  const lastSnapshot = new Float64Array(o.principals).fill(-1e9);
  const push = (s: Session): void => {
    heap.push(s);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (heap[p]!.t <= heap[i]!.t) break;
      [heap[p], heap[i]] = [heap[i]!, heap[p]!];
      i = p;
    }
  };
  const pop = (): Session | undefined => {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && heap[l]!.t < heap[m]!.t) m = l;
        if (r < heap.length && heap[r]!.t < heap[m]!.t) m = r;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i]!, heap[m]!];
        i = m;
      }
    }
    return top;
  };
  const bootEmitted = new Set<string>();
  const emitBootsUpTo = (t: number): void => {
    for (const list of bootsBySvc) {
      for (const b of list) {
        if (b.up > t || bootEmitted.has(b.bootId)) continue;
        bootEmitted.add(b.bootId);
        server(b, null, b.up, 'boot', { pid: 1000 + bootEmitted.size, started_at: us(b.up) });
        if (Number.isFinite(b.nextUp) && !b.killed) {
          server(b, null, b.downAt, 'shutdown', { reason: 'signal', in_flight: Math.floor(rnd() * 3), drain_ms: 50 + rnd() * 900 });
        }
        if (Number.isFinite(b.nextUp) && b.killed) {
          // kill -9: arrivals that never settle
          const n = 1 + Math.floor(rnd() * 4);
          for (let k = 0; k < n; k++) {
            const arrival = `${hex8(++arrivalN)}-dead-7000-8000-${hex8(arrivalN * 13)}0000`;
            server(b, null, b.downAt - 0.05 * (k + 1), 'arrival', { arrival_id: arrival, http_method: 'POST', mcp_method: 'tools/call', tool_name: 'fetch', has_credential: true });
          }
        }
      }
    }
  };
  while (heap.length > 0 && eventN < o.events) {
    const s = pop()!;
    emitBootsUpTo(s.t);
    if (!s.started) {
      s.started = true;
      initialize(s, s.t);
      push(s);
    } else if (s.t >= s.end) {
      server(bootsBySvc[s.service]![bootAt(s.service, s.t)]!, s, s.t, 'session_lifecycle', { action: 'closed', ...capCounts(s.principal) });
      liveByPrincipal[s.principal]!--;
    } else {
      const now = s.t;
      s.t = now + s.gapS * (0.5 + rnd());
      const alive = request(s, now, rnd() < 0.85 ? 'tools/call' : 'tools/list');
      if (now - lastSnapshot[s.principal]! > 60) {
        lastSnapshot[s.principal] = now;
        server(bootsBySvc[s.service]![bootAt(s.service, now)]!, null, now, 'cap_snapshot', { principal_key: principalKeys[s.principal], ...capCounts(s.principal) });
      }
      if (alive) push(s);
    }
    while (out.length > 0) yield out.shift()!;
  }
  emitBootsUpTo(Infinity);
  if (rows.length > 0) out.push({ body: rows.join('\n'), rows: rows.length });
  total += rows.length;
  while (out.length > 0) yield out.shift()!;
}
