// `continuity serve` warns when it listens beyond this machine with no token (a break-it
// pass: --host 0.0.0.0 opened ad hoc SQL over the whole store to the network unsaid).
import { describe, expect, it } from 'vitest';
import { isLoopbackHost } from '../cli/commands/serve.ts';

describe('isLoopbackHost', () => {
  it('is true only for names and addresses this machine alone reaches', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', 'LocalHost', 'api.localhost', '::1', '[::1]', '0:0:0:0:0:0:0:1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '[::]', '10.0.0.5', '192.168.1.1', 'example.com', 'localhost.example.com', '128.0.0.1', '1270.0.0.1']) expect(isLoopbackHost(h), h).toBe(false);
  });
});
