import { describe, expect, it } from 'vitest';
import { classifyUpstreamError, UpstreamJoin, type UpstreamErrorClass } from './upstream.ts';

describe('classifyUpstreamError', () => {
  it.each([
    ['dial tcp 127.0.0.1:3001: connect: connection refused', 'connection_refused'],
    ['dial tcp 10.0.0.1:80: i/o timeout', 'timeout'],
    ['context deadline exceeded', 'timeout'],
    ['net/http: timeout awaiting response headers', 'timeout'],
    ['read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer', 'reset'],
    ['reading from backend unexpected EOF', 'incomplete_response'],
    ['aborting with incomplete response unexpected EOF', 'incomplete_response'],
    ['no upstreams available', 'other'],
  ])('%s → %s', (text, cls) => {
    expect(classifyUpstreamError(text)).toBe(cls);
  });
});

type Released = Array<[string, UpstreamErrorClass | undefined]>;

describe('UpstreamJoin', () => {
  it('keyed: joins on client address, port and equal duration within 1 s, each error once', () => {
    const j = new UpstreamJoin<string>();
    j.addKeyed('127.0.0.1', 54468, 0.000904492, 10_000_000, 'connection_refused');
    expect(j.takeKeyed('127.0.0.1', 54469, 0.000904492, 10_000_100)).toBeUndefined();
    expect(j.takeKeyed('127.0.0.1', 54468, 0.000904493, 10_000_100)).toBeUndefined();
    expect(j.takeKeyed('127.0.0.1', 54468, 0.000904492, 11_500_000)).toBeUndefined();
    expect(j.takeKeyed('127.0.0.1', 54468, 0.000904492, 10_000_100)).toBe('connection_refused');
    expect(j.takeKeyed('127.0.0.1', 54468, 0.000904492, 10_000_100)).toBeUndefined();
  });

  it('stream cut: holds the nearest not-yet-joined entry within 1 s and releases it joined when the window closes', () => {
    const j = new UpstreamJoin<string>();
    j.addStreamCut(5_000_000, 'incomplete_response');
    const released: Released = [];
    const release = (e: string, c: UpstreamErrorClass | undefined) => released.push([e, c]);
    expect(j.offer('far', 3_500_000, 'a', 1, release)).toBeUndefined(); // 1.5 s before: outside
    expect(j.offer('near', 4_400_000, 'a', 1, release)).toBe('near');
    expect(j.offer('nearer', 5_000_200, 'a', 2, release)).toBe('nearer');
    expect(released).toEqual([['near', undefined]]);
    expect(j.offer('later', 5_900_000, 'a', 3, release)).toBeUndefined();
    j.advance(6_000_000, release);
    expect(released).toHaveLength(1);
    j.advance(7_000_001, release);
    expect(released).toEqual([
      ['near', undefined],
      ['nearer', 'incomplete_response'],
    ]);
  });

  it('merges the two lines Caddy writes for one cut stream, but keeps two cut streams apart', () => {
    const j = new UpstreamJoin<string>();
    j.addStreamCut(5_000_000, 'incomplete_response'); // reading from backend
    j.addStreamCut(5_000_150, 'incomplete_response'); // aborting with incomplete response
    j.addStreamCut(5_000_300, 'incomplete_response'); // a second stream
    j.addStreamCut(5_000_400, 'incomplete_response');
    expect(j.stats.streamCuts).toBe(2);
    const released: Released = [];
    const release = (e: string, c: UpstreamErrorClass | undefined) => released.push([e, c]);
    j.offer('sse-1', 5_000_500, '', 0, release);
    j.offer('sse-2', 5_000_600, '', 0, release);
    j.offer('post', 5_400_000, '', 0, release);
    j.finish(release);
    expect(released.filter(([, c]) => c !== undefined).map(([e]) => e).sort()).toEqual(['sse-1', 'sse-2']);
  });

  it('a cut naming a client only takes that client', () => {
    const j = new UpstreamJoin<string>();
    j.addStreamCut(5_000_000, 'reset', '10.0.0.1', 4000);
    const release = () => undefined;
    expect(j.offer('other client', 5_000_001, '10.0.0.2', 4000, release)).toBeUndefined();
    expect(j.offer('same client', 5_000_900, '10.0.0.1', 4000, release)).toBe('same client');
  });

  it('is bounded: entries beyond the cap are counted, not kept', () => {
    const j = new UpstreamJoin<string>(2);
    j.addKeyed('a', 1, 1, 1, 'other');
    j.addStreamCut(2, 'other');
    j.addKeyed('a', 1, 1, 3, 'other');
    j.addStreamCut(4, 'other');
    expect(j.stats).toEqual({ keyed: 1, streamCuts: 1, dropped: 2 });
  });
});
