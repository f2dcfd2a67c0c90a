/**
 * Per-sandbox files: the private rootfs copy (made once, never replaced) and vm.json, which holds
 * the tap, address and MAC so a daemon restart rebuilds the same VM.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, copyFile, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';

export const DISK_FILE = 'rootfs.ext4';
export const VM_FILE = 'vm.json';

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * Copies the base image to `<dir>/rootfs.ext4` unless a disk is already there: the disk is the
 * agent's memory. `cp --reflink=auto` (cheap on XFS/Btrfs) into a `.partial` file, then a rename,
 * so an interrupted copy is never taken for the disk.
 */
export async function ensureDisk(dir: string, base: string): Promise<Result<string, string>> {
  const target = join(dir, DISK_FILE);
  if (existsSync(target)) return ok(target);
  const partial = `${target}.partial`;
  await rm(partial, { force: true });
  const cp = await new Promise<string | null>((resolve) => {
    execFile('cp', ['--reflink=auto', '--sparse=always', base, partial], (e, _out, stderr) =>
      resolve(e ? (stderr || e.message).trim() : null),
    );
  });
  try {
    if (cp !== null) {
      // No GNU cp (or it refused): a plain streaming copy still gives a private disk.
      await rm(partial, { force: true });
      await copyFile(base, partial);
    }
    await rename(partial, target);
    return ok(target);
  } catch (e) {
    await rm(partial, { force: true });
    return err(`cannot copy the base rootfs ${base}: ${message(e)}`);
  }
}

export const vmFileSchema = z.object({
  tap: z.string().regex(/^[a-z0-9]{1,15}$/),
  ip: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}$/),
  mac: z.string().regex(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/),
});
export type VmFile = z.infer<typeof vmFileSchema>;

/** Null when absent; an unreadable or malformed file is an error (never silently re-addressed). */
export async function readVmFile(dir: string): Promise<Result<VmFile | null, string>> {
  const path = join(dir, VM_FILE);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? ok(null) : err(`cannot read ${path}: ${message(e)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return err(`${path} is not JSON`);
  }
  const parsed = vmFileSchema.safeParse(json);
  return parsed.success
    ? ok(parsed.data)
    : err(`${path} is malformed: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
}

export async function writeVmFile(dir: string, vm: VmFile): Promise<Result<void, string>> {
  const path = join(dir, VM_FILE);
  try {
    await writeFile(`${path}.partial`, `${JSON.stringify(vm)}\n`, { mode: 0o600 });
    await chmod(`${path}.partial`, 0o600);
    await rename(`${path}.partial`, path);
    return ok(undefined);
  } catch (e) {
    return err(`cannot write ${path}: ${message(e)}`);
  }
}

/** Addresses held by every sandbox under the root, so a new one gets a free address. */
export async function takenAddresses(root: string): Promise<Set<string>> {
  const taken = new Set<string>();
  let entries;
  try {
    entries = await readdir(root, { withFileTypes: true });
  } catch {
    return taken;
  }
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.')) continue;
    const vm = await readVmFile(join(root, e.name));
    if (vm.ok && vm.value) taken.add(vm.value.ip);
  }
  return taken;
}
