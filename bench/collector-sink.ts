/**
 * The collector benchmark's null OTLP/HTTP logs endpoint (child process of
 * bench/collector.ts): reads and discards every body and answers `{}`. It runs in
 * its own process so that receiving the collector's exports does not take turns
 * on the event loop that drives the benchmark's SDK clients (in a deployment the
 * receiver is another process too); its CPU still counts against the machine.
 *
 *   node --import tsx bench/collector-sink.ts
 *
 * IPC: sends `{ ready: port }` once listening and `{ requests: n }` after each request.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

let requests = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    requests += 1;
    process.send?.({ requests });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(0, '127.0.0.1', () => process.send?.({ ready: (server.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));
