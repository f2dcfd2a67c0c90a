import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialsError, readCredentials, resolveCredentials, saveProfile } from './credentials.ts';

const key = (c: string) => `ftn_${c.repeat(64)}`;

test('profiles are saved 0600, default first, values quoted, and read back', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cred-'));
  const path = join(dir, 'sub', 'credentials');
  saveProfile('work', { base_url: 'http://127.0.0.1:9', api_key: key('b') }, path);
  saveProfile('default', { base_url: 'http://127.0.0.1:4000', api_key: key('a') }, path);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(join(dir, 'sub')).mode & 0o777, 0o700);
  const text = readFileSync(path, 'utf8');
  assert.ok(text.startsWith('[default]\n'));
  assert.match(text, /api_key = "ftn_a+"/);
  assert.equal(readCredentials(path).work?.api_key, key('b'));
});

test('resolution: flag, then FOUNTAIN_PROFILE, then default; env overrides; trailing slash trimmed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cred-'));
  const path = join(dir, 'credentials');
  saveProfile('default', { base_url: 'http://127.0.0.1:4000/', api_key: key('a') }, path);
  saveProfile('work', { base_url: 'http://127.0.0.1:9', api_key: key('b') }, path);
  assert.equal(resolveCredentials({}, {}, path).apiKey, key('a'));
  assert.equal(resolveCredentials({}, {}, path).baseUrl, 'http://127.0.0.1:4000');
  assert.equal(resolveCredentials({}, { FOUNTAIN_PROFILE: 'work' }, path).apiKey, key('b'));
  assert.equal(resolveCredentials({ profile: 'default' }, { FOUNTAIN_PROFILE: 'work' }, path).apiKey, key('a'));
  const over = resolveCredentials({}, { FOUNTAIN_API_KEY: key('c'), FOUNTAIN_BASE_URL: 'http://x:1' }, path);
  assert.deepEqual([over.apiKey, over.baseUrl], [key('c'), 'http://x:1']);
  assert.equal(resolveCredentials({ profile: 'none' }, {}, path).apiKey, undefined);
});

test('a malformed credentials file is a clear error naming the line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cred-'));
  const path = join(dir, 'credentials');
  writeFileSync(path, '[default]\nthis is not ini\n');
  assert.throws(
    () => readCredentials(path),
    (e: unknown) => e instanceof CredentialsError && /credentials:2/.test(e.message),
  );
  writeFileSync(path, '[default]\napi_key = "nope"\n');
  assert.throws(() => readCredentials(path), /api_key must be ftn_/);
});
