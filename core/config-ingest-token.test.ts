import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';
import { isContinuityError } from './errors.ts';

describe('ingest token (CONTINUITY_INGEST_TOKEN / --token)', () => {
  it('is unset by default, read from the environment, and the flag wins', () => {
    expect(loadConfig({}, { dataDir: '/tmp/x' }).ingestToken).toBeUndefined();
    expect(loadConfig({ CONTINUITY_INGEST_TOKEN: 'env-token-0123456789' }, { dataDir: '/tmp/x' }).ingestToken).toBe('env-token-0123456789');
    expect(loadConfig({ CONTINUITY_INGEST_TOKEN: 'env-token-0123456789' }, { dataDir: '/tmp/x', ingestToken: 'flag-token-0123456789' }).ingestToken).toBe('flag-token-0123456789');
    expect(loadConfig({ CONTINUITY_INGEST_TOKEN: '' }, { dataDir: '/tmp/x' }).ingestToken).toBeUndefined();
  });

  /** What loading a config with ingest token `token` throws (undefined: nothing). */
  const refusalOf = (token: string): unknown => {
    try {
      loadConfig({ CONTINUITY_INGEST_TOKEN: token }, { dataDir: '/tmp/x' });
    } catch (err) {
      return err;
    }
    return undefined;
  };

  it('refuses a short token at start with CONT_ERR_CONFIG naming the variable and the flag', () => {
    const error = refusalOf('short');
    expect(isContinuityError(error, 'CONT_ERR_CONFIG')).toBe(true);
    expect((error as Error).message).toContain('CONTINUITY_INGEST_TOKEN/--token');
  });

  it('refuses a token with a character a Bearer token cannot hold, in a message that prints on one line', () => {
    // (the message held a raw carriage return, and a terminal overwrote its start: a break-it pass)
    const error = refusalOf('aaaaaaaaaaaaaaaa%aa');
    expect(isContinuityError(error, 'CONT_ERR_CONFIG')).toBe(true);
    expect((error as Error).message).toMatch(/for a trailing carriage return \(\\r\) or newline/);
    expect((error as Error).message).not.toMatch(/[\r\n]/);
  });
});
