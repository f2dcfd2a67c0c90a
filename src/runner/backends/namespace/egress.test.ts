import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { startResolver } from './dns.ts';
import { allows, parseAllowList } from './policy.ts';
import { sniffName } from './sniff.ts';

describe('egress pieces', () => {
  it('the resolver answers allowed names with the gateway and everything else NXDOMAIN, to a real DNS client', async () => {
    const allow = ['allowed.test'];
    const sock = await startResolver(
      '127.0.0.1',
      0,
      (n) => (allows(allow, n) ? { kind: 'address', ipv4: '10.9.8.7', ttl: 5 } : { kind: 'nxdomain' }),
      () => {},
    );
    try {
      const r = new Resolver({ timeout: 2000, tries: 1 });
      r.setServers([`127.0.0.1:${sock.address().port}`]);
      assert.deepEqual(await r.resolve4('allowed.test'), ['10.9.8.7']);
      assert.deepEqual(await r.resolve4('ALLOWED.test'), ['10.9.8.7'], 'names compare case-insensitively');
      await assert.rejects(r.resolve4('denied.test'), (e: NodeJS.ErrnoException) => e.code === 'ENOTFOUND');
      await assert.rejects(r.resolve6('allowed.test'), (e: NodeJS.ErrnoException) => e.code === 'ENODATA');
    } finally {
      sock.close();
    }
  });

  it('reads the SNI from a real TLS ClientHello and the Host from an HTTP request', async () => {
    const hello = await new Promise<Buffer>((resolve) => {
      const server = createServer((s) => {
        s.once('data', (b) => {
          resolve(b);
          s.destroy();
          server.close();
        });
      }).listen(0, '127.0.0.1', () => {
        const c = tlsConnect({
          host: '127.0.0.1',
          port: (server.address() as AddressInfo).port,
          servername: 'api.example.test',
        });
        c.on('error', () => {});
      });
    });
    assert.deepEqual(sniffName(hello), { kind: 'name', name: 'api.example.test' });
    assert.deepEqual(sniffName(hello.subarray(0, 20)), { kind: 'more' });
    assert.deepEqual(sniffName(Buffer.from('GET / HTTP/1.1\r\nUser-Agent: x\r\nhost: a.test:8080\r\n\r\n')), {
      kind: 'name',
      name: 'a.test',
    });
    assert.deepEqual(sniffName(Buffer.from('GET / HTTP/1.1\r\nHost: a.test')), { kind: 'more' });
    assert.equal(sniffName(Buffer.from('SSH-2.0-OpenSSH\r\n\r\n')).kind, 'none');
    const lying = Buffer.from(hello);
    lying.writeUInt16BE(0xffff, 9 + 2 + 32); // a session-id length past the end
    assert.equal(sniffName(lying.subarray(0, hello.length)).kind === 'name', false);
  });

  it('allow lists: exact names and *. wildcards, normalized; URLs and junk refused', () => {
    const parsed = parseAllowList(['API.Example.com.', '*.cdn.test', 'api.example.com']);
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value, ['*.cdn.test', 'api.example.com']);
    assert.ok(allows(parsed.value, 'api.example.com'));
    assert.ok(allows(parsed.value, 'a.b.cdn.test'));
    assert.ok(!allows(parsed.value, 'cdn.test'), 'a wildcard does not cover the apex');
    assert.ok(!allows(parsed.value, 'evilcdn.test'));
    assert.ok(!allows(parsed.value, 'x.api.example.com'));
    assert.ok(!allows([], 'api.example.com'), 'allow: [] allows nothing');
    for (const bad of ['https://a.test', 'a.test:443', 'a..test', '', '*', 'a_b.test'])
      assert.equal(parseAllowList([bad]).ok, false, bad);
  });
});
