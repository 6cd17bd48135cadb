// `continuity serve` warns when it listens beyond this machine with no token (a break-it
// pass: --host 0.0.0.0 opened ad hoc SQL over the whole store to the network unsaid).
import { describe, expect, it } from 'vitest';
import { foreignHostError, isLoopbackHost } from '../core/index.ts';

describe('isLoopbackHost', () => {
  it('is true only for names and addresses this machine alone reaches', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', 'LocalHost', 'api.localhost', '::1', '[::1]', '0:0:0:0:0:0:0:1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '[::]', '10.0.0.5', '192.168.1.1', 'example.com', 'localhost.example.com', '128.0.0.1', '1270.0.0.1']) expect(isLoopbackHost(h), h).toBe(false);
  });
});

describe('foreignHostError (a tokenless loopback server against DNS rebinding)', () => {
  it('lets loopback Hosts (with or without a port) and no Host through, and refuses any other name with 421', () => {
    for (const h of [undefined, '', '127.0.0.1:4318', 'localhost', 'localhost:80', '[::1]:4318', '[::1]']) expect(foreignHostError(h), String(h)).toBeUndefined();
    for (const h of ['evil.example', 'evil.example:4318', '10.0.0.5:4318', '[2001:db8::1]:4318', 'localhost.evil.example']) {
      expect(foreignHostError(h), h).toMatchObject({ code: 'CONT_ERR_HOST_REFUSED', httpStatus: 421 });
    }
  });
});
