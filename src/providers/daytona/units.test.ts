/**
 * Unit tests for the Daytona provider's pure parts: error normalisation, the journal parser,
 * shell quoting, configuration and the egress translation.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { inspect } from 'node:util';
import { isTransient } from '../../sandbox/index.ts';
import { DaytonaAdapter, networkSettingsFor } from './adapter.ts';
import { daytonaOptionsFromEnv, resolveConfig } from './config.ts';
import { fromHttp, fromTransport, retryAfterMs } from './errors.ts';
import { parseJournal } from './journal.ts';
import { quoteArgv, spawnCommand, splitQuoted, visibleCommand } from './shell.ts';

const h = (status: number, body = '', retryAfter: string | null = null) => ({ status, body, retryAfter, op: 'op' });

test('errors: only a definitive 404 is not_found; 5xx, 408 and transport failures are unavailable', () => {
  assert.equal(fromHttp(h(404), 'not_found').code, 'not_found');
  assert.equal(fromHttp(h(404), 'unavailable').code, 'unavailable');
  for (const s of [500, 502, 503, 504, 408]) assert.equal(fromHttp(h(s), 'not_found').code, 'unavailable', String(s));
  assert.equal(fromHttp(h(401), 'not_found').code, 'denied');
  assert.equal(fromHttp(h(403), 'not_found').code, 'denied');
  const rl = fromHttp(h(429, '', '3'), 'not_found');
  assert.equal(rl.code, 'rate_limited');
  assert.equal(rl.retryAfterMs, 3000);
  assert.equal(fromHttp(h(400, '{"message":"bad"}'), 'not_found').code, 'invalid');
  assert.equal(fromHttp(h(410), 'not_found').code, 'command_exited');
  const tier = fromHttp(
    h(400, '{"statusCode":400,"message":"Network access is restricted and cannot be overridden at the sandbox level"}'),
    'not_found',
  );
  assert.equal(tier.code, 'denied');
  assert.match(tier.detail ?? '', /network_restricted_by_tier/);
  const t = fromTransport('get', Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }));
  assert.equal(t.code, 'unavailable');
  assert.match(t.detail ?? '', /ECONNREFUSED/);
  assert.ok(isTransient(t));
  assert.equal(fromTransport('get', new DOMException('x', 'TimeoutError')).detail, 'get: timeout');
});

test('errors: a vendor message that echoes the key is scrubbed', () => {
  const key = 'dtn_very_secret_key_123';
  const e = fromHttp(h(401, JSON.stringify({ message: `invalid key ${key}` })), 'not_found', [key]);
  assert.ok(!JSON.stringify(e).includes(key));
  assert.match(e.detail ?? '', /\[redacted\]/);
  assert.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 4000), 6000);
  assert.equal(retryAfterMs('soon'), undefined);
});

test('journal: markers split the streams; partial lines wait; final consumes the rest', () => {
  const j = Buffer.from('\x01\x01\x01out1\n\x01\x01\x01out2\n\x02\x02\x02err\nplain\n\x01\x01\x01part');
  const p = parseJournal(j);
  assert.deepEqual(
    p.chunks.map((c) => [c.stream, Buffer.from(c.data).toString()]),
    [
      ['stdout', 'out1\nout2\n'],
      ['stderr', 'err\n'],
      ['stdout', 'plain\n'],
    ],
  );
  assert.equal(p.consumed, j.length - '\x01\x01\x01part'.length);
  const rest = parseJournal(j.subarray(p.consumed), true);
  assert.deepEqual(
    rest.chunks.map((c) => Buffer.from(c.data).toString()),
    ['part'],
  );
  assert.equal(rest.consumed, 7);
});

test('shell: quoting survives a real shell, and list_sessions sees the caller argv', () => {
  const argv = ['printf', '%s|', "it's", 'a b', '$HOME', '`x`', 'ü'];
  const out = execFileSync('sh', ['-c', quoteArgv(argv)]).toString();
  assert.equal(out, "it's|a b|$HOME|`x`|ü|");
  assert.deepEqual(splitQuoted(quoteArgv(argv)), argv);
  const line = spawnCommand('/home/u/.fountain/sessions/s1', undefined, true, ['agent', '--tag', 'conv-42']);
  assert.equal(visibleCommand(line), "'agent' '--tag' 'conv-42'");
  // The env is an assignment the session shell reads, so neither the listed command nor an argv holds it.
  const withEnv = spawnCommand('/home/u/.fountain/sessions/s2', undefined, false, ['agent'], [['TOKEN', "s3cr'et"]]);
  assert.equal(visibleCommand(withEnv), "'agent'");
  assert.match(withEnv, /^TOKEN='s3cr'\\''et' bash -c /);
});

test('config: blank equals unset; a missing key turns the provider off', () => {
  assert.deepEqual(daytonaOptionsFromEnv({ DAYTONA_API_KEY: '  ' }), {
    ok: false,
    error: { code: 'missing_api_key', message: 'DAYTONA_API_KEY is not set' },
  });
  const r = daytonaOptionsFromEnv({ DAYTONA_API_KEY: 'k', DAYTONA_API_URL: '', DAYTONA_SNAPSHOT: ' fountain ' });
  assert.ok(r.ok);
  assert.equal(resolveConfig(r.value).apiUrl, 'https://app.daytona.io/api');
  assert.equal(resolveConfig(r.value).snapshot, 'fountain');
  const bad = daytonaOptionsFromEnv({ DAYTONA_API_KEY: 'k', DAYTONA_API_URL: 'ftp://x' });
  assert.equal(!bad.ok && bad.error.code, 'invalid_config');
});

test('config: the adapter never shows its key', () => {
  const a = new DaytonaAdapter({ apiKey: 'dtn_inspect_me_not_42', apiUrl: 'http://127.0.0.1:9/api' });
  assert.ok(!inspect(a, { depth: 5, showHidden: true }).includes('dtn_inspect_me_not_42'));
  assert.ok(!JSON.stringify(a).includes('dtn_inspect_me_not_42'));
});

test('egress: allow [] blocks all with both lists cleared; entries split into domains and CIDRs', () => {
  assert.deepEqual(networkSettingsFor({ allow: [] }), {
    ok: true,
    value: { networkBlockAll: true, networkAllowList: '', domainAllowList: '' },
  });
  assert.deepEqual(networkSettingsFor({ allow: ['API.example.com', '*.npmjs.org', '10.0.0.0/8', '1.2.3.4'] }), {
    ok: true,
    value: { networkAllowList: '10.0.0.0/8,1.2.3.4/32', domainAllowList: 'api.example.com,*.npmjs.org' },
  });
  // Domains alone: no block-all flag and no empty CIDR list, either of which reopens egress.
  assert.deepEqual(networkSettingsFor({ allow: ['api.example.com'] }), {
    ok: true,
    value: { domainAllowList: 'api.example.com' },
  });
  // A single-label host (an internal registry, localhost) is a host name too: the environment API allows it.
  assert.deepEqual(networkSettingsFor({ allow: ['localhost', 'artifactory'] }), {
    ok: true,
    value: { domainAllowList: 'localhost,artifactory' },
  });
  const bad = networkSettingsFor({ allow: ['not a domain'] });
  assert.equal(!bad.ok && bad.error.code, 'invalid');
  assert.equal(!networkSettingsFor({ allow: ['300.1.1.1'] }).ok, true);
});
