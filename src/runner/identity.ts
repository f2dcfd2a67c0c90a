/**
 * The daemon's identity defaults: the sanitised hostname as name, the
 * default sandbox root, and the Go-style os/arch names the server records.
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** Lowercased, cut at the first dot, runs outside [a-z0-9._-] → '-', edges trimmed, max 63, empty → runner. */
export function defaultRunnerName(hostname: string): string {
  const cut = hostname.toLowerCase().split('.')[0] ?? '';
  const cleaned = cut.replace(/[^a-z0-9._-]+/g, '-').replace(/^[-._]+|[-._]+$/g, '');
  const short = cleaned.slice(0, 63).replace(/[-._]+$/g, '');
  return short === '' ? 'runner' : short;
}

export const defaultRoot = (name: string, home = homedir()): string =>
  resolve(join(home, '.fountain', 'runners', name, 'sandboxes'));

const GOOS: Record<string, string> = { win32: 'windows', sunos: 'solaris' };
const GOARCH: Record<string, string> = { x64: 'amd64', ia32: '386', ppc64: 'ppc64le' };
export const goos = (platform: string = process.platform): string => GOOS[platform] ?? platform;
export const goarch = (arch: string = process.arch): string => GOARCH[arch] ?? arch;
